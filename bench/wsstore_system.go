package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// benchRunID is the one run every workload writes.
const benchRunID = "bench_run"

// wsstoreSystem runs a workload as one wsstore run with automatic
// checkpoints off: every write goes through the run's Workspace (host
// scope) — Write, Patch, Remove, Apply for a batch, WriteFrom for content
// too large to hold — and every checkpoint is an explicit Runs.Checkpoint,
// so the two are timed apart. Inputs are collected and handed to
// CreateRun, which happens at the first op that is not an input.
type wsstoreSystem struct {
	ctx    context.Context
	dir    string
	st     *wsstore.Store
	inputs map[string][]byte
	ws     *runs.Workspace // nil until the run exists
	closed bool
	// streamed counts writes streamed through Workspace.WriteFrom.
	streamed int
	gc       *wsstore.GCReport
	// tables is how the store's pages are spent as it lives, read at the
	// first measure after Close.
	tables string
}

func (s *wsstoreSystem) Name() string { return "wsstore" }

func (s *wsstoreSystem) Setup(dir string) error {
	s.dir = filepath.Join(dir, "store")
	st, err := wsstore.Open(s.ctx, s.dir, wsstore.Options{})
	if err != nil {
		return err
	}
	s.st, s.inputs = st, map[string][]byte{}
	return nil
}

// start creates the run with the inputs collected so far.
func (s *wsstoreSystem) start() error {
	if s.ws != nil {
		return nil
	}
	off := false
	prof := runs.DefaultProfile()
	prof.AutoCheckpoint = &off
	if _, err := s.st.Runs.CreateRun(s.ctx, runs.CreateRequest{
		Chat:    runs.ChatKey{Kind: "bench", StableChatID: "bench-chat"},
		RunID:   benchRunID,
		Profile: &prof,
		Inputs:  s.inputs,
	}); err != nil {
		return err
	}
	s.inputs = nil
	s.ws = s.st.Runs.Workspace(benchRunID, runs.HostScope)
	return nil
}

func (s *wsstoreSystem) Apply(op Op) error {
	if op.Input {
		if s.ws != nil {
			return fmt.Errorf("input %s after the run started", op.Path)
		}
		if op.Src != nil {
			return fmt.Errorf("input %s: inputs are handed over in memory", op.Path)
		}
		s.inputs[strings.TrimPrefix(op.Path, runs.InputRoot+"/")] = bytes.Clone(op.Data)
		return nil
	}
	if err := s.start(); err != nil {
		return err
	}
	if op.Kind == OpBatch {
		return s.applyBatch(op)
	}
	p, err := vfs.ParsePath(op.Path)
	if err != nil {
		return err
	}
	switch op.Kind {
	case OpWrite:
		if op.Src != nil {
			s.streamed++
			_, err = s.ws.WriteFrom(s.ctx, p, op.Src.Open(), vfs.WriteOptions{})
			return err
		}
		_, err = s.ws.Write(s.ctx, p, op.Data, vfs.WriteOptions{})
		return err
	case OpAppend:
		_, err = s.ws.Write(s.ctx, p, op.Data, vfs.WriteOptions{Mode: vfs.Append})
		return err
	case OpPatch:
		_, err = s.ws.Patch(s.ctx, p, op.Old, op.New, vfs.PatchOptions{})
		return err
	case OpSplice:
		return s.splice(p, op.Edits)
	case OpDelete:
		return s.ws.Remove(s.ctx, p)
	}
	return fmt.Errorf("wsstore: cannot apply %s", op.Kind)
}

// applyBatch makes a batch one Workspace.Apply: one transaction that
// rewrites each directory on the changed paths once.
func (s *wsstoreSystem) applyBatch(op Op) error {
	edits := make([]runs.Edit, len(op.Batch))
	for i, w := range op.Batch {
		if w.Kind != OpWrite || w.Src != nil {
			return fmt.Errorf("wsstore: a batch holds writes of in-memory content, not %s", w.Kind)
		}
		p, err := vfs.ParsePath(w.Path)
		if err != nil {
			return err
		}
		edits[i] = runs.Edit{Path: p, Content: w.Data}
	}
	_, err := s.ws.Apply(s.ctx, edits)
	return err
}

// splice applies positional edits. No API edits a file in place, so the
// new content is streamed from the current one, read back from the store,
// through the edits into WriteFrom, which stores only the chunks that
// changed; memory stays bounded whatever the file's size.
func (s *wsstoreSystem) splice(p vfs.Path, edits []Edit) error {
	fsys, err := s.tree()
	if err != nil {
		return err
	}
	f, err := fsys.Open(p.String())
	if err != nil {
		return err
	}
	defer f.Close()
	s.streamed++
	_, err = s.ws.WriteFrom(s.ctx, p, newSpliceReader(f, edits), vfs.WriteOptions{})
	return err
}

// tree returns an io/fs view of the run's live workspace.
func (s *wsstoreSystem) tree() (fs.FS, error) {
	run, err := s.st.Runs.Run(s.ctx, benchRunID)
	if err != nil {
		return nil, err
	}
	return s.st.Trees.FS(s.ctx, run.Root), nil
}

func (s *wsstoreSystem) Checkpoint(label string) (string, error) {
	if err := s.start(); err != nil {
		return "", err
	}
	cp, err := s.st.Runs.Checkpoint(s.ctx, benchRunID, label)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(cp.Seq, 10), nil
}

func (s *wsstoreSystem) Rollback(id string) error {
	seq, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return err
	}
	_, err = s.st.Runs.Rollback(s.ctx, benchRunID, seq, runs.RollbackOptions{})
	return err
}

// persistSnapshot is written by the store itself at run creation; the
// other systems have no such file.
const persistSnapshot = runs.InputRoot + "/persist_snapshot.json"

// Verify streams every file of the live workspace through its io/fs view
// (chunked files chunk by chunk) and compares hashes computed here, not
// the addresses the store records.
func (s *wsstoreSystem) Verify(want map[string][32]byte) error {
	fsys, err := s.tree()
	if err != nil {
		return err
	}
	got := map[string][32]byte{}
	err = fs.WalkDir(fsys, ".", func(name string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || name == persistSnapshot {
			return err
		}
		f, err := fsys.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		sum, _, err := hashReader(f)
		got[name] = sum
		return err
	})
	if err != nil {
		return err
	}
	return compareSums(want, got)
}

// DiskBytes measures the store directory (wsstore.db and whatever -wal is
// left) after Close, which checkpoints the WAL into the database.
func (s *wsstoreSystem) DiskBytes() (int64, error) {
	if !s.closed {
		return 0, errors.New("wsstore: measure disk after Close")
	}
	_, n, err := diskUsage(s.dir)
	if err == nil && s.tables == "" {
		s.tables, err = tableBytes(filepath.Join(s.dir, "wsstore.db"))
	}
	return n, err
}

// tableBytes says how a closed store's pages are spent, from SQLite's
// dbstat table: the tables and indexes over one page, largest first, then
// the others together and the free pages.
func tableBytes(path string) (string, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE ORDER BY pgsize DESC, name`)
	if err != nil {
		return "", fmt.Errorf("dbstat: %w", err)
	}
	defer rows.Close()
	var parts []string
	var small, smallBytes, pageSize int64
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		return "", err
	}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return "", err
		}
		if size > pageSize {
			parts = append(parts, name+" "+fmtBytes(size))
		} else {
			small++
			smallBytes += size
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	var free int64
	if err := db.QueryRow(`PRAGMA freelist_count`).Scan(&free); err != nil {
		return "", err
	}
	parts = append(parts, fmt.Sprintf("%d others of one page each %s", small, fmtBytes(smallBytes)),
		"free pages "+fmtBytes(free*pageSize))
	return strings.Join(parts, ", "), nil
}

func (s *wsstoreSystem) Close() error {
	if s.closed || s.st == nil {
		return nil
	}
	s.closed = true
	return s.st.Close()
}

// GC reopens the closed store, collects with no grace (nothing else
// writes to it) and vacuums, so the disk measured next is what a
// maintained store keeps, as `git gc` is for git.
func (s *wsstoreSystem) GC() error {
	st, err := wsstore.Open(s.ctx, s.dir, wsstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.GC(s.ctx, wsstore.GCOptions{Grace: -1})
	if err != nil {
		return err
	}
	s.gc = &rep
	if _, err := st.Vacuum(s.ctx); err != nil {
		return err
	}
	return st.Close()
}

func (s *wsstoreSystem) Notes() []string {
	var notes []string
	if s.streamed > 0 {
		notes = append(notes, fmt.Sprintf("%d writes were streamed through Workspace.WriteFrom (an edit streams the current content from the store through the edits into it)", s.streamed))
	}
	if s.tables != "" {
		notes = append(notes, "as it lives, by table and index (SQLite dbstat): "+s.tables)
	}
	if g := s.gc; g != nil {
		notes = append(notes, fmt.Sprintf("gc (no grace) then vacuum: freed %d blobs, %d chunks, %d trees (%s stored); reachable %d blobs, %d chunks, %d trees",
			g.Freed.Blobs, g.Freed.Chunks, g.Freed.Trees, fmtBytes(g.FreedBytes), g.Reachable.Blobs, g.Reachable.Chunks, g.Reachable.Trees))
	}
	return notes
}
