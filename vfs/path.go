package vfs

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/wsstore/wsstore/wserr"
)

// Limits on a workspace path, in bytes. They match common file-system
// limits (NAME_MAX, PATH_MAX) so that any accepted path can be materialised.
const (
	MaxPathLen    = 4096
	MaxSegmentLen = 255
)

// maxQuotedInput bounds how much of a rejected input is echoed back in an
// error, so a huge argument does not come back as a huge tool error.
const maxQuotedInput = 256

// Path is a validated workspace path: relative, '/'-separated, clean, valid
// UTF-8, never escaping the root. The zero value is the root. Paths are
// comparable with == and usable as map keys, because equal paths always have
// the same clean spelling.
type Path struct {
	s string // "" for the root, else clean segments joined by '/'
}

// ParsePath validates s as a workspace path and returns it in clean form:
// "./" segments, repeated slashes and a trailing slash are removed. It returns
// a *wserr.Error with code wserr.InvalidPath, naming the rule that failed, if
// s is empty, longer than MaxPathLen, not valid UTF-8, holds a NUL or other
// ASCII control character, is absolute or UNC-like, starts with a Windows
// drive prefix, holds a backslash, has a ".." segment or a segment longer
// than MaxSegmentLen, or names the root itself ("." or "./"). The root is
// only available through Root, so a tool argument can never silently target
// the whole workspace.
//
// It also refuses names that another platform would treat specially, so
// any accepted path checks out the same on Windows, macOS and Linux: a
// segment that is a Windows device name with or without an extension
// (CON, PRN, AUX, NUL, COM0-9, LPT0-9: "aux.md", "LPT9.txt"), a ':' (an
// NTFS alternate data stream such as "main.md:ads", or the macOS path
// separator), a segment ending in '.' or ' ' (Windows drops them), bidi
// controls, zero-width and other invisible characters (a soft hyphen,
// Hangul fillers: they make a name read as another),
// and Unicode not in NFC (macOS and Windows would fold it onto the NFC
// spelling, so two names could collide on a checkout); the message gives
// the NFC spelling to use. The characters Windows refuses in names besides
// ':' (< > " | ? *) are accepted, as Linux and macOS keep them: a checkout
// of such a name on Windows fails. Names that differ only in case are
// accepted, as
// Linux keeps them apart; a checkout onto a case-insensitive file system
// (macOS's and Windows's default) cannot hold both, and fails rather than
// merge them, since it creates every file and directory exclusively.
func ParsePath(s string) (Path, error) {
	return parsePath("parse path", s)
}

// parsePath implements ParsePath, reporting errors under op.
func parsePath(op, s string) (Path, error) { return parseRules(op, s, true) }

// MustPath is like ParsePath but panics on error; it is for tests and
// constants.
func MustPath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Root returns the workspace root, the zero Path.
func Root() Path { return Path{} }

// NamesRoot reports whether s is a relative spelling of the root: "", "."
// or one made of "." segments and slashes ("./", "./."), which ParsePath
// refuses as naming no file. An argument that may name the root (a
// listing's, a stat's) takes them all, as ParsePath takes "./reports"
// for reports.
func NamesRoot(s string) bool {
	if strings.HasPrefix(s, "/") {
		return false
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg != "" && seg != "." {
			return false
		}
	}
	return true
}

// EndsAsDirectory reports whether s, a path as given, ends as only a
// directory's name can: in "/" or in a "." segment ("output/dir/",
// "output/dir/."). ParsePath drops both, so a caller that makes, changes
// or deletes a file checks s itself: the file would otherwise take the
// directory's name.
func EndsAsDirectory(s string) bool {
	i := strings.LastIndexByte(s, '/')
	return i >= 0 && (s[i+1:] == "" || s[i+1:] == ".")
}

// CheckFileSpelling fails with wserr.InvalidPath if s, the path p was
// parsed from, ends as only a directory's name can (EndsAsDirectory)
// while kind says p is a file: ParsePath drops the ending, so a read of
// "output/a.md/" would answer the file output/a.md, which a change of it,
// and the system, refuse. A directory spelled so is p, and passes.
func CheckFileSpelling(op, s string, p Path, kind Kind) error {
	if kind != KindFile || !EndsAsDirectory(s) {
		return nil
	}
	return wserr.New(wserr.InvalidPath, op, s, "the path ends in /, naming a directory, but %s is a file: name it without the ending /", p)
}

// String returns the clean path, or "." for the root.
func (p Path) String() string {
	if p.s == "" {
		return "."
	}
	return p.s
}

// IsRoot reports whether p is the workspace root.
func (p Path) IsRoot() bool { return p.s == "" }

// Segments returns the segments of p, or nil for the root. The slice is a
// fresh copy the caller may modify.
func (p Path) Segments() []string {
	if p.s == "" {
		return nil
	}
	return strings.Split(p.s, "/")
}

// Base returns the last segment of p, or "." for the root, like path.Base.
func (p Path) Base() string {
	if p.s == "" {
		return "."
	}
	return p.s[strings.LastIndexByte(p.s, '/')+1:]
}

// Dir returns the parent of p: Root for a top-level path and for the root
// itself, like path.Dir(".") == ".".
func (p Path) Dir() Path {
	i := strings.LastIndexByte(p.s, '/')
	if i < 0 {
		return Path{}
	}
	return Path{s: p.s[:i]}
}

// Join returns the child of p named name. name must be exactly one segment
// and pass the same rules as ParsePath: unlike path.Join, "", ".", "..",
// and names containing '/' are errors, not normalised away, because a caller
// that passes them did not mean the path it would get. The error is a
// *wserr.Error with code wserr.InvalidPath and op "join path".
func (p Path) Join(name string) (Path, error) {
	const op = "join path"
	joined := name
	if p.s != "" {
		joined = p.s + "/" + name
	}
	switch {
	case name == "":
		return Path{}, invalidPath(op, joined, "name is empty")
	case name == ".":
		return Path{}, invalidPath(op, joined, "name is '.'; give the name of a child")
	case strings.IndexByte(name, '/') >= 0:
		return Path{}, invalidPath(op, joined, "name contains '/'; join one segment at a time")
	}
	// p is clean and name is one non-empty segment other than ".", so parsing
	// the joined string checks exactly name's rules, the drive prefix when p
	// is the root, and the total length.
	return parsePath(op, joined)
}

// Top returns the first segment of p ("output" for output/main.md), or ""
// for the root.
func (p Path) Top() string {
	if i := strings.IndexByte(p.s, '/'); i >= 0 {
		return p.s[:i]
	}
	return p.s
}

// HasPrefix reports whether q is p or a directory above p. It compares whole
// segments, so "out" is not a prefix of "output/x". The root is a prefix of
// every path.
func (p Path) HasPrefix(q Path) bool {
	if q.s == "" || p.s == q.s {
		return true
	}
	return strings.HasPrefix(p.s, q.s) && p.s[len(q.s)] == '/'
}

// MarshalText encodes p as its String form, so the root encodes as ".".
func (p Path) MarshalText() ([]byte, error) {
	return []byte(p.String()), nil
}

// UnmarshalText decodes a path written by MarshalText, validating it with
// ParsePath and returning its *wserr.Error. It accepts exactly "." as the
// root so that every Path round-trips; this adds no new way to reach the
// root, since a JSON object that omits a Path field already leaves it at the
// zero value, and a caller that must not act on the root has to check IsRoot
// either way.
func (p *Path) UnmarshalText(text []byte) error {
	s := string(text)
	if s == "." {
		*p = Path{}
		return nil
	}
	q, err := ParsePath(s)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// parseRules checks s against the path contract. platform adds the rules
// about names other platforms treat specially; stored trees are decoded
// without them, so a tree written before they existed still reads.
func parseRules(op, s string, platform bool) (Path, error) {
	// Whole-string rules come first: they are cheap, and the length check
	// bounds the work below.
	if s == "" {
		return Path{}, invalidPath(op, s, "path is empty")
	}
	if len(s) > MaxPathLen {
		return Path{}, invalidPath(op, s, "path is %d bytes, longer than the limit of %d", len(s), MaxPathLen)
	}
	if !utf8.ValidString(s) {
		return Path{}, invalidPath(op, s, "path is not valid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0:
			return Path{}, invalidPath(op, s, "path contains a NUL byte")
		case c < 0x20 || c == 0x7f:
			return Path{}, invalidPath(op, s, "path contains control character %U", rune(c))
		}
	}
	if r, name, ok := invisibleRune(s); platform && ok {
		return Path{}, invalidPath(op, s, "path contains %s %U, which makes a name read as another", name, r)
	}
	if platform && !norm.NFC.IsNormalString(s) {
		return Path{}, invalidPath(op, s, "path is not in Unicode normal form NFC, so it could collide with another spelling on checkout; use %q", norm.NFC.String(s))
	}
	if strings.HasPrefix(s, "//") {
		return Path{}, invalidPath(op, s, "path starts with '//' like a UNC network path; use a path relative to the workspace root")
	}
	if s[0] == '/' {
		return Path{}, invalidPath(op, s, "path is absolute; use a path relative to the workspace root")
	}

	segs := make([]string, 0, strings.Count(s, "/")+1)
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "" || seg == "." {
			continue // repeated, leading "./" or trailing slash: normalise away
		}
		// The drive check looks at the first segment that survives
		// normalisation, so "./C:/x" cannot turn into "C:/x". It runs before
		// the backslash check so that "C:\Users" gets the clearer message.
		if len(segs) == 0 && hasDrivePrefix(seg) {
			return Path{}, invalidPath(op, s, "path starts with Windows drive prefix %q; use a path relative to the workspace root", seg[:2])
		}
		if strings.IndexByte(seg, '\\') >= 0 {
			return Path{}, invalidPath(op, s, "path contains a backslash; use '/' to separate segments")
		}
		// ".." is rejected even where it would stay inside the root, as in
		// "a/../b": a path that mentions ".." is never what a tool meant, and
		// a rule with no exceptions is simpler to prove than one that
		// resolves ".." against the segments before it.
		if seg == ".." {
			return Path{}, invalidPath(op, s, "path contains a '..' segment; name the file from the workspace root instead")
		}
		if len(seg) > MaxSegmentLen {
			return Path{}, invalidPath(op, s, "segment %d is %d bytes, longer than the limit of %d", len(segs)+1, len(seg), MaxSegmentLen)
		}
		if reason := platformHazard(seg); platform && reason != "" {
			return Path{}, invalidPath(op, s, "segment %q %s", seg, reason)
		}
		segs = append(segs, seg)
	}
	if len(segs) == 0 {
		return Path{}, invalidPath(op, s, "path names the workspace root; name a file or directory inside it")
	}
	return Path{s: strings.Join(segs, "/")}, nil
}

// windowsDevices are the names Windows reserves in every directory,
// whatever the extension.
var windowsDevices = map[string]bool{"CON": true, "PRN": true, "AUX": true, "NUL": true,
	"CONIN$": true, "CONOUT$": true}

// platformHazard says why seg would not check out as itself on Windows or
// macOS, or returns "".
func platformHazard(seg string) string {
	if strings.IndexByte(seg, ':') >= 0 {
		return "contains ':', an alternate data stream on Windows and a separator on macOS"
	}
	if last := seg[len(seg)-1]; last == '.' || last == ' ' {
		return "ends with a dot or a space, which Windows drops"
	}
	stem := seg
	if i := strings.IndexByte(stem, '.'); i >= 0 {
		stem = stem[:i]
	}
	stem = strings.ToUpper(strings.TrimRight(stem, " "))
	if windowsDevices[stem] || isNumberedDevice(stem) {
		return "is a device name Windows reserves (" + stem + "), with any extension"
	}
	return ""
}

// isNumberedDevice reports whether stem is COM0-9 or LPT0-9, the digit
// also as a superscript 1, 2 or 3 as Windows reads them.
func isNumberedDevice(stem string) bool {
	if len(stem) < 4 || (stem[:3] != "COM" && stem[:3] != "LPT") {
		return false
	}
	switch d := stem[3:]; d {
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "\u00b9", "\u00b2", "\u00b3":
		return true
	}
	return false
}

// invisibleRune finds the first bidi control, zero-width or other invisible
// character in s.
func invisibleRune(s string) (rune, string, bool) {
	for _, r := range s {
		switch {
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
			return r, "bidi control", true
		case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF, r == 0x180E:
			return r, "zero-width character", true
		case r == 0x00AD, r == 0x034F, r >= 0x2061 && r <= 0x2064:
			// A soft hyphen, the grapheme joiner and the invisible
			// operators show nothing either.
			return r, "invisible character", true
		case r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
			// Hangul fillers show as blank space.
			return r, "invisible character", true
		}
	}
	return 0, "", false
}

// hasDrivePrefix reports whether seg starts like a Windows drive, "C:" or
// "c:foo". Only ASCII letters count, as on Windows.
func hasDrivePrefix(seg string) bool {
	if len(seg) < 2 || seg[1] != ':' {
		return false
	}
	c := seg[0] | 0x20 // ASCII lower case
	return 'a' <= c && c <= 'z'
}

// invalidPath returns a wserr.InvalidPath error whose Path is the input quoted,
// so NUL, control characters and invalid UTF-8 cannot corrupt logs or
// terminals, and cut short if it is long.
func invalidPath(op, input, format string, args ...any) *wserr.Error {
	return wserr.New(wserr.InvalidPath, op, quotePathInput(input), format, args...)
}

// quotePathInput quotes s with strconv.Quote, keeping at most maxQuotedInput
// bytes of it and marking a cut with "...". A cut inside a UTF-8 sequence
// moves back to its start, so the quote shows no byte the input did not
// hold.
func quotePathInput(s string) string {
	if len(s) <= maxQuotedInput {
		return strconv.Quote(s)
	}
	cut := maxQuotedInput
	for i := cut; i > maxQuotedInput-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			cut = i
			break
		}
	}
	return strconv.Quote(s[:cut]) + "..."
}
