package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// FuzzSegment reads a segment of the fuzzer's bytes, as another device or
// anyone who can write to the bucket could put one, under the key its
// hash gives: FetchSegment, ReadHeader and ReadTombstones never panic,
// and either read it or fail with a coded error other than
// store.internal; an archive they return reads to its end.
func FuzzSegment(f *testing.F) {
	ctx := context.Background()
	srv := fakeBucket(f)
	st := openStorage(f, srv.URL, "bkt", "store", remote.Options{})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, h := range []remote.SegmentHeader{
		{Device: "dev1", At: at, Base: true},
		{Device: "dev1", At: at.Add(time.Second), Prev: "sync/dev1/00000000000000000001-x.seg", Tombstones: []remote.Tombstone{
			{Kind: "run", ID: "r1", Parent: "chat_1", Seq: 4, Device: "dev1", At: at, Detail: []byte(`{"first":"` + fmt.Sprint(cas0) + `"}`)},
			{Kind: "chat", ID: "chat_1", Device: "dev1", At: at, Detail: []byte(`{"kind":"k","stableChatId":"s"}`)},
		}},
	} {
		seg, err := st.PublishSegment(ctx, h, nil, nil)
		require.NoError(f, err, "segment %d", i)
		b, ok := srv.Object("bkt", "store/"+seg.Key)
		require.True(f, ok)
		f.Add(b, h.Base, []byte{}, []byte{})
		// The same as parts whose hashes the target computes: its first
		// line, and the tombstone section's length and hash in the
		// header, so the fuzzer's changes reach the header's fields and
		// the tombstones.
		first, rest, _ := bytes.Cut(b, []byte("\n"))
		var p struct{ Header int }
		require.NoError(f, json.Unmarshal(first, &p))
		hdr, rest := rest[:p.Header], rest[p.Header:]
		var h3 struct {
			Tombstones struct {
				Length int
				Hash   string
			}
		}
		require.NoError(f, json.Unmarshal(hdr, &h3))
		hdr = bytes.Replace(hdr, []byte(h3.Tombstones.Hash), []byte("TOMBSHASH"), 1)
		hdr = bytes.Replace(hdr, fmt.Appendf(nil, `"length":%d`, h3.Tombstones.Length), []byte(`"length":TOMBSLEN`), 1)
		f.Add([]byte{}, h.Base, hdr, rest[:h3.Tombstones.Length])
	}
	f.Add([]byte(`{"format":"wsstore-sync-segment","version":1,"device":"dev1","at":"2026-01-02T03:04:05Z","base":true,"archive":3,"tombstones":[],"added":["0:`+cas0+`"],"dropped":[]}`+"\nabc"), true, []byte{}, []byte{})
	f.Add([]byte(`{"format":"wsstore-sync-segment","version":2,"device":"dev1","at":"2026-01-02T03:04:05Z","archive":2,"tombstones":[],"droppedObjects":0,"addedObjects":1}`+"\n\x00"+cas0raw+"ab"), false, []byte{}, []byte{})
	f.Add([]byte(`{"format":"wsstore-sync-segment","version":3,"header":1000000000000,"headerHash":"`+cas0+`"}`+"\n{}"), false, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, data []byte, base bool, hdr, tombs []byte) {
		if len(hdr) > 0 {
			// A version 3 segment: its first line, the header with the
			// tombstone section's length and hash, the section, then
			// data (the object section and the archive).
			hdr = bytes.Replace(hdr, []byte("TOMBSHASH"), []byte(cas.Sum(tombs).String()), 1)
			hdr = bytes.Replace(hdr, []byte("TOMBSLEN"), []byte(fmt.Sprint(len(tombs))), 1)
			first := fmt.Appendf(nil, `{"format":"wsstore-sync-segment","version":3,"header":%d,"headerHash":"%s"}`+"\n", len(hdr), cas.Sum(hdr))
			data = slices.Concat(first, hdr, tombs, data)
		}
		seg := putSegmentBytes(srv, "dev1", at, base, data)
		coded := func(what string, err error) {
			t.Helper()
			if err != nil {
				code := wserr.CodeOf(err)
				assert.NotEqual(t, wserr.Internal, code, "%s: %v", what, err)
			}
		}
		_, arch, err := st.FetchSegment(ctx, seg)
		coded("fetch", err)
		if err == nil && arch != nil {
			r, err := arch.Reader()
			if err == nil {
				_, err = io.Copy(io.Discard, r)
			}
			coded("archive", err)
			arch.Close()
		}
		h, err := st.ReadHeader(ctx, seg)
		coded("header", err)
		if err == nil {
			_, err = st.ReadTombstones(ctx, seg, h)
			coded("tombstones", err)
		}
	})
}

// cas0 is an address no object has; cas0raw its 32 bytes.
var (
	cas0    = "00000000000000000000000000000000000000000000000000000000000000aa"
	cas0raw = string(make([]byte, 31)) + "\xaa"
)
