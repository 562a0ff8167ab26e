package vfs

import (
	"fmt"

	"github.com/wsstore/wsstore/wserr"
)

// DefaultListLimit is the page size of a listing over the protocol or
// HTTP that names none, and MaxListLimit the largest one may ask for: a page holds its
// entries in memory, and an answer over the protocol holds them again as
// JSON, so a whole tree of any size is read a page at a time.
const (
	DefaultListLimit = 10000
	MaxListLimit     = 100000
)

// ListPage asks for one page of a listing: the entries that come after
// After in the listing's order (paths compared segment by segment; the
// zero Path, the root, asks from the start), at most Limit of them (0: no
// limit; a negative Limit is workspace.invalid_argument, Check). A page is read in time that grows with the entries it answers
// and the depth of After, not with the entries before After: subtrees
// that lie wholly before it are passed over unread.
type ListPage struct {
	After Path
	Limit int
}

// ParseListPage reads a page as a host gives it: after, a path (one that
// names the root, "", "." or "./" (NamesRoot): from the start), and limit (0: DefaultListLimit, at most
// MaxListLimit). The error says what is wrong, for the caller to code as
// the host's mistake.
func ParseListPage(after string, limit int) (ListPage, error) {
	page := ListPage{Limit: limit}
	switch {
	case limit < 0 || limit > MaxListLimit:
		return page, fmt.Errorf("limit must be in 0..%d (0: %d), not %d", MaxListLimit, DefaultListLimit, limit)
	case limit == 0:
		page.Limit = DefaultListLimit
	}
	if !NamesRoot(after) {
		// Only a cursor: a name stored before the rules about other
		// platforms' special names is one a listing holds, and gives.
		var err error
		if page.After, err = parseRules("parse path", after, false); err != nil {
			return page, fmt.Errorf("after must be a path a listing holds: %s", wserr.MessageOf(err))
		}
	}
	return page, nil
}

// Check refuses a negative Limit (workspace.invalid_argument naming op
// and p): 0 is the one way to ask for no limit.
func (pg ListPage) Check(op string, p Path) error {
	if pg.Limit < 0 {
		return wserr.New(wserr.InvalidArgument, op, p.String(), "limit %d is negative (0: no limit)", pg.Limit)
	}
	return nil
}

// cursor says where the entry at q stands to a page's After.
type cursor int

const (
	// pastCursor: q and everything below it come after After.
	pastCursor cursor = iota
	// intoCursor: q is After or lies above it: q is not listed, what
	// lies below it may be.
	intoCursor
	// beforeCursor: q and everything below it come before After.
	beforeCursor
)

// cursorOf places q against after (the zero Path: no cursor).
func cursorOf(q, after Path) cursor {
	switch {
	case after.IsRoot():
		return pastCursor
	case after.HasPrefix(q):
		return intoCursor
	case comparePathSegments(q, after) < 0:
		return beforeCursor
	}
	return pastCursor
}

// Admits reports whether q comes after the page's cursor, so that the
// page lists it.
func (pg ListPage) Admits(q Path) bool {
	return cursorOf(q, pg.After) == pastCursor
}

// Past returns the entries of infos that come after the page's cursor, in
// path order, whatever the page's limit.
func (pg ListPage) Past(infos []FileInfo) []FileInfo {
	out := infos[:0:0]
	for _, fi := range infos {
		if pg.Admits(fi.Path) {
			out = append(out, fi)
		}
	}
	sortInfos(out)
	return out
}

// Filter returns Past cut to the page's limit, and whether any were cut.
// It is for listings small enough to hold whole (virtual resources, the
// allowed host directories).
func (pg ListPage) Filter(infos []FileInfo) ([]FileInfo, bool) {
	out := pg.Past(infos)
	if pg.Limit > 0 && len(out) > pg.Limit {
		return out[:pg.Limit], true
	}
	return out, false
}

// Within returns the page's cursor for a listing of the directory dir
// whose paths are relative to it (a mount's), and false if the cursor
// lies past all of dir's entries, so that the listing is empty.
func (pg ListPage) Within(dir Path) (ListPage, bool) {
	switch {
	case pg.After.IsRoot():
		return pg, true
	case pg.After.HasPrefix(dir):
		return ListPage{After: relativeTo(pg.After, dir), Limit: pg.Limit}, true
	case comparePathSegments(pg.After, dir) < 0:
		return ListPage{Limit: pg.Limit}, true
	}
	return pg, false
}
