package protocol

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// encoding/json is lenient where a request must not be: it matches field
// names case-insensitively, lets the last of two equal keys win, and turns
// escapes of lone UTF-16 surrogates into U+FFFD. The scanner reads a line
// once, byte by byte, into a tree of nodes, refusing repeated keys, lone
// surrogates and nesting deeper than maxDepth as it goes; decoding then
// walks the tree, never the bytes again.

// maxDepth bounds how deep a request's values nest: requests are shallow,
// and free-form values (chatRef, id) have no use for more.
const maxDepth = 64

// MaxValues bounds the values and member names one request line holds:
// the scanner keeps a few words for each, so the bound caps what a line
// costs beyond its own bytes. A line over it is refused
// (batch.invalid_request) without building the rest of its tree; the
// largest real requests (an apply of 100,000 files) hold a quarter of it.
const MaxValues = 1 << 21

// maxSyntaxDepth is the nesting encoding/json takes for JSON at all: a
// line nested deeper is not JSON to it, whatever the strict rules say.
const maxSyntaxDepth = 10000

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
	kindKey // an object member's name; its value is the next node
)

// node is one value (or member name) of a line. Nodes are stored in
// document order, so a container's children follow it and end where its
// subtree does.
type node struct {
	start, end int32 // the value's bytes in the line, quotes included
	next       int32 // the index just past this node's subtree
	kind       kind
	esc        bool // a string or key with escapes: decode before use
	opaque     bool // a container scanned without nodes for its children
}

// fieldError is a JSON value that does not fit its request. Field names
// it the way a host writes it: "chat.kind", "profile.visibleRoots[0]".
type fieldError struct {
	Field string
	Msg   string
}

func (e *fieldError) Error() string { return e.Msg }

// inField reports whether e is about field or a value inside it.
func (e *fieldError) inField(field string) bool {
	return e.Field == field || strings.HasPrefix(e.Field, field+".") || strings.HasPrefix(e.Field, field+"[")
}

// frame is an open container while scanning.
type frame struct {
	node   int32 // its node, -1 inside an opaque container
	obj    bool
	opaque bool     // no nodes for what it holds
	count  int32    // members or elements so far
	key    node     // an object's current member name
	seen   *nameSet // the names of a large object
}

// tree is a scanned line.
type tree struct {
	data  []byte
	nodes []node
}

// scanner reads one line into a tree. It is reused from line to line, so
// a session allocates its node array once.
type scanner struct {
	tree
	pos    int
	stack  []frame
	strict *fieldError // the first repeated key, lone surrogate or too deep nesting
	// opaque, if set, is asked about each member of the top-level object
	// whose value is a container, with the top-level "op" if one came
	// before (else nil): true means nothing will decode what the container
	// holds, only take its bytes (an id), so the scanner checks it without
	// keeping nodes for it.
	opaque func(op, key []byte) bool
	op     int32 // the first top-level "op" string so far, -1 for none
	values int   // values and member names so far
	capped bool  // values passed MaxValues: no more nodes
}

// errSyntax marks a line that is not JSON; encoding/json then names the
// problem, in the words hosts already see.
type errSyntax struct{}

func (errSyntax) Error() string { return "invalid JSON" }

// scan reads data, one JSON value with optional white space around it.
// It returns errSyntax if data is not JSON (the tree is then partial),
// else the first *fieldError of the strict rules (nil if none), with the
// tree complete either way. The work and the nodes grow with len(data)
// only.
func (s *scanner) scan(data []byte) error {
	s.data, s.pos, s.strict, s.op = data, 0, nil, -1
	s.values, s.capped = 0, false
	s.nodes = s.nodes[:0]
	s.stack = s.stack[:0]
	if len(data) > 1<<31-1 {
		return errSyntax{}
	}
	s.space()
	if !s.value() {
		return errSyntax{}
	}
	for len(s.stack) > 0 {
		s.space()
		f := &s.stack[len(s.stack)-1]
		c, ok := s.peek()
		if !ok {
			return errSyntax{}
		}
		closer := byte(']')
		if f.obj {
			closer = '}'
		}
		switch {
		case c == closer:
			s.pos++
			if f.node >= 0 {
				s.nodes[f.node].end = int32(s.pos)
				s.nodes[f.node].next = int32(len(s.nodes))
			}
			s.stack = s.stack[:len(s.stack)-1]
			continue
		case c == ',' && f.count > 0:
			s.pos++
			s.space()
		case f.count > 0:
			return errSyntax{}
		}
		if f.obj && !s.member(f) {
			return errSyntax{}
		}
		f = &s.stack[len(s.stack)-1]
		f.count++
		if !s.value() {
			return errSyntax{}
		}
	}
	s.space()
	if s.pos != len(data) {
		return errSyntax{}
	}
	if s.strict != nil {
		return s.strict
	}
	return nil
}

func (s *scanner) peek() (byte, bool) {
	if s.pos < len(s.data) {
		return s.data[s.pos], true
	}
	return 0, false
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// member reads an object member's name and the colon after it.
func (s *scanner) member(f *frame) bool {
	if c, ok := s.peek(); !ok || c != '"' {
		return false
	}
	start := s.pos
	esc, bad, ok := s.str()
	if !ok {
		return false
	}
	k := int32(len(s.nodes))
	key := node{start: int32(start), end: int32(s.pos), next: k + 1, kind: kindKey, esc: esc}
	f.key = key
	s.count()
	if !f.opaque {
		s.nodes = append(s.nodes, key)
	}
	if s.strict == nil {
		if bad != "" {
			field, where := s.path(false), "a field name"
			if field != "" {
				where = fmt.Sprintf("a field name in %q", field)
			}
			s.strict = surrogateError(field, where, bad)
		} else if s.repeated(f, k, key) {
			name := s.path(true)
			s.strict = &fieldError{name, fmt.Sprintf("field %q appears more than once", name)}
		}
	}
	s.space()
	if c, ok := s.peek(); !ok || c != ':' {
		return false
	}
	s.pos++
	s.space()
	return true
}

// smallObject is how many members an object holds before its names go
// into a set: below it, comparing with each earlier name is cheaper.
const smallObject = 8

// repeated reports whether the object of f already holds key, node k
// unless f is opaque.
func (s *scanner) repeated(f *frame, k int32, key node) bool {
	if f.opaque && f.seen == nil {
		f.seen = &nameSet{seed: maphash.MakeSeed()}
	}
	if f.seen != nil {
		return f.seen.add(&s.tree, key)
	}
	if f.count < smallObject {
		name := s.text(key)
		for i := f.node + 1; i < k; i = s.nodes[i+1].next {
			if bytes.Equal(s.key(i), name) {
				return true
			}
		}
		return false
	}
	f.seen = &nameSet{seed: maphash.MakeSeed()}
	for i := f.node + 1; i < k; i = s.nodes[i+1].next {
		f.seen.add(&s.tree, s.nodes[i])
	}
	return s.repeated(f, k, key)
}

// nameSet holds the member names of a large object, to find a repeated
// one: open addressing over the names' places in the line, about 20 bytes
// a name, a fraction of what a map of strings costs.
type nameSet struct {
	seed  maphash.Seed
	names []nameRef
	slots []int32 // 1 + an index into names; 0 is empty
}

// nameRef is a member name's place in the line.
type nameRef struct {
	start, end int32
	esc        bool
}

func (r nameRef) node() node { return node{start: r.start, end: r.end, esc: r.esc, kind: kindKey} }

// add adds key's name and reports whether the set held it already.
func (ns *nameSet) add(t *tree, key node) bool {
	if 2*(len(ns.names)+1) > len(ns.slots) {
		ns.grow(t)
	}
	name := t.text(key)
	if ns.find(t, name) {
		return true
	}
	ns.names = append(ns.names, nameRef{key.start, key.end, key.esc})
	ns.place(name, int32(len(ns.names)))
	return false
}

func (ns *nameSet) find(t *tree, name []byte) bool {
	mask := uint64(len(ns.slots) - 1)
	for i := maphash.Bytes(ns.seed, name) & mask; ns.slots[i] != 0; i = (i + 1) & mask {
		if bytes.Equal(t.text(ns.names[ns.slots[i]-1].node()), name) {
			return true
		}
	}
	return false
}

func (ns *nameSet) place(name []byte, ref int32) {
	mask := uint64(len(ns.slots) - 1)
	i := maphash.Bytes(ns.seed, name) & mask
	for ns.slots[i] != 0 {
		i = (i + 1) & mask
	}
	ns.slots[i] = ref
}

// grow doubles the slots and places every name again.
func (ns *nameSet) grow(t *tree) {
	ns.slots = make([]int32, max(4*smallObject, 2*len(ns.slots)))
	for i, r := range ns.names {
		ns.place(t.text(r.node()), int32(i+1))
	}
}

// count counts a value or member name toward MaxValues; past it the line
// is refused, and nothing more gets a node (nor a check of repeated
// names: the line is refused already), so the answer may lack the id
// if it comes after that point.
func (s *scanner) count() {
	if s.values++; s.values <= MaxValues || s.capped {
		return
	}
	s.capped = true
	if s.strict == nil {
		s.strict = &fieldError{"", fmt.Sprintf("the request holds more than %d values and field names; send it as several smaller requests", MaxValues)}
	}
	for i := range s.stack {
		s.stack[i].opaque = true
	}
}

// value reads one value at s.pos, opening a frame for a container.
func (s *scanner) value() bool {
	c, ok := s.peek()
	if !ok {
		return false
	}
	s.count()
	i := int32(len(s.nodes))
	n := node{start: int32(s.pos), next: i + 1}
	inOpaque := len(s.stack) > 0 && s.stack[len(s.stack)-1].opaque
	switch {
	case c == '{' || c == '[':
		if len(s.stack) == maxSyntaxDepth {
			return false
		}
		if s.strict == nil && len(s.stack) == maxDepth {
			field := s.path(true)
			s.strict = &fieldError{field, fmt.Sprintf("field %q nests deeper than %d levels", field, maxDepth)}
		}
		s.pos++
		n.kind = kindArray
		if c == '{' {
			n.kind = kindObject
		}
		f := frame{node: i, obj: c == '{', opaque: inOpaque || s.capped}
		if inOpaque {
			f.node = -1
		} else {
			if len(s.stack) == 1 && s.stack[0].obj && s.opaque != nil {
				var op []byte
				if s.op >= 0 {
					op = s.text(s.nodes[s.op])
				}
				n.opaque = s.opaque(op, s.text(s.stack[0].key))
			}
			f.opaque = f.opaque || n.opaque
			s.nodes = append(s.nodes, n)
		}
		s.stack = append(s.stack, f)
		return true
	case c == '"':
		esc, bad, ok := s.str()
		if !ok {
			return false
		}
		if bad != "" && s.strict == nil {
			field := s.path(true)
			s.strict = surrogateError(field, fmt.Sprintf("field %q", field), bad)
		}
		n.kind, n.esc = kindString, esc
	case c == 't':
		n.kind = kindBool
		ok = s.literal("true")
	case c == 'f':
		n.kind = kindBool
		ok = s.literal("false")
	case c == 'n':
		n.kind = kindNull
		ok = s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		n.kind = kindNumber
		ok = s.number()
	default:
		return false
	}
	n.end = int32(s.pos)
	if inOpaque {
		return ok
	}
	if n.kind == kindString && s.op < 0 && len(s.stack) == 1 && s.stack[0].obj && string(s.text(s.stack[0].key)) == "op" {
		s.op = i
	}
	s.nodes = append(s.nodes, n)
	return ok
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return false
	}
	s.pos += len(lit)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	d := s.data
	if d[s.pos] == '-' {
		s.pos++
	}
	digits := func() int {
		n := 0
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.pos < len(d) && d[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return false
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return false
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// str reads a string at s.pos (its opening quote). It reports whether the
// string holds escapes, and the first \u escape in it that is a lone
// surrogate, as written.
func (s *scanner) str() (esc bool, bad string, ok bool) {
	d := s.data
	i := s.pos + 1
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return esc, bad, true
		case c < 0x20:
			return false, "", false
		case c != '\\':
			i++
			continue
		}
		esc = true
		if i+1 >= len(d) {
			return false, "", false
		}
		switch d[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
			continue
		case 'u':
		default:
			return false, "", false
		}
		r, ok := hex4(d, i+2)
		if !ok {
			return false, "", false
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(d, i+8); ok && d[i+6] == '\\' && d[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 12
				continue
			}
			if bad == "" {
				bad = string(d[i : i+6])
			}
		case r >= 0xDC00 && r <= 0xDFFF:
			if bad == "" {
				bad = string(d[i : i+6])
			}
		}
		i += 6
	}
	return false, "", false
}

// hex4 reads the four hex digits of a \u escape at d[i:].
func hex4(d []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// surrogateError refuses bad, a \u escape in the string where names that
// decodes to no character: a high surrogate not followed by a low one, or
// a low surrogate alone. encoding/json would silently turn it into U+FFFD.
func surrogateError(field, where, bad string) *fieldError {
	return &fieldError{field, fmt.Sprintf("%s holds %s, a lone UTF-16 surrogate: a JSON string must escape a character outside the BMP as a surrogate pair", where, bad)}
}

// path spells where the scanner is as a host writes it ("chat.kind",
// "roots[0]"): the open containers, and with member, the member or
// element being read in the innermost one. It is spelled out only for an
// error, so scanning costs O(1) per value however deep it goes.
func (s *scanner) path(member bool) string {
	var b strings.Builder
	for i := range s.stack {
		f := s.stack[i]
		if i == len(s.stack)-1 && !member {
			break
		}
		if !f.obj {
			fmt.Fprintf(&b, "[%d]", f.count-1)
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.Write(s.text(f.key))
	}
	return b.String()
}

// key returns the name held by key node i, decoded.
func (t *tree) key(i int32) []byte {
	return t.text(t.nodes[i])
}

// text returns a string node's content, decoded. An unescaped string is
// a slice of the line, not a copy.
func (t *tree) text(n node) []byte {
	raw := t.data[n.start+1 : n.end-1]
	if !n.esc {
		return raw
	}
	return unquote(raw)
}

// unquote decodes the escapes of raw, the inside of a valid JSON string.
// A lone surrogate (which the scanner refuses) becomes U+FFFD, as
// encoding/json makes it.
func unquote(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				return append(out, raw[i:]...)
			}
			out = append(out, raw[i:i+j]...)
			i += j
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(raw, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				if lo, ok := hex4(raw, i+2); ok && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return out
}

// number returns a number node's text.
func (t *tree) number(n node) string {
	return string(t.data[n.start:n.end])
}

// raw returns node i's bytes in the line.
func (t *tree) raw(i int32) []byte {
	return t.data[t.nodes[i].start:t.nodes[i].end]
}

// members calls fn with each member of object node i: the index of its
// name and of its value.
func (t *tree) members(i int32, fn func(k, v int32) bool) {
	for k := i + 1; k < t.nodes[i].next; k = t.nodes[k+1].next {
		if !fn(k, k+1) {
			return
		}
	}
}

// member returns the value of object i's last member called name, or -1.
// A key given twice is refused before any member is trusted; the last
// one is what encoding/json reads, so that is what a refusal names.
func (t *tree) member(i int32, name string) int32 {
	found := int32(-1)
	t.members(i, func(k, v int32) bool {
		if string(t.key(k)) == name {
			found = v
		}
		return true
	})
	return found
}
