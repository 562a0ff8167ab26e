package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
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

// flipAfter flips, by its lowest bit, the byte after the first s at or
// after offset from: a digit stays a digit.
func flipAfter(t *testing.T, arc []byte, from int64, s string) []byte {
	t.Helper()
	i := bytes.Index(arc[from:], []byte(s))
	require.GreaterOrEqual(t, i, 0, "%q after %d", s, from)
	b := bytes.Clone(arc)
	b[from+int64(i)+int64(len(s))] ^= 0x01
	return b
}

// rawEdit changes the 512-byte tar header at off with fn and puts its
// checksum right again, as a tool that edits headers would.
func rawEdit(arc []byte, off int64, fn func(h []byte)) []byte {
	b := bytes.Clone(arc)
	h := b[off : off+512]
	fn(h)
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
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

func TestImportRefusesDamage(t *testing.T) { eachSpill(t, testImportRefusesDamage) }

func testImportRefusesDamage(t *testing.T) {
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
		// The PAX records before an entry's header: its time, and the
		// record's key.
		{"FlippedInHeaderTime", flipAfter(t, arc, tree.head, "mtime="), wserr.ArchiveCorrupt},
		{"FlippedInHeaderRecordKey", flipAfter(t, arc, tree.head, "mtim"), wserr.ArchiveCorrupt},
		{"FlippedInManifestHeaderTime", flipAfter(t, arc, 0, "mtime="), wserr.ArchiveCorrupt},
		{"ChangedHeaderMode", rawEdit(arc, blob.data-512, func(h []byte) { h[100+4] ^= 0x01 }), wserr.ArchiveCorrupt},
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

// TestImportNamesAStrayEntry: an entry the format does not have (a name
// that climbs out of a directory, a blob after the trees), where the rows
// belong, is archive.corrupt naming that entry, not a records entry said
// to be missing; nothing is written under its name.
func TestImportNamesAStrayEntry(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	blob := find(t, layout(t, arc), "blobs/", 0)
	for _, tc := range []struct{ test, name string }{{"NameClimbsOut", "../../stray"}, {"BlobAfterTrees", blob.name}} {
		name := tc.name
		t.Run(tc.test, func(t *testing.T) {
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
				if hdr.Name == "records.jsonl" {
					stray := *hdr
					stray.Name, stray.Size = name, 1
					require.NoError(t, tw.WriteHeader(&stray))
					_, err = tw.Write([]byte("x"))
					require.NoError(t, err)
				}
				require.NoError(t, tw.WriteHeader(hdr))
				_, err = tw.Write(b)
				require.NoError(t, err)
			}
			require.NoError(t, tw.Close())
			dst := open(t)
			_, err := dst.Archive.Import(context.Background(), &out, archive.Options{})
			require.Error(t, err)
			assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%v", err)
			assert.Contains(t, err.Error(), strconv.Quote(name))
			assert.NotContains(t, err.Error(), "missing")
			assertEmpty(t, dst)
		})
	}
}

// assertEmpty checks that no row of an import is visible; the store's
// cleanup then runs fsck, which must find it sound.
func assertEmpty(t *testing.T, s *wsstore.Store) {
	t.Helper()
	ctx := context.Background()
	chats, _, err := s.Runs.ChatsPage(ctx, runs.ChatQuery{})
	require.NoError(t, err)
	assert.Empty(t, chats)
	rs, err := s.Runs.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	assert.Empty(t, rs)
	spaces, err := s.Actors.Actors(ctx)
	require.NoError(t, err)
	assert.Empty(t, spaces)
}

// resign rebuilds arc as rewrite does and signs it again: end.json gets
// the digest of the entries as rewritten, as whoever edits an archive can
// compute it. Only what the rows say can then tell the damage.
func resign(t *testing.T, arc []byte, fn func(name string, b []byte) []byte) []byte {
	t.Helper()
	h := blake3.New(32, nil)
	n := int64(0)
	return rewrite(t, arc, func(name string, b []byte) []byte {
		if name == "end.json" {
			var end archive.End
			require.NoError(t, json.Unmarshal(b, &end))
			var sum cas.Hash
			copy(sum[:], h.Sum(nil))
			end.Entries, end.Digest = n, sum.String()
			out, err := json.Marshal(end)
			require.NoError(t, err)
			return out
		}
		b = fn(name, b)
		if b == nil {
			return nil
		}
		n++
		h.Write([]byte(name))
		var size [9]byte
		binary.BigEndian.PutUint64(size[1:], uint64(len(b)))
		h.Write(size[:])
		h.Write(b)
		return b
	})
}

// TestImportRefusesResignedRows: an archive whose rows were edited and
// whose digest was computed again passes the digest; rows that do not fit
// together (a run status no run has, a checkpoint whose parent is not
// one, a run whose chat row is gone, an event out of order, a run's head
// or a commit that names no checkpoint of the run) are still
// archive.corrupt, and nothing is imported.
func TestImportRefusesResignedRows(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	records := func(edit func(lines []string) []string) []byte {
		return resign(t, arc, func(name string, b []byte) []byte {
			if name != "records.jsonl" {
				return b
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			return []byte(strings.Join(edit(lines), "\n") + "\n")
		})
	}
	replaceFirst := func(in, old, new string) func([]string) []string {
		return func(lines []string) []string {
			for i, l := range lines {
				if strings.Contains(l, in) && strings.Contains(l, old) {
					lines[i] = strings.Replace(l, old, new, 1)
					return lines
				}
			}
			t.Fatalf("no line with %q and %q", in, old)
			return nil
		}
	}
	replaceRe := func(in, old, new string) func([]string) []string {
		line, field := regexp.MustCompile(in), regexp.MustCompile(old)
		return func(lines []string) []string {
			for i, l := range lines {
				if line.MatchString(l) && field.MatchString(l) {
					lines[i] = field.ReplaceAllString(l, new)
					return lines
				}
			}
			t.Fatalf("no line matching %s with %s", in, old)
			return nil
		}
	}
	unchanged := records(func(lines []string) []string { return lines })
	_, err := open(t).Archive.Import(context.Background(), bytes.NewReader(unchanged), archive.Options{})
	require.NoError(t, err, "an archive signed again unchanged imports")

	for _, tc := range []struct {
		name string
		arc  []byte
	}{
		{"UnknownRunStatus", records(replaceFirst(`"run":`, `"status":"`, `"status":"bogus`))},
		{"CheckpointParentMissing", records(replaceFirst(`"checkpoint":`, `"parentSeq":1`, `"parentSeq":77`))},
		{"RunWithoutItsChatRow", records(func(lines []string) []string {
			for i, l := range lines {
				if strings.HasPrefix(l, `{"chat":`) {
					return append(lines[:i:i], lines[i+1:]...)
				}
			}
			t.Fatal("no chat row")
			return nil
		})},
		{"EventSeqOutOfOrder", records(replaceFirst(`"event":`, `"seq":2,`, `"seq":9,`))},
		{"RunHeadMissing", records(replaceRe(`^\{"run":`, `"headCheckpoint":\d+`, `"headCheckpoint":99`))},
		{"CommitCheckpointMissing", records(replaceRe(`^\{"commit":`, `"checkpointSeq":\d+`, `"checkpointSeq":99`))},
		{"CommitMessageNotJSON", records(replaceFirst(`"commit":`, `"message":"{`, `"message":"nope{`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := open(t)
			_, err := dst.Archive.Import(context.Background(), bytes.NewReader(tc.arc), archive.Options{})
			require.Error(t, err)
			assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%v", err)
			assertEmpty(t, dst)
		})
	}
}

// TestManifestPaddingIsNotHeld: white space after the manifest's JSON
// value is read through the digest and dropped, not held: 96 MiB of it
// import with the heap growing far less; anything else after the value is
// archive.corrupt.
// TestImportRefusesDataAfterTheEnd: zero padding after the tar stream's
// end (as tar tools write to fill a record) imports; anything else after
// it, such as a second archive joined to the first, is archive.corrupt
// and nothing is written.
func TestImportRefusesDataAfterTheEnd(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	dst := open(t)
	_, err := dst.Archive.Import(context.Background(), bytes.NewReader(slices.Concat(arc, make([]byte, 10240))), archive.Options{})
	require.NoError(t, err, "a record's zero padding")
	for name, tail := range map[string][]byte{
		"TwoArchives":   arc,
		"Garbage":       []byte("x"),
		"ZerosThenByte": append(make([]byte, 100000), 1),
		"LongPadding":   make([]byte, 2<<20),
	} {
		t.Run(name, func(t *testing.T) {
			dst := open(t)
			_, err := dst.Archive.Import(context.Background(), bytes.NewReader(slices.Concat(arc, tail)), archive.Options{})
			assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%v", err)
			assertEmpty(t, dst)
		})
	}
}

// TestManifestPaddingIsNotHeld: 96 MiB of white space after the manifest
// imports with the live heap growing by 8 MiB, other tests loading both
// cores or not, where holding the archive took 104 MiB; anything else
// after the manifest is archive.corrupt.
func TestManifestPaddingIsNotHeld(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	pad := func(tail []byte) []byte {
		return resign(t, arc, func(name string, b []byte) []byte {
			if name == "wsstore-archive.json" {
				return append(b, tail...)
			}
			return b
		})
	}
	dst := open(t)
	grew, err := importFromFile(t, dst, pad(bytes.Repeat([]byte(" \n"), 48<<20)))
	require.NoError(t, err)
	assert.Less(t, grew, uint64(32<<20), "the padding is not held")

	for _, tail := range []string{"x", "{}", " \x00"} {
		dst := open(t)
		_, err := dst.Archive.Import(context.Background(), bytes.NewReader(pad([]byte(tail))), archive.Options{})
		assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%q after the manifest: %v", tail, err)
		assertEmpty(t, dst)
	}
}

// importFromFile imports arc into dst from a file, so that the heap holds
// no copy of it, and returns the most the heap grew meanwhile.
func importFromFile(t *testing.T, dst *wsstore.Store, arc []byte) (uint64, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "archive.wsar")
	require.NoError(t, os.WriteFile(path, arc, 0o644))
	var err error
	grew := storetest.HeapGrowth(func() {
		_, err = importFile(t, dst, path, archive.Options{})
	})
	t.Logf("heap grew %.1f MiB at most", float64(grew)/(1<<20))
	return grew, err
}

// TestImportRefusesARowPastItsCap: a row of records.jsonl longer than the
// importer reads whole (a commit's message edited to carry 200 MiB, the
// archive signed again) is archive.corrupt, refused with the live heap
// growing by far less than the row (83–85 MiB, reading up to the cap, other
// tests loading both cores or not; holding the archive took 290 MiB); two
// rows on one line, or anything but white space after a row, are corrupt
// too.
func TestImportRefusesARowPastItsCap(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	edit := func(fn func(line string) string) []byte {
		return resign(t, arc, func(name string, b []byte) []byte {
			if name != "records.jsonl" {
				return b
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			for i, l := range lines {
				if strings.HasPrefix(l, `{"commit":`) {
					lines[i] = fn(l)
					return []byte(strings.Join(lines, "\n") + "\n")
				}
			}
			t.Fatal("no commit row")
			return nil
		})
	}
	dst := open(t)
	grew, err := importFromFile(t, dst, edit(func(l string) string {
		return strings.Replace(l, `"message":"`, `"message":"`+strings.Repeat("x", 200<<20), 1)
	}))
	assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%v", err)
	assert.Less(t, grew, uint64(192<<20), "the row is not read whole")
	assertEmpty(t, dst)

	for _, after := range []string{"", "}", "]]", " x"} {
		bad := edit(func(l string) string {
			if after == "" {
				return l + l // two rows
			}
			return l + after
		})
		_, err = dst.Archive.Import(context.Background(), bytes.NewReader(bad), archive.Options{})
		assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%q after a row: %v", after, err)
		assertEmpty(t, dst)
	}
}

// TestExportRefusesARowPastTheImportCap: a row no import would read back
// (a commit whose receipt is 65 MiB, as a build that did not hold a sink's
// receipt to runs.MaxOutcomeBytes stored it) fails the export with
// workspace.size_limit_exceeded naming the row, and no file is left
// where it was asked for.
func TestExportRefusesARowPastTheImportCap(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	_, err = s.Runs.Workspace(run.ID, runs.ModelScope).Write(ctx, vfs.MustPath("output/main.md"), []byte("the answer\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = s.Runs.Commit(ctx, run.ID, runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}), runs.CommitOptions{})
	require.NoError(t, err)
	receipt := `"` + strings.Repeat("r", 65<<20) + `"`
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE commits SET receipt = ? WHERE run_id = ?`, receipt, run.ID)
		return err
	}))

	path := filepath.Join(t.TempDir(), "out.wsar")
	_, err = s.ExportFile(ctx, path, archive.Scope{All: true}, archive.Options{})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, wserr.MessageOf(err), "commit commit_r_0001")
	assert.NoFileExists(t, path)
}

// TestImportReadsTheManifestAsJSON: the manifest is read a field and a
// list element at a time, and checked as a whole value would be: a
// manifest indented over many lines imports; a field twice, a field the
// format lacks, a list that is not one, an address listed twice or a
// negative size is archive.corrupt, and another version is refused as
// such before what follows it is read. Nothing is written.
func TestImportReadsTheManifestAsJSON(t *testing.T) {
	eachSpill(t, func(t *testing.T) {
		src := open(t)
		populate(t, src)
		arc, _ := export(t, src, archive.Scope{All: true})
		edit := func(fn func(m []byte) []byte) []byte {
			return resign(t, arc, func(name string, b []byte) []byte {
				if name == "wsstore-archive.json" {
					return fn(bytes.Clone(b))
				}
				return b
			})
		}
		replace := func(old, new string) []byte {
			return edit(func(m []byte) []byte {
				require.Contains(t, string(m), old)
				return bytes.Replace(m, []byte(old), []byte(new), 1)
			})
		}
		// twice repeats the first element of the list named key.
		twice := func(key string) []byte {
			return edit(func(m []byte) []byte {
				i := bytes.Index(m, []byte(`"`+key+`":[`)) + len(key) + 4
				n := bytes.IndexAny(m[i:], ",]")
				if m[i] == '{' {
					n = bytes.IndexByte(m[i:], '}') + 1
				}
				return slices.Concat(m[:i], m[i:i+n], []byte(","), m[i:])
			})
		}

		indented := edit(func(m []byte) []byte {
			var out bytes.Buffer
			require.NoError(t, json.Indent(&out, m, "", "  "))
			return out.Bytes()
		})
		dst := open(t)
		sum, err := dst.Archive.Import(context.Background(), bytes.NewReader(indented), archive.Options{})
		require.NoError(t, err, "an indented manifest")
		assert.Positive(t, sum.Blobs)
		// Field names match as encoding/json matches them: in any case.
		dst = open(t)
		_, err = dst.Archive.Import(context.Background(), bytes.NewReader(replace(`"blobs":[`, `"Blobs":[`)), archive.Options{})
		require.NoError(t, err, "a field name in another case")

		for _, tc := range []struct {
			name string
			arc  []byte
			code wserr.Code
			msg  string
		}{
			{"FieldTwice", replace(`"version":1,`, `"version":1,"runs":[],`), wserr.ArchiveCorrupt, `field "runs" twice`},
			{"UnknownField", replace(`"version":1,`, `"version":1,"extra":1,`), wserr.ArchiveCorrupt, `unknown field "extra"`},
			{"UnknownBlobField", replace(`"size":`, `"extra":1,"size":`), wserr.ArchiveCorrupt, `unknown field "extra"`},
			{"BlobsNotAList", replace(`"blobs":[`, `"blobs":7,"x":[`), wserr.ArchiveCorrupt, "not one"},
			{"RunsNotAList", replace(`"runs":[`, `"runs":{"x":[`), wserr.ArchiveCorrupt, "not one"},
			{"FieldTwiceInAnotherCase", replace(`"version":1,`, `"version":1,"Runs":[],`), wserr.ArchiveCorrupt, `field "runs" twice`},
			{"ValuePastTheLimit", replace(`"runs":[`, `"runs":["`+strings.Repeat("r", 65<<20)+`",`), wserr.ArchiveCorrupt, "a value of more than"},
			{"BlobTwice", twice("blobs"), wserr.ArchiveCorrupt, "listed twice"},
			{"TreeTwice", twice("trees"), wserr.ArchiveCorrupt, "listed twice"},
			{"NegativeSize", replace(`"size":`, `"size":-`), wserr.ArchiveCorrupt, "negative size"},
			{"NotAnAddress", replace(`"trees":["`, `"trees":["zz`), wserr.ArchiveCorrupt, "manifest"},
			{"OtherFormat", replace(`"format":"wsstore-archive"`, `"format":"other"`), wserr.ArchiveCorrupt, "not a wsstore archive"},
			{"NotAnObject", edit(func([]byte) []byte { return []byte(`["wsstore-archive"]`) }), wserr.ArchiveCorrupt, "not a wsstore archive"},
			{"CutShort", edit(func(m []byte) []byte { return m[:len(m)-1] }), wserr.ArchiveCorrupt, "wsstore-archive.json: unexpected EOF"},
			{"NotJSON", replace(`"bytes":`, `"bytes":,`), wserr.ArchiveCorrupt, "unreadable manifest"},
			{"NoVersion", replace(`"version":1,`, ``), wserr.ArchiveUnsupportedVersion, "version 0"},
			{"OtherVersionThenAnUnknownField", replace(`"version":1,`, `"version":2,"extra":1,`), wserr.ArchiveUnsupportedVersion, "version 2"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dst := open(t)
				_, err := dst.Archive.Import(context.Background(), bytes.NewReader(tc.arc), archive.Options{})
				require.Error(t, err)
				assert.Equal(t, tc.code, wserr.CodeOf(err), "%v", err)
				assert.Contains(t, err.Error(), tc.msg)
				assertEmpty(t, dst)
			})
		}
	})
}

// TestReadManifestPassesEachBlob: ReadManifest hands each blob of the
// manifest to its function once, with the size the archive holds, and
// stops at the function's error.
func TestReadManifestPassesEachBlob(t *testing.T) {
	src := open(t)
	populate(t, src)
	arc, sum := export(t, src, archive.Scope{All: true})
	seen := map[cas.Hash]int64{}
	m, err := archive.ReadManifest(context.Background(), bytes.NewReader(arc), func(b archive.BlobRef) error {
		_, dup := seen[b.Hash]
		assert.False(t, dup, "blob %s twice", b.Hash.Short())
		seen[b.Hash] = b.Size
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, sum.Blobs, int64(len(seen)))
	assert.Equal(t, sum.Blobs, m.BlobCount)
	assert.Equal(t, sum.Trees, m.TreeCount)
	var total int64
	for h, size := range seen {
		total += size
		info, err := src.Blobs.Stat(context.Background(), h)
		require.NoError(t, err, "blob %s", h.Short())
		assert.Equal(t, info.Size, size, "blob %s", h.Short())
	}
	assert.Equal(t, sum.Bytes, total)

	stop := errors.New("stop")
	calls := 0
	_, err = archive.ReadManifest(context.Background(), bytes.NewReader(arc), func(archive.BlobRef) error { calls++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)
}

// TestImportCallsAnotherTarNoArchive: a tar file that is not an archive
// (an ordinary one, as tar or a file manager writes it) is named as such,
// not as an archive whose headers were changed.
func TestImportCallsAnotherTarNoArchive(t *testing.T) {
	var arc bytes.Buffer
	tw := tar.NewWriter(&arc)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "notes.txt", Size: 2, Mode: 0o600, Uid: 1000, Uname: "me"}))
	_, err := tw.Write([]byte("hi"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	dst := open(t)
	_, err = dst.Archive.Import(context.Background(), &arc, archive.Options{})
	assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "not a wsstore archive")
	assertEmpty(t, dst)
}

// TestArchivesCheckRecordedSizes: a tree entry that records a size its
// blob does not have (fsck's "size" problem) fails the export with
// store.corrupt, as other damage does, instead of making an archive no
// import takes; and a metadata-only archive whose manifest gives a blob
// the store holds another size than the store's is archive.corrupt, and
// imports nothing, instead of storing a tree fsck then finds wrong.
func TestArchivesCheckRecordedSizes(t *testing.T) {
	ctx := context.Background()
	body := []byte("hello")
	src, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{}) // damaged below: no fsck at its end
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, src.Close()) })
	_, err = src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("r1", runs.HostScope).Write(ctx, vfs.MustPath("output/main.md"), body, vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c2"}, RunID: "r2"})
	require.NoError(t, err)
	// dst holds every blob of the store, and not r2.
	var buf bytes.Buffer
	_, err = src.Archive.Export(ctx, &buf, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	dst := open(t)
	_, err = dst.Archive.Import(ctx, bytes.NewReader(buf.Bytes()), archive.Options{})
	require.NoError(t, err)
	_, err = dst.Runs.CancelAndDeleteRun(ctx, "r2")
	require.NoError(t, err)
	// r2's live tree names body's blob with another size, as a build that
	// recorded a wrong size would have left it.
	run, err := src.Runs.Run(ctx, "r2")
	require.NoError(t, err)
	require.NoError(t, src.DB.Update(ctx, func(tx *index.Tx) error {
		root, err := src.Trees.Set(ctx, tx, run.Root, vfs.MustPath("output/a.md"), &vfs.Entry{Kind: vfs.KindFile, Hash: cas.Sum(body), Size: 7})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE runs SET root = ? WHERE id = 'r2'`, root)
		return err
	}))

	buf.Reset()
	_, err = src.Archive.Export(ctx, &buf, archive.Scope{Runs: []string{"r2"}}, archive.Options{})
	assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)

	buf.Reset()
	_, err = src.Archive.Export(ctx, &buf, archive.Scope{Runs: []string{"r2"}}, archive.Options{BlobsElsewhere: true})
	if err == nil {
		_, err = dst.Archive.Import(ctx, bytes.NewReader(buf.Bytes()), archive.Options{})
		assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%v", err)
	} else {
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
	}
	_, err = dst.Runs.Run(ctx, "r2")
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "%v", err)
}
