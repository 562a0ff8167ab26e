package actors

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// DB runs transactions; *index.DB implements it.
type DB interface {
	View(ctx context.Context, fn func(tx *index.Tx) error) error
	Update(ctx context.Context, fn func(tx *index.Tx) error) error
}

// Blobs stores and reads file contents as streams; *cas.Store implements
// it.
type Blobs interface {
	Put(ctx context.Context, r io.Reader) (cas.Hash, error)
	Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error)
	Touch(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error)
	// Hold keeps what this process commits from now on from a gc in this
	// process until release: an upload commits its content with Put
	// before the transaction that references it.
	Hold() (release func())
}

// Trees reads and rewrites Merkle trees; *vfs.Trees implements it.
type Trees interface {
	Lookup(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path) (vfs.Entry, error)
	Set(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, e *vfs.Entry) (cas.Hash, error)
	List(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, depth int) ([]vfs.Listed, error)
	ListPage(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error)
	Walk(ctx context.Context, tx *index.Tx, root cas.Hash, fn func(p vfs.Path, e vfs.Entry) error) error
	DiffPage(ctx context.Context, tx *index.Tx, a, b cas.Hash, page vfs.ListPage) ([]vfs.Change, bool, error)
	// Orphaned records, in tx, trees the versions pruned in tx held, for
	// the next collection to check.
	Orphaned(ctx context.Context, tx *index.Tx, roots ...cas.Hash) error
}

// Cap is the store's size cap as the actor spaces keep to it: StoreCap
// returns it as tx reads it, 0 for none. A *runs.Service is one.
type Cap interface {
	StoreCap(ctx context.Context, tx *index.Tx) (int64, error)
	// StreamCap bounds r, an upload's content, by the room left under the
	// cap, shared with the other content the process is storing at once
	// (runs.Service.StreamCap); a size of 0 or more, r's length as the
	// caller knows it, is taken from the room at once (negative: not
	// known); release gives its share back once it is stored or
	// abandoned.
	StreamCap(ctx context.Context, r io.Reader, free, size int64, op, path string) (_ io.Reader, release func(), _ error)
	// UpdateInRoom runs fn in a write transaction and, when the cap
	// refuses the change (a wserr.StoreFull error) and collecting the
	// queue of gc candidates frees room, once more
	// (runs.Service.UpdateInRoom).
	UpdateInRoom(ctx context.Context, fn func(tx *index.Tx) error) error
}

// Spaces is the set of actor spaces of one store. It holds no state of its
// own beyond its parts, so it is safe for concurrent use.
type Spaces struct {
	db    DB
	blobs Blobs
	trees Trees
	cap   Cap
	now   func() time.Time
}

// New returns the actor spaces over db, storing contents in blobs and
// trees, keeping uploads to cap (none if nil), stamping rows with now
// (time.Now if nil).
func New(db DB, blobs Blobs, trees Trees, cap Cap, now func() time.Time) *Spaces {
	if now == nil {
		now = time.Now
	}
	return &Spaces{db: db, blobs: blobs, trees: trees, cap: cap, now: now}
}

// storeCap reads the store's cap in tx (nil: a read of its own), 0 for
// none.
func (s *Spaces) storeCap(ctx context.Context, tx *index.Tx) (int64, error) {
	if s.cap == nil {
		return 0, nil
	}
	limit, err := s.cap.StoreCap(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("upload: the store's cap: %w", err)
	}
	return limit, nil
}

// Op names what a change did.
type Op string

// Change operations.
const (
	OpUpload       Op = "upload"
	OpDelete       Op = "delete"
	OpDeletePrefix Op = "delete_prefix"
	OpGC           Op = "gc"
)

// Change is one record of an actor's journal: what changed, how many files
// and bytes it touched, and the version (root tree) after it. Root is zero
// once GC pruned the version. Seq 0 means nothing was recorded: the call
// changed nothing, and Created is zero (left out of the JSON).
type Change struct {
	Actor   string    `json:"actor"`
	Seq     int64     `json:"seq"`
	Op      Op        `json:"op"`
	Path    string    `json:"path"`
	Files   int64     `json:"files"`
	Bytes   int64     `json:"bytes"`
	Root    cas.Hash  `json:"root,omitzero"`
	Created time.Time `json:"created,omitzero"`
}

// Space is one actor's space as its row holds it.
type Space struct {
	Actor   string    `json:"actor"`
	Root    cas.Hash  `json:"root"`
	Seq     int64     `json:"seq"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

type spaceRow struct {
	Actor   string   `db:"actor"`
	Root    cas.Hash `db:"root"`
	Seq     int64    `db:"seq"`
	Created int64    `db:"created"`
	Updated int64    `db:"updated"`
	// Files, Dirs and Bytes are the live tree's totals, and Versions the
	// number of versions the journal holds, NULL until counted (findSpace,
	// spacesAfter and GC read them, EachSpaceTotals the totals; other
	// queries leave them out).
	Files    sql.NullInt64 `db:"files"`
	Dirs     sql.NullInt64 `db:"dirs"`
	Bytes    sql.NullInt64 `db:"bytes"`
	Versions sql.NullInt64 `db:"versions"`
}

// record is the row as an archive carries it.
func (r spaceRow) record() SpaceRecord {
	return SpaceRecord{Actor: r.Actor, Root: r.Root, Seq: r.Seq, Created: r.Created, Updated: r.Updated}
}

// totals returns the row's totals of its tree, false when not counted.
func (r spaceRow) totals() (vfs.Totals, bool) {
	if !r.Files.Valid || !r.Dirs.Valid || !r.Bytes.Valid {
		return vfs.Totals{}, false
	}
	return vfs.Totals{Files: r.Files.Int64, Dirs: r.Dirs.Int64, Bytes: r.Bytes.Int64}, true
}

func (r spaceRow) space() Space {
	return Space{Actor: r.Actor, Root: r.Root, Seq: r.Seq,
		Created: time.Unix(0, r.Created).UTC(), Updated: time.Unix(0, r.Updated).UTC()}
}

type changeRow struct {
	Actor   string   `db:"actor"`
	Seq     int64    `db:"seq"`
	Op      string   `db:"op"`
	Path    string   `db:"path"`
	Files   int64    `db:"files"`
	Bytes   int64    `db:"bytes"`
	Root    cas.Hash `db:"root"`
	Created int64    `db:"created"`
}

func (r changeRow) change() Change {
	return Change{Actor: r.Actor, Seq: r.Seq, Op: Op(r.Op), Path: r.Path, Files: r.Files, Bytes: r.Bytes,
		Root: r.Root, Created: time.Unix(0, r.Created).UTC()}
}

// findSpace reads actor's row in tx; an actor without one has an empty
// space at seq 0.
func findSpace(ctx context.Context, tx *index.Tx, actor string) (spaceRow, bool, error) {
	var r spaceRow
	err := tx.GetContext(ctx, &r, `SELECT actor, root, seq, created, updated, files, dirs, bytes, versions FROM actor_spaces WHERE actor = ?`, actor)
	if errors.Is(err, sql.ErrNoRows) {
		zero := sql.NullInt64{Valid: true}
		return spaceRow{Actor: actor, Root: vfs.EmptyTree, Files: zero, Dirs: zero, Bytes: zero, Versions: zero}, false, nil
	}
	if err != nil {
		return spaceRow{}, false, fmt.Errorf("actor %s: %w", actor, index.Translate(err))
	}
	return r, true, nil
}

// record moves actor's root to root and appends the change that did it,
// in tx; a gc change leaves the root where it is. A change that leaves the root as it was records nothing and
// returns a Change with Seq 0. The row's count of versions is sp's, one
// more for a change that is a version (a gc change is none: GC takes
// what it pruned off sp's count before), or, when sp has none, the
// journal's counted whole.
func (s *Spaces) record(ctx context.Context, tx *index.Tx, sp spaceRow, exists bool, root cas.Hash, c Change) (Change, error) {
	if root == sp.Root && c.Op != OpGC {
		return Change{Actor: sp.Actor, Op: c.Op, Path: c.Path, Root: root}, nil
	}
	now := s.now().UnixNano()
	c.Actor, c.Seq, c.Root, c.Created = sp.Actor, sp.Seq+1, root, time.Unix(0, now).UTC()
	var version any = root
	if c.Op == OpGC {
		// A gc change prunes versions and is not one itself.
		version, c.Root = nil, cas.Hash{}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO actor_changes (actor, seq, op, path, files, bytes, root, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.Actor, c.Seq, string(c.Op), c.Path, c.Files, c.Bytes, version, now); err != nil {
		return Change{}, fmt.Errorf("record %s change: %w", c.Op, index.Translate(err))
	}
	files, dirs, bytes, err := s.nextTotals(ctx, tx, sp, root)
	if err != nil {
		return Change{}, err
	}
	versions := sp.Versions
	if version != nil {
		versions.Int64++
	}
	if !versions.Valid {
		if versions, err = countVersions(ctx, tx, sp.Actor); err != nil {
			return Change{}, err
		}
	}
	if exists {
		_, err = tx.ExecContext(ctx, `UPDATE actor_spaces SET root = ?, seq = ?, updated = ?, files = ?, dirs = ?, bytes = ?, versions = ? WHERE actor = ?`,
			root, c.Seq, now, files, dirs, bytes, versions, c.Actor)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO actor_spaces (actor, root, seq, created, updated, files, dirs, bytes, versions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Actor, root, c.Seq, now, now, files, dirs, bytes, versions)
	}
	if err != nil {
		return Change{}, fmt.Errorf("move actor %s root: %w", c.Actor, index.Translate(err))
	}
	return c, nil
}

// countVersions counts the versions actor's journal holds in tx, reading
// each of its rows: for a row that keeps no count.
func countVersions(ctx context.Context, tx *index.Tx, actor string) (sql.NullInt64, error) {
	var n sql.NullInt64
	if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM actor_changes WHERE actor = ? AND root IS NOT NULL`, actor); err != nil {
		return n, fmt.Errorf("count actor %s versions: %w", actor, index.Translate(err))
	}
	return n, nil
}

// totaler is the optional ability to count how two trees' totals differ
// reading only where they differ; *vfs.Trees has it. Without it a space's
// totals are not kept, and Stats walks its tree.
type totaler interface {
	TotalsDelta(ctx context.Context, tx *index.Tx, a, b cas.Hash) (vfs.Totals, error)
}

// nextTotals returns the totals of root, the tree a space whose row is sp
// moves to, as the row's three columns: sp's totals moved by the
// difference of its tree and root (the cost of the change), or, when sp
// has none, root counted whole; NULLs when the Trees cannot count.
func (s *Spaces) nextTotals(ctx context.Context, tx *index.Tx, sp spaceRow, root cas.Hash) (files, dirs, bytes sql.NullInt64, err error) {
	t, ok := s.trees.(totaler)
	if !ok {
		return files, dirs, bytes, nil
	}
	from, ok := sp.totals()
	base := sp.Root
	if !ok {
		from, base = vfs.Totals{}, vfs.EmptyTree
	}
	d, err := t.TotalsDelta(ctx, tx, base, root)
	if err != nil {
		return files, dirs, bytes, fmt.Errorf("count actor %s: %w", sp.Actor, err)
	}
	n := from.Plus(d)
	return sql.NullInt64{Int64: n.Files, Valid: true}, sql.NullInt64{Int64: n.Dirs, Valid: true},
		sql.NullInt64{Int64: n.Bytes, Valid: true}, nil
}

// Upload stores the content read from r as the file path of actor's
// space, creating the directories above it, and records the change. The
// content streams through the content store in chunks, so memory stays
// bounded whatever its size; it is read to the end before the space
// changes, so a failed read changes nothing. A path that is a directory
// or lies below a file is refused before anything is read. Uploading the content a file
// already has records nothing (Seq 0). Errors: wserr.InvalidActor,
// wserr.InvalidPath (path, the root, or a path ending in "/", which
// names a directory), wserr.NotADirectory when a file
// is where a directory must go, wserr.PathIsDirectory when path is a
// directory; a read error of r is workspace.invalid_argument wrapping
// r's own error (wserr.Source).
func (s *Spaces) Upload(ctx context.Context, actor, path string, r io.Reader) (Change, error) {
	return s.UploadWith(ctx, actor, path, r, ChangeOptions{})
}

// ChangeOptions guard a change to one path of a space against a change
// the caller has not seen. A change they refuse fails with
// wserr.WriteStaleFile and changes nothing.
type ChangeOptions struct {
	// ExpectedHash, if not zero, must be the hash of the file at the
	// path: a file with other content, a directory or nothing there
	// refuses the change.
	ExpectedHash cas.Hash
	// MustNotExist refuses the change when anything is at the path, and
	// MustExist unless a file is (nothing, or a directory, refuses it).
	MustNotExist, MustExist bool
	// Size, if positive, is an upload's length as the caller knows it (an
	// HTTP upload's Content-Length). Under a store cap it is taken from
	// the room before the content is read, so uploads that begin together
	// are admitted in turn rather than all read until the room runs out.
	// One that does not fit stores nothing: it is read only to hash it,
	// and changes the space only if the store holds that content already
	// (workspace.size_limit_exceeded otherwise).
	Size int64
}

// UploadWith is Upload guarded by opt. The guard is checked before the
// content is read, so a refused upload reads nothing of r, and again in
// the transaction that changes the space.
func (s *Spaces) UploadWith(ctx context.Context, actor, path string, r io.Reader, opt ChangeOptions) (Change, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return Change{}, err
	}
	p, err := parsePath(path, false)
	if err != nil {
		return Change{}, err
	}
	if vfs.EndsAsDirectory(path) {
		// ParsePath drops the ending ("/", "/."); the file would take
		// the directory's name.
		return Change{}, wserr.New(wserr.InvalidPath, "upload", path, "the path ends in /, naming a directory: name the file below it (%s/NAME)", p)
	}
	if r == nil {
		return Change{}, wserr.New(wserr.InvalidArgument, "upload", p.String(), "nil reader")
	}
	r = wserr.Source(r, "upload", p.String())
	// What the change's transaction would refuse, refused before any of
	// the content is read: the guard, and a path no file can be at.
	if err := s.db.View(ctx, func(tx *index.Tx) error {
		sp, _, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		if err := s.guard(ctx, tx, "upload", sp.Root, p, opt); err != nil {
			return err
		}
		_, err = vfs.FileTarget("upload", p, func(q vfs.Path) (vfs.Entry, error) { return s.trees.Lookup(ctx, tx, sp.Root, q) })
		return err
	}); err != nil {
		return Change{}, err
	}
	t := &cas.Tally{R: r}
	src, release := io.Reader(t), func() {}
	if s.cap != nil {
		// The content is counted as it arrives, before compression, so
		// this errs on the side of refusing; the change's transaction
		// measures the store again. Content the store holds already adds
		// no content bytes, but only its hash tells, once it is read: an
		// upload the room refuses is read on and hashed, and placed if
		// its content is stored (uploadStored). So the one of unknown
		// size is hashed from its start as it streams, since the room may
		// run out midway; the one of known size is refused, if at all,
		// before it is read.
		size := int64(-1)
		if opt.Size > 0 {
			size = opt.Size
		} else {
			t.Hash = cas.NewHasher()
			defer t.Hash.Release()
		}
		capped, rel, err := s.cap.StreamCap(ctx, t, 0, size, "upload", p.String())
		if wserr.Is(err, wserr.SizeLimitExceeded) {
			return s.uploadStored(ctx, actor, p, t, opt, err)
		}
		if err != nil {
			return Change{}, err
		}
		src, release = capped, rel
	}
	defer s.blobs.Hold()()
	h, err := s.blobs.Put(ctx, src)
	release() // stored (it counts in the store now) or abandoned
	if err != nil {
		err = fmt.Errorf("upload %s: %w", p, err)
		if t.Hash != nil && t.CapRefused(err) {
			return s.uploadStored(ctx, actor, p, t, opt, err)
		}
		return Change{}, err
	}
	return s.place(ctx, actor, p, h, t.N, opt, nil)
}

// uploadStored ends an upload that the store's cap refused room for
// (full): it reads the rest of the content through t, hashing it, and
// places it if the store holds that content already (the file's own, a
// retry whose answer was lost, or another path's), which adds no content
// bytes; otherwise it fails with full. What it reads is hashed and
// dropped, never stored, so uploads refused together cannot take the
// store past its cap however many there are. t hashes what was read
// already, or nothing was read.
func (s *Spaces) uploadStored(ctx context.Context, actor string, p vfs.Path, t *cas.Tally, opt ChangeOptions, full error) (Change, error) {
	h, size, err := t.Finish(ctx, "upload", p.String())
	if err != nil {
		return Change{}, err
	}
	return s.place(ctx, actor, p, h, size, opt, full)
}

// place makes h, of size bytes, the file p of actor's space and records
// the change, checking opt and the store's cap in the transaction; a
// change the cap refuses is tried once more if collecting the gc
// candidates frees room (Cap.UpdateInRoom). The content is stored before;
// if it is not (a gc took it, or it never was), place fails with missing
// when that is set, else with store.busy (cas.Collected).
func (s *Spaces) place(ctx context.Context, actor string, p vfs.Path, h cas.Hash, size int64, opt ChangeOptions, missing error) (Change, error) {
	var c Change
	update := s.db.Update
	if s.cap != nil {
		update = s.cap.UpdateInRoom
	}
	err := update(ctx, func(tx *index.Tx) error {
		if _, err := s.blobs.Touch(ctx, tx, h); err != nil {
			if missing != nil && errors.Is(err, cas.ErrNotFound) {
				return missing
			}
			return err // a gc took it meanwhile: store.busy (cas.Collected)
		}
		sp, exists, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		if err := s.guard(ctx, tx, "upload", sp.Root, p, opt); err != nil {
			return err
		}
		room, err := s.roomIn(ctx, tx, sp.Root, p, h)
		if err != nil {
			return err
		}
		root, err := s.trees.Set(ctx, tx, sp.Root, p, &vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: size})
		if err != nil {
			return err
		}
		if c, err = s.record(ctx, tx, sp, exists, root, Change{Op: OpUpload, Path: p.String(), Files: 1, Bytes: size}); err != nil {
			return err
		}
		return room(p)
	})
	return c, err
}

// roomIn reads the store's cap and stored bytes in tx before a change, and
// returns the check to make once the change is written: it fails with
// workspace.size_limit_exceeded if the change took the stored bytes past
// the cap (the trees and the change's row, the content being stored
// before the transaction), or, when the change makes p new content h
// (stored before it), if the store is past the cap at all.
func (s *Spaces) roomIn(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, h cas.Hash) (func(p vfs.Path) error, error) {
	limit, err := s.storeCap(ctx, tx)
	if err != nil || limit <= 0 {
		return func(vfs.Path) error { return nil }, err
	}
	// New content at p was stored before this transaction: the bytes the
	// store holds count it already.
	storedBefore := true
	if !root.IsZero() {
		old, err := s.trees.Lookup(ctx, tx, root, p)
		if err != nil && !wserr.Is(err, wserr.FileNotFound) {
			return nil, err
		}
		storedBefore = err != nil || old.Hash != h
	}
	before, err := tx.UsedBytes(ctx)
	if err != nil {
		return nil, fmt.Errorf("upload: the store's cap: %w", err)
	}
	return func(p vfs.Path) error {
		used, err := tx.UsedBytes(ctx)
		if err != nil {
			return fmt.Errorf("upload: the store's cap: %w", err)
		}
		if used > limit && (used > before || storedBefore) {
			return wserr.StoreFull("upload", p.String(), "the change would take the store to %d bytes, past its %d-byte cap", used, limit)
		}
		return nil
	}, nil
}

func (o ChangeOptions) guards() bool {
	return !o.ExpectedHash.IsZero() || o.MustNotExist || o.MustExist
}

// guard checks opt against what is at p in the tree root.
func (s *Spaces) guard(ctx context.Context, tx *index.Tx, op string, root cas.Hash, p vfs.Path, opt ChangeOptions) error {
	if !opt.guards() {
		return nil
	}
	e, err := s.trees.Lookup(ctx, tx, root, p)
	switch {
	case wserr.Is(err, wserr.FileNotFound), wserr.Is(err, wserr.NotADirectory):
		switch {
		case !opt.ExpectedHash.IsZero():
			return wserr.New(wserr.WriteStaleFile, op, p.String(), "no file is there, not one with hash %s", opt.ExpectedHash.Short())
		case opt.MustExist:
			return wserr.New(wserr.WriteStaleFile, op, p.String(), "nothing is there")
		}
		return nil
	case err != nil:
		return err
	case opt.MustNotExist:
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "a %s is there already", e.Kind)
	case opt.ExpectedHash.IsZero() && e.Kind != vfs.KindFile:
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "a %s is there, not a file", e.Kind)
	case opt.ExpectedHash.IsZero():
		return nil // MustExist
	case e.Kind != vfs.KindFile:
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "a %s is there, not a file with hash %s", e.Kind, opt.ExpectedHash.Short())
	case e.Hash != opt.ExpectedHash:
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "file changed since it was read: its hash is %s, not %s", e.Hash.Short(), opt.ExpectedHash.Short())
	}
	return nil
}

// Stat returns the entry at path in actor's space ("" or "." for the
// root). Errors: wserr.InvalidActor, wserr.InvalidPath (also for a file
// named with an ending "/" or "/.", which names a directory),
// wserr.FileNotFound.
func (s *Spaces) Stat(ctx context.Context, actor, path string) (vfs.Entry, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return vfs.Entry{}, err
	}
	p, err := parsePath(path, true)
	if err != nil {
		return vfs.Entry{}, err
	}
	var e vfs.Entry
	err = s.db.View(ctx, func(tx *index.Tx) error {
		sp, _, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		e, err = s.trees.Lookup(ctx, tx, sp.Root, p)
		return err
	})
	if err == nil {
		err = vfs.CheckFileSpelling("stat", path, p, e.Kind)
	}
	return e, err
}

// Download returns a stream of the file path of actor's space and its
// entry (size, hash). The stream verifies the content as it goes: bytes
// that do not hash to their address are an error, never returned. The
// caller closes it. Errors: wserr.InvalidActor, wserr.InvalidPath,
// wserr.FileNotFound, wserr.PathIsDirectory.
func (s *Spaces) Download(ctx context.Context, actor, path string) (io.ReadCloser, vfs.Entry, error) {
	if _, err := parsePath(path, false); err != nil {
		return nil, vfs.Entry{}, err
	}
	e, err := s.Stat(ctx, actor, path)
	if err != nil {
		return nil, vfs.Entry{}, err
	}
	if e.Kind != vfs.KindFile {
		return nil, vfs.Entry{}, wserr.New(wserr.PathIsDirectory, "download", path, "is a directory; list it, or download a file below it")
	}
	rc, err := s.blobs.Get(ctx, e.Hash)
	if err != nil {
		return nil, vfs.Entry{}, fmt.Errorf("download %s: %w", path, err)
	}
	return cas.GoneMeanwhile(rc, "download", path, e.Hash, func() (cas.Hash, error) {
		now, err := s.Stat(context.WithoutCancel(ctx), actor, path)
		return now.Hash, err
	}), e, nil
}

// List returns the entries below path in actor's space ("" or "." for the
// root) down to depth levels (depth <= 0: the direct children), in
// depth-first order with names sorted; a file path lists that file alone.
// An actor with no space lists nothing at its root. Errors:
// wserr.InvalidActor, wserr.InvalidPath, wserr.FileNotFound.
func (s *Spaces) List(ctx context.Context, actor, path string, depth int) ([]vfs.Listed, error) {
	out, _, err := s.ListPage(ctx, actor, path, depth, vfs.ListPage{})
	return out, err
}

// ListPage returns one page of List's entries, and whether entries remain
// after it (ask again with the last entry's path as page.After); the
// subtrees before the cursor are not read. Errors: those of List.
func (s *Spaces) ListPage(ctx context.Context, actor, path string, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return nil, false, err
	}
	p, err := parsePath(path, true)
	if err != nil {
		return nil, false, err
	}
	var out []vfs.Listed
	more := false
	err = s.db.View(ctx, func(tx *index.Tx) error {
		sp, _, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		out, more, err = s.trees.ListPage(ctx, tx, sp.Root, p, depth, page)
		return err
	})
	return out, more, err
}

// Delete removes the file or directory path (a whole subtree) from
// actor's space and records the change. Errors: wserr.InvalidActor,
// wserr.InvalidPath (also for the root: use DeleteByPrefix),
// wserr.FileNotFound, wserr.NotADirectory for a file named by a path
// ending in "/".
func (s *Spaces) Delete(ctx context.Context, actor, path string) (Change, error) {
	return s.DeleteWith(ctx, actor, path, ChangeOptions{})
}

// DeleteWith is Delete guarded by opt (MustNotExist refuses every
// delete).
func (s *Spaces) DeleteWith(ctx context.Context, actor, path string, opt ChangeOptions) (Change, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return Change{}, err
	}
	p, err := parsePath(path, false)
	if err != nil {
		return Change{}, err
	}
	var c Change
	err = s.db.Update(ctx, func(tx *index.Tx) error {
		sp, exists, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		if err := s.guard(ctx, tx, "delete", sp.Root, p, opt); err != nil {
			return err
		}
		e, err := s.trees.Lookup(ctx, tx, sp.Root, p)
		if err != nil {
			return err
		}
		if e.Kind == vfs.KindFile && vfs.EndsAsDirectory(path) {
			return wserr.New(wserr.NotADirectory, "delete", path, "%s is a file; a path ending in / names a directory", p)
		}
		files, err := s.countFiles(ctx, tx, e)
		if err != nil {
			return err
		}
		root, err := s.trees.Set(ctx, tx, sp.Root, p, nil)
		if err != nil {
			return err
		}
		c, err = s.record(ctx, tx, sp, exists, root, Change{Op: OpDelete, Path: p.String(), Files: files, Bytes: e.Size})
		return err
	})
	return c, err
}

// countFiles counts the files at or below e.
func (s *Spaces) countFiles(ctx context.Context, tx *index.Tx, e vfs.Entry) (int64, error) {
	if e.Kind == vfs.KindFile {
		return 1, nil
	}
	var n int64
	err := s.trees.Walk(ctx, tx, e.Hash, func(_ vfs.Path, e vfs.Entry) error {
		if e.Kind == vfs.KindFile {
			n++
		}
		return nil
	})
	return n, err
}
