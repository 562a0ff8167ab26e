package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// The spaces seen together are seed 004's {CellDataDir}/workspace/: a root
// holding one directory per actor with a space, each the actor's tree. It
// is read a page of spaces at a time, never every space at once.

// WorkspaceEntry is an entry of the spaces listed as one tree: Path is the
// actor's name, then the entry's path in the actor's space ("alice" for
// alice's space itself, "alice/reports/weekly.md" for a file of it). It
// encodes as a vfs.Listed does.
type WorkspaceEntry struct {
	Path string `json:"path"`
	vfs.Entry
}

// WorkspaceCursor is where a page of WorkspacePage starts: after the
// entry After of Actor's space (the root: after the actor's directory
// itself). The zero cursor starts from the first actor.
type WorkspaceCursor struct {
	Actor string
	After vfs.Path
}

// ParseWorkspaceCursor reads a cursor as a host gives it, the last path
// of the page before (a spelling of the root, "", "." or "./": from the
// start). The error says what is
// wrong, for the caller to code as the host's mistake.
func ParseWorkspaceCursor(after string) (WorkspaceCursor, error) {
	if vfs.NamesRoot(after) {
		return WorkspaceCursor{}, nil
	}
	actor, rest, _ := strings.Cut(after, "/")
	if _, err := ParseActor(actor); err != nil {
		return WorkspaceCursor{}, fmt.Errorf("after must be a path a listing holds, starting with its actor: %s", wserr.MessageOf(err))
	}
	page, err := vfs.ParseListPage(rest, 0)
	if err != nil {
		return WorkspaceCursor{}, err
	}
	return WorkspaceCursor{Actor: actor, After: page.After}, nil
}

// within returns the cursor of a listing of actor's space: from its start
// when the cursor lies before the space, and false when it lies past it.
func (c WorkspaceCursor) within(actor string) (vfs.Path, bool) {
	switch {
	case c.Actor == actor:
		return c.After, true
	case c.Actor < actor:
		return vfs.Root(), true
	}
	return vfs.Root(), false
}

// DefaultStatsLimit is the page StatsPage reads when it is given none,
// and MaxStatsLimit the largest it takes: each actor's stats walk its
// tree, and count its versions in its journal, when the space was last
// changed by a build that kept no totals.
const (
	DefaultStatsLimit = 100
	MaxStatsLimit     = 1000
)

// WorkspacePage lists the spaces as one tree (WorkspaceEntry): path ""
// (or ".", "./", "/") is its root, whose entries are the actors' spaces
// as directories, in name order; any other path starts with an actor's
// name ("alice/reports" is alice's reports). depth counts from path, so
// depth 2 at the root reaches each actor's top entries (depth <= 0: 1).
// The page holds at most limit entries (0: vfs.DefaultListLimit)
// after cursor, in List's order, and says whether more remain after it
// (ask again with the last entry's path as the cursor). At the root a page
// reads at most limit+2 spaces: the cursor's, and limit+1 after it.
//
// only, when not empty, limits the listing to those actors: the others
// are absent from its root, and a path in one of their spaces reads as an
// actor without a space does (an empty root; wserr.FileNotFound below
// it). Errors: wserr.InvalidPath, wserr.InvalidActor (the path's first
// segment), wserr.FileNotFound, wserr.InvalidArgument for a negative
// limit.
func (s *Spaces) WorkspacePage(ctx context.Context, only []string, path string, depth int, cursor WorkspaceCursor, limit int) ([]WorkspaceEntry, bool, error) {
	if limit < 0 {
		return nil, false, negativeLimit("actor ls", limit)
	}
	actor, p, err := parseWorkspacePath(path)
	if err != nil {
		return nil, false, err
	}
	if depth <= 0 {
		depth = 1
	}
	if limit <= 0 {
		limit = vfs.DefaultListLimit
	}
	var out []WorkspaceEntry
	more := false
	err = s.db.View(ctx, func(tx *index.Tx) error {
		if actor != "" {
			after, ok := cursor.within(actor)
			if !ok {
				return nil
			}
			sp, err := visibleSpace(ctx, tx, only, actor)
			if err != nil {
				return err
			}
			ls, m, err := s.trees.ListPage(ctx, tx, sp.Root, p, depth, vfs.ListPage{After: after, Limit: limit})
			if err != nil {
				return underActor(actor, err)
			}
			out, more = appendUnder(out, actor, ls), m
			return nil
		}
		// One entry past the page says whether more remain; every space
		// read adds one at least, so limit+1 spaces fill the page.
		want := limit + 1
		if cursor.Actor != "" && depth > 1 {
			sp, err := visibleSpace(ctx, tx, only, cursor.Actor)
			if err != nil {
				return err
			}
			ls, _, err := s.trees.ListPage(ctx, tx, sp.Root, vfs.Root(), depth-1, vfs.ListPage{After: cursor.After, Limit: want})
			if err != nil {
				return underActor(cursor.Actor, err)
			}
			out = appendUnder(out, cursor.Actor, ls)
		}
		if len(out) >= want {
			return nil
		}
		rows, err := spacesAfter(ctx, tx, only, cursor.Actor, want-len(out))
		if err != nil {
			return err
		}
		for _, sp := range rows {
			if len(out) >= want {
				break
			}
			dir, err := s.spaceDir(ctx, tx, sp)
			if err != nil {
				return err
			}
			out = append(out, dir)
			if depth == 1 || len(out) >= want {
				// A page's limit of 0 would read the space whole.
				continue
			}
			ls, _, err := s.trees.ListPage(ctx, tx, sp.Root, vfs.Root(), depth-1, vfs.ListPage{Limit: want - len(out)})
			if err != nil {
				return underActor(sp.Actor, err)
			}
			out = appendUnder(out, sp.Actor, ls)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if actor == "" && len(out) > limit {
		out, more = out[:limit], true
	}
	return out, more, nil
}

// StatsPage returns the stats of the actors with a space whose names sort
// after after ("": from the first), one per actor as Stats counts them, at
// most limit of them (0: DefaultStatsLimit), and whether more
// remain after them. only, when not empty, limits the page to those
// actors. Each actor's stats are its row's totals and count of versions,
// so a page reads its rows and nothing else, or, for a space not changed
// since an older build made it, a walk of its tree. Errors:
// wserr.InvalidArgument for a limit negative or past MaxStatsLimit, or an
// after no actor can be (CheckActorCursor);
// wserr.Corrupt if a tree is missing.
func (s *Spaces) StatsPage(ctx context.Context, only []string, after string, limit int) ([]Stats, bool, error) {
	if limit < 0 || limit > MaxStatsLimit {
		return nil, false, wserr.New(wserr.InvalidArgument, "actor stats", "", "limit must be in 0..%d (0: %d), not %d", MaxStatsLimit, DefaultStatsLimit, limit)
	}
	if err := CheckActorCursor(after); err != nil {
		return nil, false, wserr.New(wserr.InvalidArgument, "actor stats", "", "%s", err.Error())
	}
	if limit <= 0 {
		limit = DefaultStatsLimit
	}
	var out []Stats
	more := false
	err := s.db.View(ctx, func(tx *index.Tx) error {
		rows, err := spacesAfter(ctx, tx, only, after, limit+1)
		if err != nil {
			return err
		}
		if more = len(rows) > limit; more {
			rows = rows[:limit]
		}
		for _, sp := range rows {
			st, err := s.stats(ctx, tx, sp)
			if err != nil {
				return err
			}
			out = append(out, st)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// parseWorkspacePath splits a path of the spaces' tree into its actor and
// the path in the actor's space; actor "" is the tree's root.
func parseWorkspacePath(path string) (actor string, p vfs.Path, err error) {
	if path == "/" || vfs.NamesRoot(path) {
		return "", vfs.Root(), nil
	}
	whole, err := vfs.ParsePath(path)
	if err != nil {
		return "", vfs.Path{}, err
	}
	actor, rest, _ := strings.Cut(whole.String(), "/")
	if actor, err = ParseActor(actor); err != nil {
		return "", vfs.Path{}, err
	}
	if rest == "" {
		return actor, vfs.Root(), nil
	}
	p, err = vfs.ParsePath(rest)
	return actor, p, err
}

// visibleSpace reads actor's row in tx, or, when only leaves actor out,
// the empty space of an actor without one.
func visibleSpace(ctx context.Context, tx *index.Tx, only []string, actor string) (spaceRow, error) {
	if len(only) > 0 && !slices.Contains(only, actor) {
		return spaceRow{Actor: actor, Root: vfs.EmptyTree}, nil
	}
	sp, _, err := findSpace(ctx, tx, actor)
	return sp, err
}

// spacesAfter reads, with their totals, up to n spaces whose actors sort
// after after, of the actors only names when it names any: a page of the
// table, or a look-up of each of only's actors after after, in order,
// until n are found.
func spacesAfter(ctx context.Context, tx *index.Tx, only []string, after string, n int) ([]spaceRow, error) {
	if len(only) == 0 {
		var rows []spaceRow
		err := tx.SelectContext(ctx, &rows, `SELECT actor, root, seq, created, updated, files, dirs, bytes, versions FROM actor_spaces
			WHERE actor > ? ORDER BY actor LIMIT ?`, after, n)
		return rows, index.Translate(err)
	}
	names := slices.Clone(only)
	slices.Sort(names)
	var rows []spaceRow
	for _, a := range slices.Compact(names) {
		if len(rows) == n {
			break
		}
		if a <= after {
			continue
		}
		sp, exists, err := findSpace(ctx, tx, a)
		if err != nil {
			return nil, err
		}
		if exists {
			rows = append(rows, sp)
		}
	}
	return rows, nil
}

// spaceDir is the directory entry of sp's space at the root of the
// spaces' tree: its size, the bytes of its files, is the row's total, or
// the sum of its top entries' when the row has none.
func (s *Spaces) spaceDir(ctx context.Context, tx *index.Tx, sp spaceRow) (WorkspaceEntry, error) {
	e := WorkspaceEntry{Path: sp.Actor, Entry: vfs.Entry{Name: sp.Actor, Kind: vfs.KindDir, Hash: sp.Root}}
	if n, ok := sp.totals(); ok {
		e.Size = n.Bytes
		return e, nil
	}
	top, err := s.trees.List(ctx, tx, sp.Root, vfs.Root(), 1)
	if err != nil {
		return e, underActor(sp.Actor, err)
	}
	for _, l := range top {
		e.Size += l.Size
	}
	return e, nil
}

// appendUnder appends ls, entries of actor's space, with their paths
// under the actor.
func appendUnder(out []WorkspaceEntry, actor string, ls []vfs.Listed) []WorkspaceEntry {
	for _, l := range ls {
		out = append(out, WorkspaceEntry{Path: actor + "/" + l.Path.String(), Entry: l.Entry})
	}
	return out
}

// underActor makes the error of a path missing from actor's space name it
// as a path of the spaces' tree.
func underActor(actor string, err error) error {
	we, ok := err.(*wserr.Error)
	if !ok || we.Path == "" || we.Path == "." || (we.Code != wserr.FileNotFound && we.Code != wserr.NotADirectory) {
		return err
	}
	named := *we
	named.Path = actor + "/" + we.Path
	return &named
}
