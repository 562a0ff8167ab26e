package vfs

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wsstore/wsstore/wserr"
)

// FuzzParsePath checks the path contract on arbitrary input: whatever
// ParsePath accepts is clean, relative, printable and stays under the root,
// and whatever it rejects comes back as a quoted wserr.InvalidPath error.
// The seed corpus is also kept under testdata/fuzz/FuzzParsePath.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		// The forbidden examples of the contract.
		"../secrets.json",
		"/Users/me/file",
		`C:\Users\me\file`,
		"output/../../chat.jsonl",
		"scratch/\x00bad",
		"",
		// Edges of the rules.
		"output/main.md",
		"./output//main.md/",
		".",
		"./",
		"a/../b",
		"//server/share",
		`\\server\share`,
		"c:foo",
		"./C:/x",
		"a/C:/b",
		"a\x7fb",
		"a\xffb",
		"...",
		"données/🚀.md",
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			checkPathError(t, s, err)
			return
		}
		checkParsedPath(t, s, p)
	})
}

// checkPathError asserts that err is a well-formed InvalidPath error for s.
func checkPathError(t *testing.T, s string, err error) {
	t.Helper()
	var we *wserr.Error
	if !errors.As(err, &we) {
		t.Fatalf("ParsePath(%q) error %v is %T, not *wserr.Error", s, err, err)
	}
	if we.Code != wserr.InvalidPath || we.Op != "parse path" || we.Msg == "" {
		t.Fatalf("ParsePath(%q) error = %#v, want code %s, op \"parse path\" and a message", s, we, wserr.InvalidPath)
	}
	if hasASCIIControl(we.Path) || !utf8.ValidString(we.Path) {
		t.Fatalf("ParsePath(%q) error path %q is not safely quoted", s, we.Path)
	}
}

// checkParsedPath asserts every property of an accepted path p parsed from s.
func checkParsedPath(t *testing.T, s string, p Path) {
	t.Helper()
	got := p.String()
	switch {
	case p.IsRoot():
		t.Fatalf("ParsePath(%q) returned the root", s)
	case !utf8.ValidString(got):
		t.Fatalf("ParsePath(%q) = %q, not valid UTF-8", s, got)
	case hasASCIIControl(got):
		t.Fatalf("ParsePath(%q) = %q, holds a control character", s, got)
	case strings.Contains(got, `\`):
		t.Fatalf("ParsePath(%q) = %q, holds a backslash", s, got)
	case strings.HasPrefix(got, "/"):
		t.Fatalf("ParsePath(%q) = %q, is absolute", s, got)
	case hasDrivePrefix(got):
		t.Fatalf("ParsePath(%q) = %q, has a drive prefix", s, got)
	case len(got) > MaxPathLen:
		t.Fatalf("ParsePath(%q) = %q, is %d bytes", s, got, len(got))
	}
	for _, seg := range p.Segments() {
		if seg == "" || seg == "." || seg == ".." || len(seg) > MaxSegmentLen {
			t.Fatalf("ParsePath(%q) = %q, has segment %q", s, got, seg)
		}
	}
	// With no ".." and no leading '/', cleaning is exactly path.Clean.
	if want := path.Clean(s); got != want {
		t.Fatalf("ParsePath(%q) = %q, path.Clean gives %q", s, got, want)
	}

	// Idempotent: the clean form parses to the same value.
	q, err := ParsePath(got)
	if err != nil || q != p {
		t.Fatalf("ParsePath(%q) = %q, but reparsing gives %q, %v", s, got, q, err)
	}

	// Never escapes the root once joined onto a host directory.
	const root = "/root"
	joined := filepath.Join(root, got)
	rel, err := filepath.Rel(root, joined)
	if err != nil || !strings.HasPrefix(joined, root+string(filepath.Separator)) ||
		rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || !filepath.IsLocal(got) {
		t.Fatalf("ParsePath(%q) = %q escapes %s: joined %q, rel %q, %v", s, got, root, joined, rel, err)
	}

	// Text round-trip.
	text, err := p.MarshalText()
	if err != nil {
		t.Fatalf("MarshalText(%q): %v", got, err)
	}
	var u Path
	if err := u.UnmarshalText(text); err != nil || u != p {
		t.Fatalf("UnmarshalText(%q) = %q, %v, want %q", text, u, err, got)
	}

	// The accessors agree with one another.
	segs := p.Segments()
	if strings.Join(segs, "/") != got || p.Top() != segs[0] || p.Base() != segs[len(segs)-1] {
		t.Fatalf("accessors of %q disagree: segments %q, top %q, base %q", got, segs, p.Top(), p.Base())
	}
	if !p.HasPrefix(p) || !p.HasPrefix(p.Dir()) || !p.HasPrefix(Root()) {
		t.Fatalf("%q does not have its own ancestors as prefixes", got)
	}
	if j, err := p.Dir().Join(p.Base()); err != nil || j != p {
		t.Fatalf("Dir(%q).Join(Base) = %q, %v", got, j, err)
	}
}

// hasASCIIControl reports whether s holds an ASCII control character.
func hasASCIIControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
