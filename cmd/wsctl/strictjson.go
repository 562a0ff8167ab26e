package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// encoding/json is lenient where a batch request must not be: it matches
// field names case-insensitively, lets the last of two equal keys win, and
// turns escapes of lone UTF-16 surrogates into U+FFFD. checkJSON walks a
// request's tokens beside the Go type it decodes into and refuses all
// three, so what a host sends is what the store acts on.

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

// checkJSON checks that data, one valid JSON value, fits t: objects where t
// is a struct hold only the struct's JSON field names, exactly as spelled;
// no object holds a key twice; no string escapes a lone surrogate; and
// every value has the JSON type t's field needs (null stands for an absent
// field, and is refused where nothing can be absent: see value). A nil t, an interface, json.RawMessage and
// types with their own UnmarshalJSON take any value, still without
// duplicate keys or lone surrogates. Values nest at most maxJSONDepth
// deep. Errors are *fieldError; prefix names data itself ("manifest"), ""
// for a whole request. The cost grows with the length of data only.
func checkJSON(data []byte, t reflect.Type, prefix string) error {
	w := &jsonWalker{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	w.dec.UseNumber()
	var root *jsonPath
	if prefix != "" {
		root = &jsonPath{key: prefix}
	}
	return w.value(t, root, 0, true)
}

// maxJSONDepth bounds how deep a request's values nest: requests are
// shallow, and free-form values (chatRef, id) have no use for more.
const maxJSONDepth = 64

// jsonPath names a value inside a request, one link per level; the name
// is spelled out only for an error, so a walk costs O(1) per value
// however deep it goes.
type jsonPath struct {
	parent *jsonPath
	key    string
	index  int // for an array element, whose key is ""
	elem   bool
}

func (p *jsonPath) field(key string) *jsonPath { return &jsonPath{parent: p, key: key} }
func (p *jsonPath) item(i int) *jsonPath       { return &jsonPath{parent: p, index: i, elem: true} }

// String spells the path as a host writes it: "chat.kind", "roots[0]".
func (p *jsonPath) String() string {
	var parts []*jsonPath
	for q := p; q != nil; q = q.parent {
		parts = append(parts, q)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		q := parts[i]
		switch {
		case q.elem:
			fmt.Fprintf(&b, "[%d]", q.index)
		case b.Len() > 0:
			b.WriteString(".")
			b.WriteString(q.key)
		default:
			b.WriteString(q.key)
		}
	}
	return b.String()
}

type jsonWalker struct {
	dec  *json.Decoder
	data []byte
	last int64 // input offset after the previous token
}

// token returns the next token and the input it came from.
func (w *jsonWalker) token() (json.Token, []byte, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, nil, err
	}
	off := w.dec.InputOffset()
	raw := w.data[w.last:off]
	w.last = off
	return tok, raw, nil
}

// shape is the kind of JSON value a Go type takes.
type shape int

const (
	anyShape shape = iota
	objectShape
	arrayShape
	stringShape
	integerShape
	numberShape
	boolShape
)

var shapeNames = map[shape]string{
	objectShape:  "an object",
	arrayShape:   "an array",
	stringShape:  "a string",
	integerShape: "an integer",
	numberShape:  "a number",
	boolShape:    "true or false",
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf returns the JSON shape t takes, and t without pointers.
func shapeOf(t reflect.Type) (shape, reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil, t.Kind() == reflect.Interface, reflect.PointerTo(t).Implements(unmarshalerType):
		return anyShape, nil
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return stringShape, t
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return objectShape, t
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return stringShape, t // base64
		}
		return arrayShape, t
	case reflect.Array:
		return arrayShape, t
	case reflect.String:
		return stringShape, t
	case reflect.Bool:
		return boolShape, t
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return integerShape, t
	case reflect.Float32, reflect.Float64:
		return numberShape, t
	}
	return anyShape, nil
}

// value checks the next value, at path p and nesting depth, against t.
// null stands for an absent field; where nothing can be absent (an element
// of an array or a map that holds no nulls), nullOK is false and null is
// refused.
func (w *jsonWalker) value(t reflect.Type, p *jsonPath, depth int, nullOK bool) error {
	tok, raw, err := w.token()
	if err != nil {
		return err
	}
	want, t := shapeOf(t)
	switch tok := tok.(type) {
	case nil:
		if !nullOK && want != anyShape {
			return mismatch(p.String(), want, "null")
		}
		return nil
	case json.Delim:
		if depth == maxJSONDepth {
			field := p.String()
			return &fieldError{field, fmt.Sprintf("field %q nests deeper than %d levels", field, maxJSONDepth)}
		}
		switch {
		case tok == '{' && (want == anyShape || want == objectShape):
			return w.object(t, p, depth+1)
		case tok == '[' && (want == anyShape || want == arrayShape):
			var elem reflect.Type
			if t != nil {
				elem = t.Elem()
			}
			for i := 0; w.dec.More(); i++ {
				if err := w.value(elem, p.item(i), depth+1, nullable(elem)); err != nil {
					return err
				}
			}
			_, _, err := w.token()
			return err
		}
		got := "an object"
		if tok == '[' {
			got = "an array"
		}
		return mismatch(p.String(), want, got)
	case string:
		if bad, ok := loneSurrogate(raw); ok {
			field := p.String()
			return surrogateError(field, fmt.Sprintf("field %q", field), bad)
		}
		if want != anyShape && want != stringShape {
			return mismatch(p.String(), want, "a string")
		}
	case bool:
		if want != anyShape && want != boolShape {
			return mismatch(p.String(), want, strconv.FormatBool(tok))
		}
	case json.Number:
		return checkNumber(tok, t, want, p)
	}
	return nil
}

// object checks an object's keys and values; its '{' is read.
func (w *jsonWalker) object(t reflect.Type, p *jsonPath, depth int) error {
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t, nil)
	}
	seen := map[string]bool{}
	for w.dec.More() {
		tok, raw, err := w.token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if bad, ok := loneSurrogate(raw); ok {
			field, where := p.String(), "a field name"
			if field != "" {
				where = fmt.Sprintf("a field name in %q", field)
			}
			return surrogateError(field, where, bad)
		}
		at := p.field(key)
		if seen[key] {
			name := at.String()
			return &fieldError{name, fmt.Sprintf("field %q appears more than once", name)}
		}
		seen[key] = true
		var vt reflect.Type
		nullOK := true
		switch {
		case fields != nil:
			ft, ok := fields[key]
			if !ok {
				return unknownField(at.String(), key, fields)
			}
			vt = ft
		case t != nil:
			vt = t.Elem() // a map
			nullOK = nullable(vt)
		}
		if err := w.value(vt, at, depth, nullOK); err != nil {
			return err
		}
	}
	_, _, err := w.token()
	return err
}

// nullable reports whether a map value or array element of Go type t can
// hold null: a pointer, an interface or raw JSON can, a string cannot
// (encoding/json would store "" where the host sent nothing).
func nullable(t reflect.Type) bool {
	return t == nil || t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]()
}

// jsonFields returns the JSON names of t's fields with their types,
// promoting the fields of embedded structs as encoding/json does.
func jsonFields(t reflect.Type, into map[string]reflect.Type) map[string]reflect.Type {
	if into == nil {
		into = map[string]reflect.Type{}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			jsonFields(f.Type, into)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
	return into
}

func unknownField(name, key string, fields map[string]reflect.Type) error {
	for f := range fields {
		if strings.EqualFold(f, key) {
			return &fieldError{name, fmt.Sprintf("unknown field %q: field names are case-sensitive, this one is %q", name, f)}
		}
	}
	return &fieldError{name, fmt.Sprintf("unknown field %q", name)}
}

func mismatch(field string, want shape, got string) error {
	return &fieldError{field, fmt.Sprintf("field %q must be %s, not %s", field, shapeNames[want], got)}
}

// checkNumber checks a number, at p, against an integer or number field.
func checkNumber(n json.Number, t reflect.Type, want shape, p *jsonPath) error {
	if want == anyShape {
		return nil
	}
	field := p.String()
	var err error
	switch {
	case want == numberShape:
		_, err = strconv.ParseFloat(n.String(), t.Bits())
	case want != integerShape:
		return mismatch(field, want, "a number")
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		if _, err = strconv.ParseUint(n.String(), 10, t.Bits()); err != nil && strings.HasPrefix(n.String(), "-") {
			return &fieldError{field, fmt.Sprintf("field %q must not be negative", field)}
		}
	default:
		_, err = strconv.ParseInt(n.String(), 10, t.Bits())
	}
	if errors.Is(err, strconv.ErrRange) {
		return &fieldError{field, fmt.Sprintf("field %q: %s is out of range", field, n)}
	}
	if err != nil {
		return mismatch(field, want, n.String())
	}
	return nil
}

// surrogateError refuses bad, a \u escape in the string where names that
// decodes to no character: a high surrogate not followed by a low one, or
// a low surrogate alone. encoding/json would silently turn it into U+FFFD.
func surrogateError(field, where, bad string) error {
	return &fieldError{field, fmt.Sprintf("%s holds %s, a lone UTF-16 surrogate: a JSON string must escape a character outside the BMP as a surrogate pair", where, bad)}
}

// loneSurrogate returns the first \u escape in raw, JSON text, that is a
// lone surrogate. Backslashes occur in JSON only in strings, so raw may be
// any JSON value.
func loneSurrogate(raw []byte) (string, bool) {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // \\, \" and the like: the next byte is escaped
			continue
		}
		r, ok := hex4(raw, i+2)
		switch {
		case !ok:
			return "", false // not valid JSON: the parser reports it
		case r >= 0xDC00 && r <= 0xDFFF:
			return string(raw[i : i+6]), true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11
					continue
				}
			}
			return string(raw[i : i+6]), true
		}
		i += 5
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return rune(n), err == nil
}
