package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// fuzzArchive is a small archive of a run with two checkpoints and a
// commit, and an actor space: the archive the fuzz target damages.
func fuzzArchive(f *testing.F) []byte {
	ctx := context.Background()
	s := open(f)
	must := func(err error) { require.NoError(f, err) }
	_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	must(err)
	ws := s.Runs.Workspace("r1", runs.HostScope)
	_, err = ws.Write(ctx, vfs.MustPath("output/main.md"), []byte("# A\nfirst\n"), vfs.WriteOptions{})
	must(err)
	_, err = ws.Write(ctx, vfs.MustPath("output/main.md"), []byte("# A\nfirst\nsecond\n"), vfs.WriteOptions{})
	must(err)
	_, err = ws.Write(ctx, vfs.MustPath("plan/b.txt"), []byte("plan"), vfs.WriteOptions{})
	must(err)
	_, err = s.Runs.Commit(ctx, "r1", runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"messageId":"m1"}`), nil
	}), runs.CommitOptions{})
	must(err)
	_, err = s.Actors.Upload(ctx, "alice", "reports/w.md", strings.NewReader("week 1"))
	must(err)
	var buf bytes.Buffer
	_, err = s.Archive.Export(ctx, &buf, archive.Scope{All: true}, archive.Options{})
	must(err)
	return buf.Bytes()
}

// entries splits arc into its tar entries (name and content).
func entries(arc []byte) (names []string, bodies [][]byte, hdrs []*tar.Header) {
	tr := tar.NewReader(bytes.NewReader(arc))
	for {
		hdr, err := tr.Next()
		if err != nil {
			return
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return
		}
		names, bodies, hdrs = append(names, hdr.Name), append(bodies, b), append(hdrs, hdr)
	}
}

// signed writes the entries as a tar stream whose end.json holds their
// digest, as whoever edits an archive can compute it.
func signed(names []string, bodies [][]byte, hdrs []*tar.Header) []byte {
	h := blake3.New(32, nil)
	n := int64(0)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for i, name := range names {
		b := bodies[i]
		if name == "end.json" {
			var sum cas.Hash
			copy(sum[:], h.Sum(nil))
			b, _ = json.Marshal(archive.End{Entries: n, Digest: sum.String()})
		} else {
			n++
			h.Write([]byte(name))
			var size [9]byte
			binary.BigEndian.PutUint64(size[1:], uint64(len(b)))
			h.Write(size[:])
			h.Write(b)
		}
		hdr := *hdrs[i]
		hdr.Size = int64(len(b))
		if tw.WriteHeader(&hdr) != nil {
			return nil
		}
		tw.Write(b)
	}
	tw.Close()
	return out.Bytes()
}

// FuzzImport imports a damaged archive into an empty store: the raw
// stream with bytes spliced in (mode 0), or one entry's content replaced
// (mode 1) or spliced (mode 2) and the digest computed again, so the
// damage reaches the manifest, the trees and the rows. Import must not
// panic; it either succeeds or fails with a coded error other than
// store.internal and leaves no row; the store is sound after it either
// way.
func FuzzImport(f *testing.F) {
	arc := fuzzArchive(f)
	names, _, _ := entries(arc)
	f.Add(uint8(0), uint16(0), uint32(0), []byte{})
	f.Add(uint8(0), uint16(0), uint32(600), []byte("\x00\x00"))
	seen := map[string]bool{}
	for i, name := range names {
		kind, _, _ := strings.Cut(name, "/")
		if !seen[kind] {
			seen[kind] = true
			f.Add(uint8(2), uint16(i), uint32(7), []byte("0}"))
		}
	}
	f.Add(uint8(1), uint16(len(names)-2), uint32(0), []byte(`{"chat":{}}`))
	f.Add(uint8(1), uint16(0), uint32(0), []byte(`{"format":"wsstore-archive","version":1,"blobs":[{"hash":"`+strings.Repeat("0", 64)+`","size":-1}]}`))
	// Each input imports into a copy of one new store: opening a copy
	// costs no migration.
	tmpl := f.TempDir()
	empty, err := wsstore.Open(context.Background(), tmpl, wsstore.Options{ReclaimIdle: -1})
	require.NoError(f, err)
	require.NoError(f, empty.Close())
	f.Fuzz(func(t *testing.T, mode uint8, entry uint16, off uint32, data []byte) {
		var damaged []byte
		switch mode % 3 {
		case 0:
			o := int(off) % (len(arc) + 1)
			damaged = append(append(append([]byte{}, arc[:o]...), data...), arc[min(len(arc), o+len(data)):]...)
		default:
			names, bodies, hdrs := entries(arc)
			i := int(entry) % len(names)
			if mode%3 == 1 {
				bodies[i] = data
			} else {
				b := bodies[i]
				o := int(off) % (len(b) + 1)
				bodies[i] = append(append(append([]byte{}, b[:o]...), data...), b[min(len(b), o+len(data)):]...)
			}
			damaged = signed(names, bodies, hdrs)
		}
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(tmpl)))
		dst, err := wsstore.Open(context.Background(), dir, wsstore.Options{ReclaimIdle: -1})
		require.NoError(t, err)
		defer func() { require.NoError(t, dst.Close()) }()
		_, err = dst.Archive.Import(context.Background(), bytes.NewReader(damaged), archive.Options{})
		if err != nil {
			code := wserr.CodeOf(err)
			assert.NotEqual(t, wserr.Internal, code, "%v", err)
			assertEmpty(t, dst)
		}
		rep, err := dst.Fsck(context.Background(), nil)
		require.NoError(t, err)
		require.Empty(t, rep.Problems)
	})
}
