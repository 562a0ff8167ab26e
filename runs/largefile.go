package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/capread"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// MaxReadBytes is the most content one Read returns: a larger file is read
// by line or char range (only up to the range's end, the range cut to
// this many bytes) or streamed whole with Open, so a read never holds a
// large file in memory.
const MaxReadBytes = vfs.MaxReadBytes

// largeFile is the size above which append and patch stream a file's
// current content into its next version instead of holding both in
// memory; below it they store the version as a delta of the previous one.
const largeFile = 8 << 20

// errLargeFile is what mutate's load returns for a file larger than
// largeFile: the change rolls back and is made by streaming instead, so
// the check costs a small file's change nothing beyond its own
// transaction.
var errLargeFile = errors.New("large file: streamed")

// readStored reads the stored file fi as opt asks, holding at most
// MaxReadBytes of it.
func (w *Workspace) readStored(ctx context.Context, p vfs.Path, fi vfs.FileInfo, opt vfs.ReadOptions) (vfs.ReadResult, error) {
	rc, err := w.s.blobs.Get(ctx, fi.Hash)
	if err != nil {
		return vfs.ReadResult{}, w.ContentMissing(ctx, "read", "read", p, fi.Hash, err)
	}
	defer rc.Close()
	return vfs.ReadRangeFrom(p, rc, fi.Size, opt, MaxReadBytes)
}

// ContentMissing judges err, from opening content h that file p named
// when listed or looked up, for op (read, checkout; doing says what
// happens to p in it: "read", "checked out"): a content not found
// is lost from the store (store.corrupt) if p still names h; if p changed
// or went meanwhile and a gc collected the content it had,
// store.conflict (do it again); if the run or checkpoint went, their own
// not-found error; if p cannot be looked at again, why. Other errors are
// returned as they are.
func (w *Workspace) ContentMissing(ctx context.Context, op, doing string, p vfs.Path, h cas.Hash, err error) error {
	if wserr.CodeOf(err) != wserr.NotFound {
		return err
	}
	now, serr := w.Stat(context.WithoutCancel(ctx), p)
	switch {
	case wserr.Is(serr, wserr.RunNotFound) || wserr.Is(serr, wserr.CheckpointNotFound):
		return wserr.New(wserr.CodeOf(serr), op, "", "%s, deleted while it was being %s", wserr.MessageOf(serr), doing)
	case serr == nil && now.Hash == h:
		return wserr.Wrap(wserr.Corrupt, op, p.String(), fmt.Errorf("the file's content %s is missing from the store (wsctl fsck names each missing object): %w", h.Short(), err))
	case serr != nil && !wserr.Is(serr, wserr.FileNotFound):
		return serr // why the file could not be looked at again (busy, closed)
	}
	return wserr.New(wserr.Conflict, op, p.String(), "the file changed while it was being %s, and a gc collected the content it had: try again", doing)
}

// Open returns p's whole content as a stream, read with bounded memory
// whatever the file's size, and p's info; the caller closes it. The
// stream verifies what it returns as the content store's reads do, so it
// may fail with store.corrupt part way; with store.conflict if the run
// was deleted or the file changed, and a gc collected the content, while
// it streamed. A host file (host/<name>/…) streams from the host
// (vfs.HostFS.Open), and a virtual resource from what its provider gave,
// over MaxReadBytes too. Open fails as Read does.
func (w *Workspace) Open(ctx context.Context, p vfs.Path) (io.ReadCloser, vfs.FileInfo, error) {
	whole := func() (io.ReadCloser, vfs.FileInfo, error) {
		// A provider gives a resource whole, so it is streamed from
		// what it gave, at any size: Read would refuse one over
		// MaxReadBytes.
		res, err := w.s.virtual.Read(ctx, p, vfs.ReadOptions{})
		if err != nil {
			return nil, vfs.FileInfo{}, err
		}
		return io.NopCloser(bytes.NewReader(res.Content)), res.Info, nil
	}
	if t, ok, err := w.host(ctx, "read", p); ok {
		if err != nil {
			return nil, vfs.FileInfo{}, err
		}
		defer t.close()
		return t.open(ctx)
	}
	if _, _, _, ok := w.s.virtual.Match(p); ok {
		return whole()
	}
	fi, gen, err := w.lookupFile(ctx, "read", p)
	if w.besideVirtual(p, err) {
		return whole()
	}
	if err != nil {
		return nil, vfs.FileInfo{}, err
	}
	if gen != nil {
		return gen.open(ctx), fi, nil
	}
	rc, err := w.s.blobs.Get(ctx, fi.Hash)
	if err != nil {
		return nil, vfs.FileInfo{}, w.ContentMissing(ctx, "read", "read", p, fi.Hash, err)
	}
	return cas.GoneMeanwhile(rc, "read", p.String(), fi.Hash, func() (cas.Hash, error) {
		now, err := w.Stat(context.WithoutCancel(ctx), p)
		return now.Hash, err
	}), fi, nil
}

// largeBase returns p's entry and true if p is a stored file larger than
// largeFile that op may change; false for a small or missing file or a
// virtual path, which mutate handles. A path op may not change and a
// failure to read the run are returned, so a caller that falls back to
// mutate never goes round again on a persistent error.
func (w *Workspace) largeBase(ctx context.Context, op string, p vfs.Path) (vfs.Entry, bool, error) {
	if _, _, _, ok := w.s.virtual.Match(p); ok || p.IsRoot() {
		return vfs.Entry{}, false, nil
	}
	var base vfs.Entry
	err := w.s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, w.runID)
		if err != nil {
			return err
		}
		if err := w.checkWritable(op, run, p); err != nil {
			return err
		}
		base, err = w.s.trees.Lookup(ctx, tx, run.Root, p)
		return err
	})
	if wserr.Is(err, wserr.FileNotFound) {
		return vfs.Entry{}, false, nil
	}
	if err != nil {
		return vfs.Entry{}, false, err
	}
	return base, base.Kind == vfs.KindFile && base.Size > largeFile, nil
}

// streamVersion stores the next version of the large file p, built by
// next from p's current entry base and a reader of its content (next also
// says how many of its first bytes are base's), outside any transaction
// and in bounded memory, then makes it p's content as mutate does
// (m.stored is filled in). If p changes while the version is built, the
// change fails with workspace.write_stale_file when expected (the
// caller's ExpectedHash) is set; without it the version is built again
// from the new content until one commits. If p is then no longer a large
// file, small makes the change instead.
func (w *Workspace) streamVersion(ctx context.Context, op string, p vfs.Path, base vfs.Entry, expected cas.Hash,
	next func(base vfs.Entry, cur io.Reader) (io.Reader, int64, mutation, error), small func() (vfs.FileInfo, error)) (vfs.FileInfo, error) {
	defer w.s.blobs.Hold()() // each version stored, until its change references it
	for {
		if !expected.IsZero() && expected != base.Hash {
			return vfs.FileInfo{}, wserr.New(wserr.WriteStaleFile, op, p.String(), "file changed since it was read: its hash is %s, not %s", base.Hash.Short(), expected.Short())
		}
		info, m, err := w.buildVersion(ctx, op, p, base, next)
		if err != nil {
			return vfs.FileInfo{}, err
		}
		m.stored, m.checkRoom = &info, true
		fi, err := w.mutate(ctx, op, p, base.Hash, func(func() ([]byte, error), bool) (mutation, error) {
			return m, nil
		})
		// Unguarded, the change is made to whatever p holds, so a stale
		// base is built again, without bound: each stale answer means
		// another writer's change to p committed (in this process or
		// another), so this waits only while others make progress, and
		// one of the writers building on the newest content always
		// commits. Building inside the write transaction instead would
		// hold every writer of the store off for as long as a large file
		// takes to stream, and a lock would serialise one process only.
		if !wserr.Is(err, wserr.WriteStaleFile) || !expected.IsZero() {
			return fi, err
		}
		var ok bool
		if base, ok, err = w.largeBase(ctx, op, p); err != nil {
			return vfs.FileInfo{}, err
		} else if !ok {
			return small()
		}
	}
}

// buildVersion stores what next makes of base's content, and its first
// bytes the same as base's (which are stored already). Under a store cap
// the rest of the new version is read only up to the room left, so a
// change that would not fit stops before most of it is stored (the
// change's transaction checks the cap again).
func (w *Workspace) buildVersion(ctx context.Context, op string, p vfs.Path, base vfs.Entry, next func(base vfs.Entry, cur io.Reader) (io.Reader, int64, mutation, error)) (cas.Info, mutation, error) {
	rc, err := w.s.blobs.Get(ctx, base.Hash)
	if err != nil {
		return cas.Info{}, mutation{}, err
	}
	defer rc.Close()
	r, same, m, err := next(base, rc)
	if err != nil {
		return cas.Info{}, mutation{}, err
	}
	// Under the run's cap the new version is read only up to the room
	// it leaves, as a streamed write is: one that would take the run
	// past it fails while it is read, and what it stored is freed.
	room, limit, err := w.runRoom(ctx, p)
	if err != nil {
		return cas.Info{}, mutation{}, err
	}
	if room >= 0 {
		r = capread.Reader(r, room, runCapExceeded(op, p, limit))
	}
	grown, release, err := w.s.StreamCap(ctx, r, same, -1, op, p.String())
	if err != nil {
		return cas.Info{}, mutation{}, err
	}
	defer release()
	h, err := w.s.blobs.Put(ctx, grown)
	if err != nil {
		return cas.Info{}, mutation{}, err
	}
	info, err := w.s.blobs.Stat(ctx, h)
	if errors.Is(err, cas.ErrNotFound) {
		err = cas.Collected("write", h, err)
	}
	return info, m, err
}

// runRoom returns how many bytes a new content of p may have under the
// run's cap (Profile.MaxRunBytes, roomFor) and the cap; room is -1 when
// the run has none.
func (w *Workspace) runRoom(ctx context.Context, p vfs.Path) (room, limit int64, err error) {
	room = -1
	err = w.s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, w.runID)
		if err != nil {
			return err
		}
		if limit = run.Profile.MaxRunBytes; limit > 0 {
			room, err = w.roomFor(ctx, tx, run, p)
		}
		return err
	})
	return room, limit, err
}

// runCapExceeded is the refusal of a new content of p that does not fit
// in the run's cap.
func runCapExceeded(op string, p vfs.Path, limit int64) error {
	return wserr.New(wserr.SizeLimitExceeded, op, p.String(), "the workspace would hold more than this run's cap of %d bytes", limit)
}

// appendLarge appends content to the large file p, whose current entry
// is base: the new version is the old content streamed with content
// after it, so the chunks the two share are stored once and neither is
// held in memory.
func (w *Workspace) appendLarge(ctx context.Context, p vfs.Path, base vfs.Entry, content []byte, opt vfs.WriteOptions) (vfs.FileInfo, error) {
	// What an append adds is known before anything is stored.
	if room, capped, err := w.s.storeRoom(ctx); err != nil {
		return vfs.FileInfo{}, fmt.Errorf("write %s: the store's cap: %w", p, err)
	} else if capped && int64(len(content)) > room {
		return vfs.FileInfo{}, wserr.StoreFull("write", p.String(), "the store has %d bytes of room under its cap; %d more do not fit", max(room, 0), len(content))
	}
	if room, limit, err := w.runRoom(ctx, p); err != nil {
		return vfs.FileInfo{}, err
	} else if room >= 0 && base.Size+int64(len(content)) > room {
		return vfs.FileInfo{}, runCapExceeded("write", p, limit)
	}
	return w.streamVersion(ctx, "write", p, base, opt.ExpectedHash, func(base vfs.Entry, cur io.Reader) (io.Reader, int64, mutation, error) {
		size := base.Size + int64(len(content))
		return io.MultiReader(cur, bytes.NewReader(content)), base.Size, mutation{event: journal.WorkspaceFileWritten, reason: "after_workspace_write",
			payload: func(prev, h cas.Hash) any {
				return journal.FileWritten{Path: p.String(), Hash: h.String(), Bytes: size, Mode: string(vfs.Append), PrevHash: hashString(prev)}
			}}, nil
	}, func() (vfs.FileInfo, error) {
		return w.Write(ctx, p, content, opt)
	})
}

// patchLarge patches the large file p, whose current entry is base, in
// two streamed passes over its content: one checks the patch as
// vfs.ApplyPatch does, the other stores the patched version.
func (w *Workspace) patchLarge(ctx context.Context, p vfs.Path, base vfs.Entry, old, new string, opt vfs.PatchOptions) (vfs.FileInfo, error) {
	return w.streamVersion(ctx, "patch", p, base, opt.ExpectedHash, func(base vfs.Entry, cur io.Reader) (io.Reader, int64, mutation, error) {
		rc, err := w.s.blobs.Get(ctx, base.Hash)
		if err != nil {
			return nil, 0, mutation{}, err
		}
		n, first, err := vfs.CheckPatchFrom(p, rc, old, new, opt.ReplaceAll)
		rc.Close()
		if err != nil {
			return nil, 0, mutation{}, err
		}
		return vfs.ReplaceReader(cur, []byte(old), []byte(new)), first, mutation{event: journal.WorkspacePatchApplied, reason: "after_workspace_patch",
			payload: func(prev, h cas.Hash) any {
				return journal.PatchApplied{Path: p.String(), Hash: h.String(), PrevHash: hashString(prev), Replacements: n}
			}}, nil
	}, func() (vfs.FileInfo, error) {
		return w.Patch(ctx, p, old, new, opt)
	})
}
