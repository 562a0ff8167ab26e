package actors

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// DeleteByPrefix removes, in one change, everything in actor's space whose
// path starts with prefix: "temp/" removes the directory temp, "temp"
// also removes temp.md and temp2/, "reports/2025-" the files of reports/
// whose names start with "2025-". What the prefix names up to its last
// segment must be a valid path; its last segment is text a name starts
// with (splitPrefix). A prefix that matches nothing records
// nothing (Seq 0). Errors: wserr.InvalidActor, wserr.InvalidPath (also for
// an empty prefix: delete the actor's files by name instead).
func (s *Spaces) DeleteByPrefix(ctx context.Context, actor, prefix string) (Change, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return Change{}, err
	}
	if strings.Trim(prefix, "/") == "" {
		return Change{}, wserr.New(wserr.InvalidPath, "delete by prefix", prefix, "an empty prefix would name the whole space: delete its files or directories by name")
	}
	dirOnly := strings.HasSuffix(prefix, "/")
	dir, base, err := splitPrefix(strings.TrimSuffix(prefix, "/"), dirOnly)
	if err != nil {
		return Change{}, err
	}
	var c Change
	err = s.db.Update(ctx, func(tx *index.Tx) error {
		sp, exists, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		parent, err := s.trees.Lookup(ctx, tx, sp.Root, dir)
		if wserr.Is(err, wserr.FileNotFound) {
			c = Change{Actor: actor, Op: OpDeletePrefix, Path: prefix}
			return nil
		}
		if err != nil {
			return err
		}
		if parent.Kind != vfs.KindDir {
			c = Change{Actor: actor, Op: OpDeletePrefix, Path: prefix}
			return nil
		}
		children, err := s.trees.List(ctx, tx, sp.Root, dir, 1)
		if err != nil {
			return err
		}
		root := sp.Root
		var files []vfs.FileChange
		var nfiles, nbytes int64
		for _, e := range children {
			name := e.Path.Base()
			match := strings.HasPrefix(name, base)
			if dirOnly {
				match = name == base && e.Kind == vfs.KindDir
			}
			if !match {
				continue
			}
			n, err := s.countFiles(ctx, tx, e.Entry)
			if err != nil {
				return err
			}
			nfiles, nbytes = nfiles+n, nbytes+e.Size
			if e.Kind == vfs.KindFile {
				files = append(files, vfs.FileChange{Path: e.Path})
				continue
			}
			if root, err = s.trees.Set(ctx, tx, root, e.Path, nil); err != nil {
				return err
			}
		}
		if root, err = setFiles(ctx, tx, s.trees, root, files); err != nil {
			return err
		}
		c, err = s.record(ctx, tx, sp, exists, root, Change{Op: OpDeletePrefix, Path: prefix, Files: nfiles, Bytes: nbytes})
		return err
	})
	return c, err
}

// splitPrefix splits a prefix (its trailing "/" trimmed) into the
// directory it lies in, which must be a valid path, and the text its last
// segment starts with. That text is matched, not named: it need not be a
// valid name itself ("report." matches report.md, "CON" CONTRACT.md), but
// it holds no separator, NUL or invalid UTF-8 and is not "." or "..". A
// directory prefix (dirOnly) names its directory whole, so it must be a
// valid path. Errors: wserr.InvalidPath.
func splitPrefix(prefix string, dirOnly bool) (dir vfs.Path, base string, err error) {
	if dirOnly {
		p, err := vfs.ParsePath(prefix)
		if err != nil {
			return vfs.Path{}, "", err
		}
		return p.Dir(), p.Base(), nil
	}
	dir, base = vfs.Root(), prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if dir, err = vfs.ParsePath(prefix[:i]); err != nil {
			return vfs.Path{}, "", err
		}
		base = prefix[i+1:]
	}
	switch {
	case base == "" || base == "." || base == "..":
		return vfs.Path{}, "", wserr.New(wserr.InvalidPath, "delete by prefix", prefix, "the prefix must end in a name or the start of one")
	case !utf8.ValidString(base) || strings.ContainsAny(base, "\x00\\"):
		return vfs.Path{}, "", wserr.New(wserr.InvalidPath, "delete by prefix", prefix, "the prefix holds a NUL, a backslash or bytes that are not UTF-8")
	}
	return dir, base, nil
}

// fileBatcher is the optional ability to apply many file changes at once;
// *vfs.Trees has it. Without it the changes apply one by one.
type fileBatcher interface {
	SetFiles(ctx context.Context, tx *index.Tx, root cas.Hash, changes []vfs.FileChange) (cas.Hash, error)
}

func setFiles(ctx context.Context, tx *index.Tx, t Trees, root cas.Hash, changes []vfs.FileChange) (cas.Hash, error) {
	if len(changes) == 0 {
		return root, nil
	}
	if b, ok := t.(fileBatcher); ok {
		return b.SetFiles(ctx, tx, root, changes)
	}
	var err error
	for _, c := range changes {
		if root, err = t.Set(ctx, tx, root, c.Path, c.Entry); err != nil {
			return cas.Hash{}, err
		}
	}
	return root, nil
}

// Stats is the use of one actor's space.
type Stats struct {
	Actor string `json:"actor"`
	// Files and Dirs count the live tree's files and directories; Bytes
	// totals the files' sizes.
	Files int64 `json:"files"`
	Dirs  int64 `json:"dirs"`
	Bytes int64 `json:"bytes"`
	// Seq is the last change; Versions counts the changes whose version
	// is still held (not pruned by GC).
	Seq      int64    `json:"seq"`
	Versions int64    `json:"versions"`
	Root     cas.Hash `json:"root"`
}

// Stats counts actor's space: one row read, the totals and the count of
// versions each change and prune keeps beside the space's root (a space
// not changed since the store was made by an older build is walked, and
// its versions counted in its journal, until its next change counts it).
// An actor with no space has zero stats.
// Errors: wserr.InvalidActor; wserr.Corrupt if a tree is missing.
func (s *Spaces) Stats(ctx context.Context, actor string) (Stats, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	err = s.db.View(ctx, func(tx *index.Tx) error {
		sp, _, err := findSpace(ctx, tx, actor)
		if err != nil {
			return err
		}
		st, err = s.stats(ctx, tx, sp)
		return err
	})
	return st, err
}

// stats counts the space whose row is sp, in tx.
func (s *Spaces) stats(ctx context.Context, tx *index.Tx, sp spaceRow) (Stats, error) {
	st := Stats{Actor: sp.Actor, Seq: sp.Seq, Root: sp.Root}
	versions := sp.Versions
	if !versions.Valid {
		var err error
		if versions, err = countVersions(ctx, tx, sp.Actor); err != nil {
			return Stats{}, err
		}
	}
	st.Versions = versions.Int64
	if n, ok := sp.totals(); ok {
		st.Files, st.Dirs, st.Bytes = n.Files, n.Dirs, n.Bytes
		return st, nil
	}
	err := s.trees.Walk(ctx, tx, sp.Root, func(_ vfs.Path, e vfs.Entry) error {
		if e.Kind == vfs.KindDir {
			st.Dirs++
		} else {
			st.Files++
			st.Bytes += e.Size
		}
		return nil
	})
	return st, err
}

// Actors lists every actor that has a space, by name, held whole
// (ActorsPage reads them a page at a time).
func (s *Spaces) Actors(ctx context.Context) ([]Space, error) {
	out, _, err := s.ActorsPage(ctx, nil, "", 0)
	return out, err
}

// ActorsPage lists the actors with a space whose names sort after after
// (byte order; "": from the first), of the actors only names when it
// names any (a token's actors), at most limit of them (0: all), and
// whether more remain after them. With only, each of its actors after
// after is looked up in order until the page is full, so a page reads
// the spaces it lists, not every space. A negative limit, or an after no
// actor can be (CheckActorCursor), is wserr.InvalidArgument.
func (s *Spaces) ActorsPage(ctx context.Context, only []string, after string, limit int) ([]Space, bool, error) {
	if limit < 0 {
		return nil, false, negativeLimit("actors", limit)
	}
	if err := CheckActorCursor(after); err != nil {
		return nil, false, wserr.New(wserr.InvalidArgument, "actors", "", "%s", err.Error())
	}
	n := -1 // SQLite's "no limit"
	if limit > 0 {
		n = limit + 1 // one row more than the page says whether more remain
	}
	var rows []spaceRow
	err := s.db.View(ctx, func(tx *index.Tx) (err error) {
		rows, err = spacesAfter(ctx, tx, only, after, n)
		return err
	})
	if err != nil {
		return nil, false, index.Translate(err)
	}
	more := limit > 0 && len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]Space, len(rows))
	for i, r := range rows {
		out[i] = r.space()
	}
	return out, more, nil
}

// Changes pages actor's journal: the changes after afterSeq in seq order,
// at most limit of them (0: all). Errors: wserr.InvalidActor,
// wserr.InvalidArgument for a negative limit.
func (s *Spaces) Changes(ctx context.Context, actor string, afterSeq int64, limit int) ([]Change, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, negativeLimit("actor changes", limit)
	}
	if limit == 0 {
		limit = -1
	}
	var rows []changeRow
	err = s.db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT actor, seq, op, path, files, bytes, root, created FROM actor_changes
			WHERE actor = ? AND seq > ? ORDER BY seq LIMIT ?`, actor, afterSeq, limit)
	})
	if err != nil {
		return nil, index.Translate(err)
	}
	out := make([]Change, len(rows))
	for i, r := range rows {
		out[i] = r.change()
	}
	return out, nil
}

// version returns the root of actor's space after change seq: the empty
// tree for seq 0, the live root for the last seq. A gc change moves no
// file, so the version after it is the one before it: that of the last
// change before it that is not a gc (the empty space if none is).
func version(ctx context.Context, tx *index.Tx, actor string, seq int64) (cas.Hash, error) {
	if seq == 0 {
		return vfs.EmptyTree, nil
	}
	var row struct {
		Op   string   `db:"op"`
		Root cas.Hash `db:"root"`
	}
	err := tx.GetContext(ctx, &row, `SELECT op, root FROM actor_changes WHERE actor = ? AND seq = ?`, actor, seq)
	if errors.Is(err, sql.ErrNoRows) {
		return cas.Hash{}, wserr.New(wserr.NotFound, "actor version", "", "actor %s has no change %d", actor, seq)
	}
	if err != nil {
		return cas.Hash{}, index.Translate(err)
	}
	if row.Op != string(OpGC) {
		if row.Root.IsZero() {
			return cas.Hash{}, wserr.New(wserr.NotFound, "actor version", "", "actor %s's version %d was pruned by gc", actor, seq)
		}
		return row.Root, nil
	}
	var before struct {
		Seq  int64    `db:"seq"`
		Root cas.Hash `db:"root"`
	}
	err = tx.GetContext(ctx, &before, `SELECT seq, root FROM actor_changes WHERE actor = ? AND seq < ? AND op != ?
		ORDER BY seq DESC LIMIT 1`, actor, seq, string(OpGC))
	if errors.Is(err, sql.ErrNoRows) {
		return vfs.EmptyTree, nil
	}
	if err != nil {
		return cas.Hash{}, index.Translate(err)
	}
	if before.Root.IsZero() {
		return cas.Hash{}, wserr.New(wserr.NotFound, "actor version", "", "actor %s's version %d, which gc change %d left as it was, was pruned by gc", actor, before.Seq, seq)
	}
	return before.Root, nil
}

// ListAt is List on the version after change seq (0: the empty space; a
// gc change's is the version before it). Errors: those of List, and wserr.NotFound for a change that does not
// exist or whose version GC pruned.
func (s *Spaces) ListAt(ctx context.Context, actor string, seq int64, path string, depth int) ([]vfs.Listed, error) {
	out, _, err := s.ListAtPage(ctx, actor, seq, path, depth, vfs.ListPage{})
	return out, err
}

// ListAtPage is ListAt a page at a time, as ListPage pages List.
func (s *Spaces) ListAtPage(ctx context.Context, actor string, seq int64, path string, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error) {
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
		root, err := version(ctx, tx, actor, seq)
		if err != nil {
			return err
		}
		out, more, err = s.trees.ListPage(ctx, tx, root, p, depth, page)
		return err
	})
	return out, more, err
}

// Diff returns the file changes from the version after change from to the
// version after change to (0: the empty space; a gc change's is the
// version before it), sorted by path. Errors:
// wserr.InvalidActor; wserr.NotFound for a change that does not exist or
// whose version GC pruned.
func (s *Spaces) Diff(ctx context.Context, actor string, from, to int64) ([]vfs.Change, error) {
	out, _, err := s.DiffPage(ctx, actor, from, to, vfs.ListPage{})
	return out, err
}

// DiffPage returns one page of Diff's changes: those whose paths come
// after page.After, at most page.Limit of them (0: all), and whether
// changes remain after it. It fails as Diff does.
func (s *Spaces) DiffPage(ctx context.Context, actor string, from, to int64, page vfs.ListPage) ([]vfs.Change, bool, error) {
	actor, err := ParseActor(actor)
	if err != nil {
		return nil, false, err
	}
	var out []vfs.Change
	more := false
	err = s.db.View(ctx, func(tx *index.Tx) error {
		a, err := version(ctx, tx, actor, from)
		if err != nil {
			return err
		}
		b, err := version(ctx, tx, actor, to)
		if err != nil {
			return err
		}
		out, more, err = s.trees.DiffPage(ctx, tx, a, b, page)
		return err
	})
	return out, more, err
}

// GCOptions configure GC.
type GCOptions struct {
	// Actor limits GC to one actor's space; "" means every actor.
	Actor string
	// KeepVersions is how many of the newest versions of each space keep
	// their trees; default 1, the live version alone.
	KeepVersions int
}

// GCReport says what GC pruned.
type GCReport struct {
	Actors int   `json:"actors"`
	Pruned int64 `json:"pruned"`
}

// GC prunes the old versions of actor spaces: every version but the
// newest KeepVersions stops holding its tree, so the store's gc can free
// the files no other root shares. The journal keeps every change; a
// pruned version lists and diffs as store.not_found. Each space that lost
// versions records a gc change, which is not a version itself. GC deletes no blob or tree itself: that
// is the store's gc, which sees the versions left as roots. Every actor's
// spaces are read gcPage at a time, each page pruned in a transaction of
// its own (a space whose count of versions is within KeepVersions costs
// no statement more), so memory and the write lock's hold stay bounded
// however many spaces there are; a failure leaves the pages before it
// pruned, which a GC again finds done, and returns the report of them
// with its error. Errors: wserr.InvalidActor,
// wserr.InvalidArgument for a negative KeepVersions.
func (s *Spaces) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	if opt.KeepVersions < 0 {
		return GCReport{}, wserr.New(wserr.InvalidArgument, "actor gc", "", "keepVersions %d is negative", opt.KeepVersions)
	}
	if opt.KeepVersions == 0 {
		opt.KeepVersions = 1
	}
	if opt.Actor != "" {
		if _, err := ParseActor(opt.Actor); err != nil {
			return GCReport{}, err
		}
	}
	var rep GCReport
	for after := ""; ; {
		var page GCReport
		var rows []spaceRow
		err := s.db.Update(ctx, func(tx *index.Tx) error {
			page, rows = GCReport{}, nil
			// With the totals: a gc change leaves the root, and so them,
			// as they are (record would count a row without them whole),
			// and takes what it prunes off the count of versions. One
			// actor's space is searched by its key.
			q, args := `SELECT actor, root, seq, created, updated, files, dirs, bytes, versions FROM actor_spaces
				WHERE actor > ? ORDER BY actor LIMIT ?`, []any{after, gcPage}
			if opt.Actor != "" {
				q, args = `SELECT actor, root, seq, created, updated, files, dirs, bytes, versions FROM actor_spaces WHERE actor = ?`, []any{opt.Actor}
			}
			if err := tx.SelectContext(ctx, &rows, q, args...); err != nil {
				return index.Translate(err)
			}
			for _, sp := range rows {
				n, err := s.pruneVersions(ctx, tx, sp, opt.KeepVersions)
				if err != nil {
					return err
				}
				if n > 0 {
					page.Actors++
					page.Pruned += n
				}
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.Actors += page.Actors
		rep.Pruned += page.Pruned
		if opt.Actor != "" || len(rows) < gcPage {
			return rep, nil
		}
		after = rows[len(rows)-1].Actor
	}
}

// gcPage is how many spaces GC reads and prunes in a transaction.
var gcPage = 256

// pruneVersions prunes, in tx, every version of sp but the newest keep
// and records the gc change, returning how many it pruned.
func (s *Spaces) pruneVersions(ctx context.Context, tx *index.Tx, sp spaceRow, keep int) (int64, error) {
	if sp.Versions.Valid && sp.Versions.Int64 <= int64(keep) {
		return 0, nil
	}
	// The oldest version kept; those before it go, their roots handed to
	// the collection pruneChunk at a time, so a space of any history is
	// pruned in bounded memory.
	var kept int64
	err := tx.GetContext(ctx, &kept, `SELECT seq FROM actor_changes WHERE actor = ? AND root IS NOT NULL
		ORDER BY seq DESC LIMIT 1 OFFSET ?`, sp.Actor, keep-1)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // no more versions than it keeps
	}
	if err != nil {
		return 0, index.Translate(err)
	}
	for after := int64(0); ; {
		var chunk []struct {
			Seq  int64    `db:"seq"`
			Root cas.Hash `db:"root"`
		}
		if err := tx.SelectContext(ctx, &chunk, `SELECT seq, root FROM actor_changes
			WHERE actor = ? AND root IS NOT NULL AND seq > ? AND seq < ? ORDER BY seq LIMIT ?`,
			sp.Actor, after, kept, pruneChunk); err != nil {
			return 0, index.Translate(err)
		}
		roots := make([]cas.Hash, len(chunk))
		for k, c := range chunk {
			roots[k] = c.Root
		}
		if err := s.trees.Orphaned(ctx, tx, roots...); err != nil {
			return 0, err
		}
		if len(chunk) < pruneChunk {
			break
		}
		after = chunk[len(chunk)-1].Seq
	}
	res, err := tx.ExecContext(ctx, `UPDATE actor_changes SET root = NULL WHERE actor = ? AND root IS NOT NULL AND seq < ?`, sp.Actor, kept)
	if err != nil {
		return 0, index.Translate(err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, index.Translate(err)
	}
	sp.Versions.Int64 -= n
	if _, err := s.record(ctx, tx, sp, true, sp.Root, Change{Op: OpGC, Files: n}); err != nil {
		return 0, err
	}
	return n, nil
}

// pruneChunk is how many versions' roots pruneVersions hands to the
// collection at a time.
var pruneChunk = 1000

// EachActorRoot calls fn, in tx, for every tree actor spaces hold on to:
// each space's live root (seq is its last change) and each version not
// pruned. These are gc roots.
func (s *Spaces) EachActorRoot(ctx context.Context, tx *index.Tx, fn func(actor string, seq int64, root cas.Hash) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT actor, seq, root FROM actor_spaces
		UNION ALL SELECT actor, seq, root FROM actor_changes WHERE root IS NOT NULL ORDER BY 1, 2`)
	if err != nil {
		return fmt.Errorf("actor roots: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var actor string
		var seq int64
		var root cas.Hash
		if err := rows.Scan(&actor, &seq, &root); err != nil {
			return fmt.Errorf("actor roots: %w", index.Translate(err))
		}
		if err := fn(actor, seq, root); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// EachMiscounted calls fn, in tx, for each space whose row's count
// of versions is not the number of its journal's rows that hold one: kept
// is the row's, counted the journal's. A row that keeps no count yet is
// not miscounted. It reads every journal row, once, a space at a time;
// fn's error stops it and is returned.
func (s *Spaces) EachMiscounted(ctx context.Context, tx *index.Tx, fn func(actor string, kept, counted int64) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT actor, versions, counted FROM (
		SELECT s.actor, s.versions,
			(SELECT count(*) FROM actor_changes c WHERE c.actor = s.actor AND c.root IS NOT NULL) AS counted
		FROM actor_spaces s WHERE s.versions IS NOT NULL)
		WHERE versions != counted ORDER BY actor`)
	if err != nil {
		return fmt.Errorf("actor versions: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var actor string
		var kept, counted int64
		if err := rows.Scan(&actor, &kept, &counted); err != nil {
			return fmt.Errorf("actor versions: %w", index.Translate(err))
		}
		if err := fn(actor, kept, counted); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// EachSpaceTotals calls fn, in tx, with each space whose row keeps its
// live tree's totals (a space not counted yet keeps none): its actor, its
// live root and the totals its row keeps, ordered by actor, reading
// spacePage rows at a time, so fsck can hold them to the tree. fn's error
// stops it and is returned.
func (s *Spaces) EachSpaceTotals(ctx context.Context, tx *index.Tx, fn func(actor string, root cas.Hash, kept vfs.Totals) error) error {
	var rows []spaceRow
	for after := ""; ; {
		rows = rows[:0]
		if err := tx.SelectContext(ctx, &rows, `SELECT actor, root, files, dirs, bytes FROM actor_spaces
			WHERE actor > ? ORDER BY actor LIMIT ?`, after, spacePage); err != nil {
			return fmt.Errorf("actor totals: %w", index.Translate(err))
		}
		for _, r := range rows {
			if t, ok := r.totals(); ok {
				if err := fn(r.Actor, r.Root, t); err != nil {
					return err
				}
			}
		}
		if len(rows) < spacePage {
			return nil
		}
		after = rows[len(rows)-1].Actor
	}
}

// HoldsTree reports whether an actor space's live root or a version not
// pruned is tree h, through the indexes on the root columns.
func (s *Spaces) HoldsTree(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM actor_spaces WHERE root = ?1)
		OR EXISTS (SELECT 1 FROM actor_changes WHERE root = ?1)`, h).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("actor roots: %w", index.Translate(err))
	}
	return ok, nil
}

// negativeLimit is the error of a negative limit given to op: zero asks
// for the default, and no negative one means anything.
func negativeLimit(op string, limit int) error {
	return wserr.New(wserr.InvalidArgument, op, "", "limit %d is negative (0: the default)", limit)
}
