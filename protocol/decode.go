package protocol

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/wsstore/wsstore/wserr"
)

// A decoder fills a Go value from a scanned tree and checks, as it goes,
// that every value fits: objects where the type is a struct hold only the
// struct's JSON field names, exactly as spelled; every value has the JSON
// type its field needs; null stands for an absent field and is refused
// where nothing can be absent. It fills values as encoding/json would
// (json.Unmarshaler and encoding.TextUnmarshaler included), so a request
// type reads the same as it would through json.Unmarshal.
//
// Errors, first by kind, then in document order: a value that does not
// fit (a *fieldError, which ends the walk); then the first error of an
// UnmarshalJSON or UnmarshalText; then any other.
type decoder struct {
	*tree
	path      []step // where the walk is, for error messages
	unmarshal error  // the first error of an Unmarshaler
	other     error  // the first other error (base64, a number no float64 holds)
}

// step is one level of a decoder's path: an object member (key, a node)
// or an array element (index).
type step struct {
	key   int32 // -1 for an element
	index int
}

// decode fills v, a pointer, from node i of t.
func decode(t *tree, i int32, v any, prefix ...step) error {
	d := &decoder{tree: t, path: prefix}
	rv := reflect.ValueOf(v).Elem()
	if err := d.value(i, rv.Type(), rv, true); err != nil {
		return err
	}
	if d.unmarshal != nil {
		return d.unmarshal
	}
	return d.other
}

// pathString spells the decoder's path as a host writes it.
func (d *decoder) pathString() string {
	var b strings.Builder
	for _, s := range d.path {
		switch {
		case s.key < 0:
			fmt.Fprintf(&b, "[%d]", s.index)
		case b.Len() > 0:
			b.WriteString(".")
			b.Write(d.key(s.key))
		default:
			b.Write(d.key(s.key))
		}
	}
	return b.String()
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

// rawJSON is a field's JSON that its handler decodes from the tree itself
// (request.decodeField): unlike a json.RawMessage, whose nodes the scanner
// may skip, the tree keeps what it holds.
type rawJSON json.RawMessage

// UnmarshalJSON keeps a copy of b.
func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// takesRaw reports whether a field of type t only takes its value's bytes
// (through its own UnmarshalJSON), so nothing decodes what the value holds.
func takesRaw(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() != reflect.Interface && t != reflect.TypeFor[rawJSON]() && reflect.PointerTo(t).Implements(unmarshalerType)
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
)

// shapeOf returns the JSON shape t takes, and t without pointers. A nil
// t, an interface, and a type with its own UnmarshalJSON (json.RawMessage
// among them) take any value.
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

// nullable reports whether a map value or array element of Go type t can
// hold null: a pointer, an interface or raw JSON can, a string cannot
// (encoding/json would store "" where the host sent nothing).
func nullable(t reflect.Type) bool {
	return t == nil || t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface || t == rawMessageType || t == reflect.TypeFor[rawJSON]()
}

// value checks node i against t and stores it in v (of type t).
func (d *decoder) value(i int32, t reflect.Type, v reflect.Value, nullOK bool) error {
	n := d.nodes[i]
	want, bt := shapeOf(t)
	switch n.kind {
	case kindNull:
		if !nullOK && want != anyShape {
			return d.mismatch(want, "null")
		}
	case kindObject:
		if want != anyShape && want != objectShape {
			return d.mismatch(want, "an object")
		}
	case kindArray:
		if want != anyShape && want != arrayShape {
			return d.mismatch(want, "an array")
		}
	case kindString:
		if want != anyShape && want != stringShape {
			return d.mismatch(want, "a string")
		}
	case kindBool:
		if want != anyShape && want != boolShape {
			return d.mismatch(want, strconv.FormatBool(d.data[n.start] == 't'))
		}
	case kindNumber:
		if err := d.checkNumber(d.number(n), bt, want); err != nil {
			return err
		}
	}
	return d.store(i, v)
}

// store puts node i, which fits v's type, into v, as encoding/json does.
func (d *decoder) store(i int32, v reflect.Value) error {
	n := d.nodes[i]
	u, ut, pv := indirect(v, n.kind == kindNull)
	if u != nil {
		if err := u.UnmarshalJSON(d.raw(i)); err != nil && d.unmarshal == nil {
			d.unmarshal = d.named(err)
		}
		return nil
	}
	if n.opaque {
		panic(fmt.Sprintf("protocol: %q was scanned as raw JSON but decodes into %v", d.pathString(), v.Type()))
	}
	if ut != nil {
		if n.kind != kindString {
			d.save(&json.UnmarshalTypeError{Value: kindWord(n.kind), Type: pv.Type()})
			return nil
		}
		if err := ut.UnmarshalText(d.text(n)); err != nil && d.unmarshal == nil {
			d.unmarshal = d.named(err)
		}
		return nil
	}
	v = pv
	switch n.kind {
	case kindNull:
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
			v.SetZero()
		}
	case kindBool:
		b := d.data[n.start] == 't'
		if v.Kind() == reflect.Interface {
			v.Set(reflect.ValueOf(b))
		} else {
			v.SetBool(b)
		}
	case kindString:
		s := d.text(n)
		switch v.Kind() {
		case reflect.Interface:
			v.Set(reflect.ValueOf(string(s)))
		case reflect.Slice:
			b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
			m, err := base64.StdEncoding.Decode(b, s)
			if err != nil {
				d.save(err)
				return nil
			}
			v.SetBytes(b[:m])
		default:
			v.SetString(string(s))
		}
	case kindNumber:
		s := d.number(n)
		switch v.Kind() {
		case reflect.Interface:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				d.save(&json.UnmarshalTypeError{Value: "number " + s, Type: reflect.TypeFor[float64]()})
				return nil
			}
			v.Set(reflect.ValueOf(f))
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			x, _ := strconv.ParseInt(s, 10, 64)
			v.SetInt(x)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			x, _ := strconv.ParseUint(s, 10, 64)
			v.SetUint(x)
		default:
			x, _ := strconv.ParseFloat(s, v.Type().Bits())
			v.SetFloat(x)
		}
	case kindObject:
		return d.object(i, v)
	case kindArray:
		return d.array(i, v)
	}
	return nil
}

// object stores object node i in v: a struct, a map or an interface.
func (d *decoder) object(i int32, v reflect.Value) error {
	var err error
	switch v.Kind() {
	case reflect.Interface:
		m := map[string]any{}
		d.members(i, func(k, e int32) bool {
			var x any
			d.path = append(d.path, step{key: k})
			err = d.value(e, nil, reflect.ValueOf(&x).Elem(), true)
			d.path = d.path[:len(d.path)-1]
			m[string(d.key(k))] = x
			return err == nil
		})
		v.Set(reflect.ValueOf(m))
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		kt, et := v.Type().Key(), v.Type().Elem()
		nullOK := nullable(et)
		d.members(i, func(k, e int32) bool {
			elem := reflect.New(et).Elem()
			d.path = append(d.path, step{key: k})
			err = d.value(e, et, elem, nullOK)
			d.path = d.path[:len(d.path)-1]
			v.SetMapIndex(reflect.ValueOf(string(d.key(k))).Convert(kt), elem)
			return err == nil
		})
	case reflect.Struct:
		fields := fieldsOf(v.Type())
		d.members(i, func(k, e int32) bool {
			d.path = append(d.path, step{key: k})
			defer func() { d.path = d.path[:len(d.path)-1] }()
			f, ok := fields.byName[string(d.key(k))]
			if !ok {
				err = unknownField(d.pathString(), string(d.key(k)), fields)
				return false
			}
			err = d.value(e, f.typ, v.FieldByIndex(f.index), true)
			return err == nil
		})
	}
	return err
}

// array stores array node i in v: a slice, an array or an interface.
func (d *decoder) array(i int32, v reflect.Value) error {
	var elems []int32
	for e := i + 1; e < d.nodes[i].next; e = d.nodes[e].next {
		elems = append(elems, e)
	}
	var et reflect.Type
	switch v.Kind() {
	case reflect.Interface:
		s := make([]any, len(elems))
		v.Set(reflect.ValueOf(s))
		v = reflect.ValueOf(s)
	case reflect.Slice:
		et = v.Type().Elem()
		v.Set(reflect.MakeSlice(v.Type(), len(elems), len(elems)))
	case reflect.Array:
		et = v.Type().Elem()
		v.SetZero()
	}
	nullOK := nullable(et)
	for k, e := range elems {
		var ev reflect.Value
		if k < v.Len() {
			ev = v.Index(k)
		} else {
			ev = reflect.New(et).Elem() // beyond a Go array: checked, dropped
		}
		d.path = append(d.path, step{key: -1, index: k})
		err := d.value(e, et, ev, nullOK)
		d.path = d.path[:len(d.path)-1]
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) save(err error) {
	if d.other == nil {
		d.other = err
	}
}

func kindWord(k kind) string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "bool"
	case kindObject:
		return "object"
	case kindArray:
		return "array"
	}
	return "number"
}

// named makes an Unmarshaler's error name the field it was about, unless
// it is a coded error, which says what it is about itself.
func (d *decoder) named(err error) error {
	var we *wserr.Error
	if errors.As(err, &we) {
		return err
	}
	field := d.pathString()
	return &fieldError{field, fmt.Sprintf("field %q: %s", field, strings.TrimPrefix(err.Error(), "json: "))}
}

func (d *decoder) mismatch(want shape, got string) error {
	field := d.pathString()
	return &fieldError{field, fmt.Sprintf("field %q must be %s, not %s", field, shapeNames[want], got)}
}

// checkNumber checks number text n against an integer or number field of
// type t.
func (d *decoder) checkNumber(n string, t reflect.Type, want shape) error {
	if want == anyShape {
		return nil
	}
	var err error
	switch {
	case want == numberShape:
		_, err = strconv.ParseFloat(n, t.Bits())
	case want != integerShape:
		return d.mismatch(want, "a number")
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		if _, err = strconv.ParseUint(n, 10, t.Bits()); err != nil && strings.HasPrefix(n, "-") {
			field := d.pathString()
			return &fieldError{field, fmt.Sprintf("field %q must not be negative", field)}
		}
	default:
		_, err = strconv.ParseInt(n, 10, t.Bits())
	}
	unsigned := t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64
	if want == integerShape && (errors.Is(err, strconv.ErrRange) || err != nil && NumberPastInt(n, t.Bits(), unsigned)) {
		field := d.pathString()
		return &fieldError{field, fmt.Sprintf("field %q: %s is out of range: it takes an integer in %s", field, n, intRange(t))}
	}
	if errors.Is(err, strconv.ErrRange) {
		field := d.pathString()
		return &fieldError{field, fmt.Sprintf("field %q: %s is out of range", field, n)}
	}
	if err != nil {
		return d.mismatch(want, n)
	}
	return nil
}

// NumberPastInt reports whether JSON number text n (1e20, -2.5E19,
// 1e400) is past what an integer of bits bits holds (unsigned: from 0),
// rather than no integer (1.5).
func NumberPastInt(n string, bits int, unsigned bool) bool {
	f, _ := strconv.ParseFloat(n, 64) // past float64 too: ±Inf
	if unsigned {
		return f >= math.Ldexp(1, bits)
	}
	limit := math.Ldexp(1, bits-1)
	return f >= limit || f < -limit
}

// intRange names the values the integer type t holds, as lo..hi.
func intRange(t reflect.Type) string {
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return fmt.Sprintf("0..%d", uint64(math.MaxUint64)>>(64-t.Bits()))
	}
	hi := int64(math.MaxInt64) >> (64 - t.Bits())
	return fmt.Sprintf("%d..%d", -hi-1, hi)
}

// structFields are a struct type's JSON fields.
type structFields struct {
	byName map[string]field
	names  []string // in declaration order
}

type field struct {
	index []int
	typ   reflect.Type
}

var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf returns the JSON names of t's fields, promoting the fields of
// embedded structs as encoding/json does.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	fs := &structFields{byName: map[string]field{}}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			at := append(append([]int(nil), index...), i)
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, at)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, ok := fs.byName[name]; !ok {
				fs.names = append(fs.names, name)
			}
			fs.byName[name] = field{index: at, typ: f.Type}
		}
	}
	walk(t, nil)
	f, _ := fieldCache.LoadOrStore(t, fs)
	return f.(*structFields)
}

func unknownField(name, key string, fields *structFields) error {
	for _, f := range fields.names {
		if strings.EqualFold(f, key) {
			return &fieldError{name, fmt.Sprintf("unknown field %q: field names are case-sensitive, this one is %q", name, f)}
		}
	}
	return &fieldError{name, fmt.Sprintf("unknown field %q", name)}
}

// indirect is encoding/json's: it walks down v, allocating pointers as
// needed, until it reaches a non-pointer or a type with its own
// UnmarshalJSON or UnmarshalText. For null it stops at the first settable
// pointer, which null then sets to nil.
func indirect(v reflect.Value, decodingNull bool) (json.Unmarshaler, encoding.TextUnmarshaler, reflect.Value) {
	v0 := v
	haveAddr := false
	if v.Kind() != reflect.Pointer && v.Type().Name() != "" && v.CanAddr() {
		haveAddr = true
		v = v.Addr()
	}
	for {
		if v.Kind() == reflect.Interface && !v.IsNil() {
			e := v.Elem()
			if e.Kind() == reflect.Pointer && !e.IsNil() && (!decodingNull || e.Elem().Kind() == reflect.Pointer) {
				haveAddr = false
				v = e
				continue
			}
		}
		if v.Kind() != reflect.Pointer {
			break
		}
		if decodingNull && v.CanSet() {
			break
		}
		if v.Elem().Kind() == reflect.Interface && v.Elem().Elem().Equal(v) {
			v = v.Elem()
			break
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if v.Type().NumMethod() > 0 && v.CanInterface() {
			if u, ok := v.Interface().(json.Unmarshaler); ok {
				return u, nil, reflect.Value{}
			}
			if !decodingNull {
				if u, ok := v.Interface().(encoding.TextUnmarshaler); ok {
					return nil, u, reflect.Value{}
				}
			}
		}
		if haveAddr {
			v = v0
			haveAddr = false
		} else {
			v = v.Elem()
		}
	}
	return nil, nil, v
}
