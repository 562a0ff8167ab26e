package actors

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// SpaceRecord is an actor_spaces row as an archive carries it: every
// column but the tree's totals and the count of versions, which the store
// that takes the row in counts itself; times in Unix nanoseconds.
type SpaceRecord struct {
	Actor   string   `json:"actor"`
	Root    cas.Hash `json:"root"`
	Seq     int64    `json:"seq"`
	Created int64    `json:"created"`
	Updated int64    `json:"updated"`
}

// ChangeRecord is an actor_changes row as an archive carries it: every
// column; a zero Root is a version GC pruned.
type ChangeRecord struct {
	Actor   string   `json:"actor"`
	Seq     int64    `json:"seq"`
	Op      string   `json:"op"`
	Path    string   `json:"path"`
	Files   int64    `json:"files"`
	Bytes   int64    `json:"bytes"`
	Root    cas.Hash `json:"root,omitzero"`
	Created int64    `json:"created"`
}

// ExportSpace returns actor's row in tx, for an archive; exists is false
// for an actor without one (an empty space nothing was ever written to).
// A name that is not an actor fails with workspace.invalid_actor.
func (s *Spaces) ExportSpace(ctx context.Context, tx *index.Tx, actor string) (rec SpaceRecord, exists bool, err error) {
	if actor, err = ParseActor(actor); err != nil {
		return SpaceRecord{}, false, err
	}
	r, exists, err := findSpace(ctx, tx, actor)
	if err != nil || !exists {
		return SpaceRecord{}, false, err
	}
	return r.record(), true, nil
}

// EachSpaceRecord calls fn, in tx, with every actor space's row, ordered by
// actor, reading spacePage rows at a time, each page after the last actor
// of the one before: a pass over any number of spaces holds one page of
// them. The error is fn's or a failed read.
func (s *Spaces) EachSpaceRecord(ctx context.Context, tx *index.Tx, fn func(SpaceRecord) error) error {
	var rows []spaceRow
	for after := ""; ; {
		rows = rows[:0]
		if err := tx.SelectContext(ctx, &rows, `SELECT actor, root, seq, created, updated FROM actor_spaces
			WHERE actor > ? ORDER BY actor LIMIT ?`, after, spacePage); err != nil {
			return fmt.Errorf("export actor spaces: %w", index.Translate(err))
		}
		for _, r := range rows {
			if err := fn(r.record()); err != nil {
				return err
			}
		}
		if len(rows) < spacePage {
			return nil
		}
		after = rows[len(rows)-1].Actor
	}
}

// spacePage is how many actor spaces EachSpaceRecord reads at a time.
var spacePage = 512

// exportPage is how many journal rows EachExportChange reads at a time.
const exportPage = 512

// EachExportChange calls fn, in tx, with each of actor's journal rows
// after seq after, ordered by seq, reading a page of them at a time: what
// it holds does not grow with the journal. fn's error stops it and is
// returned.
func (s *Spaces) EachExportChange(ctx context.Context, tx *index.Tx, actor string, after int64, fn func(ChangeRecord) error) error {
	var rows []changeRow
	for {
		rows = rows[:0]
		err := tx.SelectContext(ctx, &rows, `SELECT actor, seq, op, path, files, bytes, root, created FROM actor_changes
			WHERE actor = ? AND seq > ? ORDER BY seq LIMIT ?`, actor, after, exportPage)
		if err != nil {
			return fmt.Errorf("export actor changes %s: %w", actor, index.Translate(err))
		}
		for _, r := range rows {
			if err := fn(ChangeRecord(r)); err != nil {
				return err
			}
		}
		if len(rows) < exportPage {
			return nil
		}
		after = rows[len(rows)-1].Seq
	}
}

// ImportSpace writes r in tx unless the actor has a space already, and
// reports added when it wrote the row; the caller then writes the actor's
// changes in the same tx. An existing space at the same root and seq is
// the same space (nothing written); one that differs fails with
// store.conflict. A name that is not an actor fails with store.corrupt.
func (s *Spaces) ImportSpace(ctx context.Context, tx *index.Tx, r SpaceRecord) (added bool, err error) {
	const op = "import actor space"
	if name, err := ParseActor(r.Actor); err != nil || name != r.Actor {
		return false, wserr.New(wserr.Corrupt, op, "", "invalid actor %q", r.Actor)
	}
	old, exists, err := findSpace(ctx, tx, r.Actor)
	if err != nil {
		return false, err
	}
	if exists {
		if old.Root == r.Root && old.Seq == r.Seq {
			return false, nil
		}
		return false, wserr.New(wserr.Conflict, op, "", "actor %s exists at version %d, archive holds version %d", r.Actor, old.Seq, r.Seq)
	}
	files, dirs, bytes, err := s.nextTotals(ctx, tx, old, r.Root)
	if err != nil {
		return false, err
	}
	// No versions yet: each ImportChange that brings one counts it.
	_, err = tx.ExecContext(ctx, `INSERT INTO actor_spaces (actor, root, seq, created, updated, files, dirs, bytes, versions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)`,
		r.Actor, r.Root, r.Seq, r.Created, r.Updated, files, dirs, bytes)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", op, r.Actor, index.Translate(err))
	}
	return true, nil
}

// ImportChange writes c in tx, for a space ImportSpace has just added or
// MergeSpace moved forward, and counts its version, if it holds one, on
// the space's row. A row that does not insert (a seq written already)
// fails with store.corrupt; a failure of the store's own (its context
// ended, a full disk, a busy file) keeps its code.
func (s *Spaces) ImportChange(ctx context.Context, tx *index.Tx, c ChangeRecord) error {
	const op = "import actor change"
	var root any
	if !c.Root.IsZero() {
		root = c.Root
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO actor_changes (actor, seq, op, path, files, bytes, root, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.Actor, c.Seq, c.Op, c.Path, c.Files, c.Bytes, root, c.Created)
	if err != nil {
		return index.TranslateRow(op, fmt.Sprintf("actor %s seq %d", c.Actor, c.Seq), err)
	}
	if root == nil {
		return nil
	}
	// A row that keeps no count (NULL) keeps none: its next change counts
	// the journal whole.
	if _, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET versions = versions + 1 WHERE actor = ?`, c.Actor); err != nil {
		return fmt.Errorf("%s: actor %s seq %d: %w", op, c.Actor, c.Seq, index.Translate(err))
	}
	return nil
}

// MergeSpace moves actor r.Actor's space to r's root and version, in tx,
// for a sync that found the store's state of the space an earlier state
// of r's (the caller appends the new changes in the same tx). It fails
// with store.conflict, changing nothing, unless the space is still at
// version from, and with store.corrupt for a name that is not an actor.
func (s *Spaces) MergeSpace(ctx context.Context, tx *index.Tx, from int64, r SpaceRecord) error {
	const op = "merge actor space"
	if name, err := ParseActor(r.Actor); err != nil || name != r.Actor {
		return wserr.New(wserr.Corrupt, op, "", "invalid actor %q", r.Actor)
	}
	cur, exists, err := findSpace(ctx, tx, r.Actor)
	if err != nil {
		return err
	}
	if !exists || cur.Seq != from {
		return wserr.New(wserr.Conflict, op, "", "actor %s: its space changed here meanwhile", r.Actor)
	}
	files, dirs, bytes, err := s.nextTotals(ctx, tx, cur, r.Root)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET root = ?, seq = ?, updated = max(updated, ?), files = ?, dirs = ?, bytes = ?
		WHERE actor = ? AND seq = ?`, r.Root, r.Seq, r.Updated, files, dirs, bytes, r.Actor, from)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, r.Actor, index.Translate(err))
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return wserr.New(wserr.Conflict, op, "", "actor %s: its space changed here meanwhile", r.Actor)
	}
	return nil
}
