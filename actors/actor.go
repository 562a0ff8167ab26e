package actors

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// MaxActorLen bounds an actor name in bytes: short enough to be a directory
// name on every platform and a key in logs.
const MaxActorLen = 128

// ParseActor validates name as an actor name and returns it. An actor
// name is one workspace path segment, so it obeys every rule of
// vfs.ParsePath (no separators, no "." or "..", no control, bidi or
// zero-width characters, no name another platform reserves, NFC) and is at
// most MaxActorLen bytes. It fails with wserr.InvalidActor, naming the rule.
func ParseActor(name string) (string, error) {
	const op = "parse actor"
	switch {
	case name == "":
		return "", wserr.New(wserr.InvalidActor, op, "", "actor name is empty")
	case len(name) > MaxActorLen:
		return "", wserr.New(wserr.InvalidActor, op, "", "actor name is %d bytes, longer than the limit of %d", len(name), MaxActorLen)
	case strings.ContainsAny(name, `/\`):
		return "", wserr.New(wserr.InvalidActor, op, name, "actor name contains a path separator")
	case name == "." || name == "..":
		return "", wserr.New(wserr.InvalidActor, op, name, "actor name is %q", name)
	}
	p, err := vfs.ParsePath(name)
	if err != nil {
		var we *wserr.Error
		msg := err.Error()
		if e, ok := err.(*wserr.Error); ok {
			we = e
			msg = we.Msg
		}
		return "", wserr.New(wserr.InvalidActor, op, quote(name), "actor name is not a valid path segment: %s", msg)
	}
	if p.String() != name {
		return "", wserr.New(wserr.InvalidActor, op, quote(name), "actor name is not in normal form (want %q)", p.String())
	}
	return name, nil
}

// quote makes a refused name fit an error's one line: cut to
// MaxActorLen, and Go-quoted ("al\nice", "a\xffb") when it holds control
// characters or bytes that are not UTF-8, so nothing in it can end the
// line or be mistaken for another name.
func quote(s string) string {
	if len(s) > MaxActorLen {
		s = s[:MaxActorLen] + "..."
	}
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// parsePath validates a file path inside a space: "/" and the relative
// spellings of the root ("", ".", "./": vfs.NamesRoot) name the space's
// root where allowRoot, and are refused otherwise.
func parsePath(s string, allowRoot bool) (vfs.Path, error) {
	if allowRoot && (s == "/" || vfs.NamesRoot(s)) {
		return vfs.Root(), nil
	}
	return vfs.ParsePath(s)
}

// CheckActorCursor checks the cursor of a page of actors (StatsPage,
// ActorsPage): "" or the last actor of the page before. A string that no
// actor's name can be, under this build's rules or an earlier one's (a
// separator, "." or "..", a NUL, bytes that are not UTF-8, past
// MaxActorLen), would start the page at a place no actor holds, leaving
// out the actors that sort before it; its error says why, for the caller
// to code as the host's mistake.
func CheckActorCursor(after string) error {
	switch {
	case after == "":
		return nil
	case len(after) > MaxActorLen, strings.ContainsAny(after, "/\\\x00"), after == "." || after == "..", !utf8.ValidString(after):
		return fmt.Errorf("after must be the last actor of the page before, not %s", quote(after))
	}
	return nil
}
