package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// entry is where one tar entry of an archive lies.
type entry struct {
	name       string
	head, data int64 // offsets of its header and its content
	size       int64
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// layout lists the entries of arc with their offsets.
func layout(t *testing.T, arc []byte) []entry {
	t.Helper()
	c := &counter{r: bytes.NewReader(arc)}
	tr := tar.NewReader(c)
	var out []entry
	for {
		// The reader has consumed the previous entry's content and padding
		// only when Next runs; its header starts at the next 512 boundary.
		head := c.n
		if len(out) > 0 {
			prev := out[len(out)-1]
			head = prev.data + (prev.size+511)/512*512
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, entry{name: hdr.Name, head: head, data: c.n, size: hdr.Size})
	}
}

func find(t *testing.T, es []entry, prefix string, nth int) entry {
	t.Helper()
	for _, e := range es {
		if strings.HasPrefix(e.name, prefix) {
			if nth == 0 {
				return e
			}
			nth--
		}
	}
	t.Fatalf("no entry %s", prefix)
	return entry{}
}

// rewrite rebuilds arc through fn, which may change an entry's content or
// drop it (nil), or add entries.
func rewrite(t *testing.T, arc []byte, fn func(name string, b []byte) []byte) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(arc))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		b = fn(hdr.Name, b)
		if b == nil {
			continue
		}
		hdr.Size = int64(len(b))
		require.NoError(t, tw.WriteHeader(hdr))
		_, err = tw.Write(b)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return out.Bytes()
}

func flip(arc []byte, off int64) []byte {
	b := bytes.Clone(arc)
	b[off] ^= 0x20
	return b
}

// flipIn changes the byte just after the first occurrence of s inside e
// by its lowest bit, so a digit stays a digit and the JSON stays valid:
// only the digest, or the address, can tell.
func flipIn(t *testing.T, arc []byte, e entry, s string) []byte {
	t.Helper()
	i := bytes.Index(arc[e.data:e.data+e.size], []byte(s))
	require.GreaterOrEqual(t, i, 0, "%q in %s", s, e.name)
	b := bytes.Clone(arc)
	b[e.data+int64(i)+int64(len(s))] ^= 0x01
	return b
}

func TestImportRefusesDamage(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	es := layout(t, arc)
	manifest, records, end := es[0], find(t, es, "records.jsonl", 0), find(t, es, "end.json", 0)
	blob, tree := find(t, es, "blobs/", 0), find(t, es, "trees/", 3)
	var big entry
	for _, e := range es {
		if strings.HasPrefix(e.name, "blobs/") && e.size > 200<<10 {
			big = e
		}
	}
	require.NotZero(t, big.size)
	truncate := func(n int64) []byte { return bytes.Clone(arc[:n]) }

	for _, tc := range []struct {
		name string
		arc  []byte
		code wserr.Code
	}{
		{"TruncatedEmpty", truncate(0), wserr.ArchiveCorrupt},
		{"TruncatedInManifestHeader", truncate(100), wserr.ArchiveCorrupt},
		{"TruncatedInManifest", truncate(manifest.data + manifest.size/2), wserr.ArchiveCorrupt},
		{"TruncatedInBlob", truncate(blob.data + blob.size/2), wserr.ArchiveCorrupt},
		{"TruncatedInChunkedBlob", truncate(big.data + big.size - 10), wserr.ArchiveCorrupt},
		{"TruncatedBeforeTree", truncate(tree.head), wserr.ArchiveCorrupt},
		{"TruncatedInTree", truncate(tree.data + tree.size/2), wserr.ArchiveCorrupt},
		{"TruncatedInRecords", truncate(records.data + records.size/2), wserr.ArchiveCorrupt},
		{"TruncatedBeforeEnd", truncate(end.head), wserr.ArchiveCorrupt},
		{"TruncatedInEnd", truncate(end.data + end.size/2), wserr.ArchiveCorrupt},
		{"FlippedInBlob", flip(arc, blob.data+blob.size/2), wserr.ArchiveCorrupt},
		{"FlippedInChunkedBlob", flip(arc, big.data+big.size-1), wserr.ArchiveCorrupt},
		{"FlippedInTree", flip(arc, tree.data+tree.size-1), wserr.ArchiveCorrupt},
		{"FlippedInManifestAddress", flipIn(t, arc, manifest, `"hash":"`), wserr.ArchiveCorrupt},
		{"FlippedInManifestSize", flipIn(t, arc, manifest, `"size":`), wserr.ArchiveCorrupt},
		{"FlippedInJournalPayload", flipIn(t, arc, records, `"path":"output/m`), wserr.ArchiveCorrupt},
		{"FlippedInJournalTime", flipIn(t, arc, records, `"at":"2026-04-2`), wserr.ArchiveCorrupt},
		{"FlippedInCheckpointRow", flipIn(t, arc, records, `"reason":"af`), wserr.ArchiveCorrupt},
		{"FlippedInEndDigest", flipIn(t, arc, end, `"digest":"`), wserr.ArchiveCorrupt},
		{"FlippedInChatRow", flipIn(t, arc, records, `"persistVersion":`), wserr.ArchiveCorrupt},
		{"FlippedInEntryHeader", flip(arc, blob.head+10), wserr.ArchiveCorrupt},
		{"MissingBlob", rewrite(t, arc, func(name string, b []byte) []byte {
			if name == blob.name {
				return nil
			}
			return b
		}), wserr.ArchiveCorrupt},
		{"MissingTree", rewrite(t, arc, func(name string, b []byte) []byte {
			if name == tree.name {
				return nil
			}
			return b
		}), wserr.ArchiveCorrupt},
		{"MissingEnd", rewrite(t, arc, func(name string, b []byte) []byte {
			if name == "end.json" {
				return nil
			}
			return b
		}), wserr.ArchiveCorrupt},
		{"WrongVersion", rewrite(t, arc, func(name string, b []byte) []byte {
			if name == "wsstore-archive.json" {
				return bytes.Replace(b, []byte(`"version":1`), []byte(`"version":2`), 1)
			}
			return b
		}), wserr.ArchiveUnsupportedVersion},
		{"NotAnArchive", random(9, 4096), wserr.ArchiveCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := open(t)
			_, err := dst.Archive.Import(context.Background(), bytes.NewReader(tc.arc), archive.Options{})
			require.Error(t, err)
			assert.Equal(t, tc.code, wserr.CodeOf(err), "%v", err)
			t.Logf("%v", err)
			assertEmpty(t, dst)
		})
	}
}

// assertEmpty checks that no row of an import is visible; the store's
// cleanup then runs fsck, which must find it sound.
func assertEmpty(t *testing.T, s *wsstore.Store) {
	t.Helper()
	ctx := context.Background()
	chats, err := s.Runs.Chats(ctx)
	require.NoError(t, err)
	assert.Empty(t, chats)
	rs, err := s.Runs.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	assert.Empty(t, rs)
	spaces, err := s.Actors.Actors(ctx)
	require.NoError(t, err)
	assert.Empty(t, spaces)
}
