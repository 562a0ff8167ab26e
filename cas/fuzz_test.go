package cas_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// storedRow is a blob or chunk row as the tables hold it.
type storedRow struct {
	Hash  []byte `db:"hash"`
	Size  int64  `db:"size"`
	Codec int    `db:"codec"`
	Base  []byte `db:"base"`
	Data  []byte `db:"data"`
	Chunk bool   `db:"-"`
}

// FuzzStoredBlob replaces one stored row (a blob stored raw, compressed,
// with the store's dictionary, as a delta, or chunked, or one chunk) with
// the fuzzer's codec, size, base and bytes, as a damaged disk or a hostile
// editor of the file could, then reads every blob whole and in a range and
// verifies the store: each read returns the blob's own bytes or fails with
// store.corrupt (cas.ErrCorrupt), never panics, and Verify reports the
// damage rather than failing. The row is mended after each input.
func FuzzStoredBlob(f *testing.F) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(f, cas.Options{InlineMax: 1024, DictMax: 512, DictTrainAfter: -1})
	text := func(i, n int) []byte {
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, "line %d of note %d: the quick brown fox\n", b.Len()/40, i)
		}
		return []byte(b.String()[:n])
	}
	put := func(b []byte) cas.Hash {
		h, err := s.Put(ctx, bytes.NewReader(b))
		require.NoError(f, err)
		return h
	}
	contents := map[cas.Hash][]byte{}
	for i := range 80 {
		b := text(i, 300)
		contents[put(b)] = b
	}
	_, ok, err := s.TrainDict(ctx)
	require.NoError(f, err)
	require.True(f, ok)
	var hashes []cas.Hash
	add := func(b []byte, h cas.Hash) {
		contents[h] = b
		hashes = append(hashes, h)
	}
	raw := []byte{0, 1, 2, 3, 250, 251}
	add(raw, put(raw))
	small := text(100, 400) // with the dictionary
	add(small, put(small))
	old := make([]byte, 900) // incompressible: a delta pays
	for i := range old {
		old[i] = byte(i*7919 + i*i*31 + i>>3)
	}
	oldH := put(old)
	add(old, oldH)
	newer := append(bytes.Clone(old[:800]), []byte("a changed end\n")...)
	var newH cas.Hash
	require.NoError(f, db.Update(ctx, func(tx *index.Tx) error {
		newH, err = s.PutVersion(ctx, tx, newer, oldH)
		return err
	}))
	add(newer, newH)
	_, err = s.Drain(ctx)
	require.NoError(f, err)
	large := text(102, 5000) // chunked
	add(large, put(large))

	var rows []storedRow
	require.NoError(f, db.View(ctx, func(tx *index.Tx) error {
		var bs, cs []storedRow
		if err := tx.SelectContext(ctx, &bs, `SELECT hash, size, codec, base, data FROM blobs ORDER BY hash`); err != nil {
			return err
		}
		for _, r := range bs {
			if slices.Contains(hashes, cas.Hash(r.Hash)) {
				rows = append(rows, r)
			}
		}
		if err := tx.SelectContext(ctx, &cs, `SELECT hash, size, codec, NULL AS base, data FROM chunks ORDER BY hash LIMIT 2`); err != nil {
			return err
		}
		for _, r := range cs {
			r.Chunk = true
			rows = append(rows, r)
		}
		return nil
	}))
	codecs := map[int]bool{}
	for _, r := range rows {
		codecs[r.Codec] = true
	}
	require.Len(f, codecs, 4, "raw, zstd, chunked and delta rows")

	for i, r := range rows {
		f.Add(uint8(i), uint8(r.Codec), r.Size, uint8(1), r.Data)
		if len(r.Data) > 4 {
			d := bytes.Clone(r.Data)
			d[len(d)/2] ^= 0xff
			f.Add(uint8(i), uint8(r.Codec), r.Size, uint8(0), d)
			f.Add(uint8(i), uint8(r.Codec), int64(1)<<40, uint8(2), r.Data[:len(r.Data)/2])
		}
	}
	f.Fuzz(func(t *testing.T, target, codec uint8, size int64, base uint8, data []byte) {
		r := rows[int(target)%len(rows)]
		table, maxCodec := "blobs", 4
		if r.Chunk {
			table, maxCodec = "chunks", 2
		}
		var b []byte // the base column: kept, none, another row's, or one no row has
		switch base % 4 {
		case 0:
			b = r.Base
		case 2:
			b = rows[int(base/4)%len(rows)].Hash
		case 3:
			h := cas.Sum(data)
			b = h[:]
		}
		if data == nil {
			data = []byte{}
		}
		if size < 0 {
			size = -size
		}
		if size < 0 {
			size = 0
		}
		if table == "blobs" {
			exec(t, db, `UPDATE blobs SET codec = ?, size = ?, base = ?, data = ? WHERE hash = ?`, int(codec)%maxCodec, size, b, data, r.Hash)
		} else {
			exec(t, db, `UPDATE chunks SET codec = ?, size = ?, data = ? WHERE hash = ?`, int(codec)%maxCodec, size, data, r.Hash)
		}
		defer func() {
			if table == "blobs" {
				exec(t, db, `UPDATE blobs SET codec = ?, size = ?, base = ?, data = ? WHERE hash = ?`, r.Codec, r.Size, r.Base, r.Data, r.Hash)
			} else {
				exec(t, db, `UPDATE chunks SET codec = ?, size = ?, data = ? WHERE hash = ?`, r.Codec, r.Size, r.Data, r.Hash)
			}
		}()
		check := func(what string, h cas.Hash, got, want []byte, err error) {
			if err != nil {
				assert.ErrorIs(t, err, cas.ErrCorrupt, "%s %s", what, h.Short())
				assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%s %s: %v", what, h.Short(), err)
				return
			}
			assert.True(t, bytes.Equal(want, got), "%s %s: wrong bytes", what, h.Short())
		}
		for _, h := range hashes {
			want := contents[h]
			got, err := s.ReadAll(ctx, h)
			check("read", h, got, want, err)
			rc, err := s.GetRange(ctx, h, 3, 700)
			if err == nil {
				got, err = io.ReadAll(rc)
				rc.Close()
			}
			check("range", h, got, want[min(3, len(want)):min(703, len(want))], err)
		}
		_, err := s.Verify(ctx, nil)
		require.NoError(t, err)
	})
}
