package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Options configure a Service. The zero value means the defaults.
type Options struct {
	// Now is the clock for rows and events; default time.Now.
	Now func() time.Time
	// NewRunID generates run ids when a request names none; default
	// "run_" + 16 random hex digits.
	NewRunID func() string
	// Virtual holds the virtual resources every run sees (providers mounted
	// by prefix); default none.
	Virtual *vfs.Virtual
	// MaxStoreBytes caps the store's size on disk (database and
	// write-ahead log): a write that would bring more new content than the
	// room left fails with workspace.size_limit_exceeded and changes
	// nothing. Removals are always allowed. 0 means no cap.
	MaxStoreBytes int64
}

// Service is the entry point for chat workspaces and runs. It is safe for
// concurrent use; writes serialize on the store's one write connection.
type Service struct {
	db          *index.DB
	blobs       *cas.Store
	trees       *vfs.Trees
	journal     *journal.Journal
	checkpoints *checkpoint.Store
	virtual     *vfs.Virtual
	now         func() time.Time
	newRunID    func() string
	maxStore    int64
	// saves serializes the chat sink calls of this Service per chat.
	saves chatLocks

	// fault, when set by tests, is called at named points inside write
	// transactions; an error it returns aborts the transaction there.
	fault func(point string) error
}

// New returns a Service over the given store.
func New(db *index.DB, blobs *cas.Store, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewRunID == nil {
		opts.NewRunID = randomRunID
	}
	if opts.Virtual == nil {
		opts.Virtual = vfs.NewVirtual()
	}
	j := journal.New(db, opts.Now)
	trees := vfs.NewTrees(db, blobs, opts.Now)
	return &Service{
		db:          db,
		blobs:       blobs,
		trees:       trees,
		journal:     j,
		checkpoints: checkpoint.New(db, trees, blobs, j, opts.Now),
		virtual:     opts.Virtual,
		now:         opts.Now,
		newRunID:    opts.NewRunID,
		maxStore:    opts.MaxStoreBytes,
	}
}

func randomRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "run_" + hex.EncodeToString(b[:])
}

// DB returns the index.
func (s *Service) DB() *index.DB { return s.db }

// Blobs returns the content store.
func (s *Service) Blobs() *cas.Store { return s.blobs }

// Trees returns the tree store.
func (s *Service) Trees() *vfs.Trees { return s.trees }

// Journal returns the event journal.
func (s *Service) Journal() *journal.Journal { return s.journal }

// Checkpoints returns the checkpoint store.
func (s *Service) Checkpoints() *checkpoint.Store { return s.checkpoints }

// Virtual returns the virtual resources mounted for every run.
func (s *Service) Virtual() *vfs.Virtual { return s.virtual }

func (s *Service) injected(point string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(point)
}

func (s *Service) update(ctx context.Context, fn func(tx *index.Tx) error) error {
	return s.db.Update(ctx, fn)
}

// checkStoreRoom fails with workspace.size_limit_exceeded if adding bytes
// of new content could take the store past Options.MaxStoreBytes. The
// content is counted as it is before compression, so the check errs on the
// side of refusing.
func (s *Service) checkStoreRoom(op string, p vfs.Path, bytes int64) error {
	return s.roomCheck(op)(p, bytes)
}

// roomCheck returns checkStoreRoom for the contents of one change: each
// call adds its bytes to those of the calls before, all measured against
// the store's size when roomCheck was called.
func (s *Service) roomCheck(op string) func(p vfs.Path, bytes int64) error {
	if s.maxStore <= 0 {
		return func(vfs.Path, int64) error { return nil }
	}
	size := storeSize(s)
	var total int64
	return func(p vfs.Path, bytes int64) error {
		total += bytes
		if bytes > 0 && size+total > s.maxStore {
			return wserr.New(wserr.SizeLimitExceeded, op, p.String(), "the store holds %d bytes of its %d-byte cap; %d more do not fit", size, s.maxStore, total)
		}
		return nil
	}
}

// storeSize is the store's size on disk (0 if it cannot be read, which an
// open store's own file always can).
func storeSize(s *Service) int64 {
	n, _ := s.db.FileBytes()
	return n
}

// capReader fails a streamed write with err once it passes left bytes
// (the room left under a cap), before the store takes more.
type capReader struct {
	r    io.Reader
	left int64
	err  error
}

func (c *capReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.left -= int64(n)
	if c.left < 0 {
		return n, c.err
	}
	return n, err
}
