package archive

import (
	"encoding/binary"
	"fmt"
	"hash"
	"time"

	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
)

// FormatName is the manifest's format field: what makes a tar file a
// wsstore archive.
const FormatName = "wsstore-archive"

// Version is the format version this build writes and the only one it
// reads.
const Version = 1

// Entry names, in the order they appear.
const (
	manifestName = "wsstore-archive.json"
	blobPrefix   = "blobs/"
	treePrefix   = "trees/"
	recordsName  = "records.jsonl"
	endName      = "end.json"
)

// Limits on what import reads whole: a value of the manifest (a field, an
// element of one of its lists), a tree or a row (a line of records.jsonl)
// larger than these is refused as corrupt rather than read into memory;
// the manifest itself is read a value at a time, at any size. A commit's
// message is at most runs.MaxMessageBytes (since there was a cap); a row
// near maxRowBytes holds a host value of tens of MiB (a manifest, a
// context record, a receipt). Export refuses a row past it, which no
// import would read.
const (
	maxManifestValue = 64 << 20
	maxTreeBytes     = 64 << 20
	maxRowBytes      = 64 << 20
)

// Manifest is the archive's first entry: what it is and what it holds.
// Its JSON also lists every blob address with the blob's size ("blobs")
// and every tree address ("trees"), after the fields below; those lists
// are written and read one address at a time, never held whole
// (ReadManifest passes the blobs to a function).
type Manifest struct {
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	Scope     Scope     `json:"scope"`
	Chats     []string  `json:"chats"`
	Runs      []string  `json:"runs"`
	Actors    []string  `json:"actors"`
	// Bytes is the plain size of all blobs.
	Bytes int64 `json:"bytes"`
	// BlobsElsewhere says the archive holds no blob entries: its blobs
	// are on a blob tier writer and reader share (Options.BlobsElsewhere).
	// In the JSON it follows the lists.
	BlobsElsewhere bool `json:"-"`
	// BlobCount and TreeCount are how many blobs and trees the lists
	// name.
	BlobCount int64 `json:"-"`
	TreeCount int64 `json:"-"`
}

// BlobRef is one blob of the manifest.
type BlobRef struct {
	Hash cas.Hash `json:"hash"`
	Size int64    `json:"size"`
}

// Record is one line of records.jsonl: exactly one field is set.
type Record struct {
	Chat       *runs.ChatRecord     `json:"chat,omitempty"`
	Run        *runs.RunRecord      `json:"run,omitempty"`
	Checkpoint *checkpoint.Record   `json:"checkpoint,omitempty"`
	Commit     *runs.CommitRow      `json:"commit,omitempty"`
	Event      *journal.Event       `json:"event,omitempty"`
	Space      *actors.SpaceRecord  `json:"actor,omitempty"`
	Change     *actors.ChangeRecord `json:"change,omitempty"`
	Tail       *RunTail             `json:"tail,omitempty"`
}

// RunTail leads the rows of a run an archive holds from a journal seq on
// (Scope.From): the seq of its first event (the anchor) and the seq of
// every checkpoint the writer holds, so the importer deletes those it
// pruned.
type RunTail struct {
	RunID       string  `json:"runId"`
	From        int64   `json:"from"`
	Checkpoints []int64 `json:"checkpoints"`
}

// name says which row r is, for an error.
func (r Record) name() string {
	switch {
	case r.Chat != nil:
		return "chat " + r.Chat.ID
	case r.Run != nil:
		return "run " + r.Run.ID
	case r.Checkpoint != nil:
		return fmt.Sprintf("checkpoint %s#%d", r.Checkpoint.RunID, r.Checkpoint.Seq)
	case r.Commit != nil:
		return "commit " + r.Commit.ID
	case r.Event != nil:
		return fmt.Sprintf("event %s#%d", r.Event.RunID, r.Event.Seq)
	case r.Space != nil:
		return "actor " + r.Space.Actor
	case r.Change != nil:
		return "change of actor " + r.Change.Actor
	case r.Tail != nil:
		return "tail of run " + r.Tail.RunID
	}
	return "empty row"
}

func (r Record) fields() int {
	n := 0
	for _, set := range []bool{r.Chat != nil, r.Run != nil, r.Checkpoint != nil, r.Commit != nil, r.Event != nil, r.Space != nil, r.Change != nil, r.Tail != nil} {
		if set {
			n++
		}
	}
	return n
}

// End is the last entry: the number of entries before it and the digest
// over them.
type End struct {
	Entries int64  `json:"entries"`
	Digest  string `json:"digest"`
}

// digest is the running BLAKE3 over every entry before end.json: for each,
// its name, a zero byte, its size as 8 bytes big-endian, and its content.
// It catches damage the addresses cannot (a flipped byte in a row).
type digest struct {
	h       hash.Hash
	entries int64
}

func newDigest() *digest { return &digest{h: blake3.New(32, nil)} }

func (d *digest) entry(name string, size int64) {
	d.entries++
	d.h.Write([]byte(name))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(size))
	d.h.Write(b[:])
}

func (d *digest) Write(p []byte) (int, error) { return d.h.Write(p) }

func (d *digest) sum() string {
	var h cas.Hash
	copy(h[:], d.h.Sum(nil))
	return h.String()
}
