package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// check scans data and, if the strict rules hold, decodes it against t
// (nil: any value), returning the first error, as a request's checks do.
func check(data []byte, t reflect.Type) error {
	var s scanner
	if err := s.scan(data); err != nil {
		return err
	}
	if t == nil {
		var v any
		return decode(&s.tree, 0, &v)
	}
	return decode(&s.tree, 0, reflect.New(t).Interface())
}

// FuzzScan: the scanner never panics; it takes exactly what encoding/json
// takes as JSON; whatever passes the strict rules decodes (into any) to
// what encoding/json decodes, without encoding/json replacing anything by
// U+FFFD: a U+FFFD in the decoded value was in the input, raw or as \ufffd.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, `["\udc00"]`, `"\ud800\u0041"`,
		`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"\ud800":1}`, `"\\\ud800"`, `"\ufffd"`, `1.5`, `null`,
		`{"a":[1,2,{"b":null}],"c":true,"d":-0.5e+3}`, `[01]`, `[1.]`, `{"a" 1}`, `{"a":1,}`, ` [ ] `, `"\/\b\f\n\r\t"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return
		}
		var s scanner
		err := s.scan(data)
		_, syntax := err.(errSyntax)
		require.Equal(t, json.Valid(data), !syntax, "the scanner and encoding/json disagree on %q", data)
		if err != nil {
			return
		}
		var got any
		if decode(&s.tree, 0, &got) != nil {
			return // a number no float64 holds
		}
		var want any
		require.NoError(t, json.Unmarshal(data, &want))
		require.Equal(t, want, got, "%q", data)
		out, err := json.Marshal(got)
		require.NoError(t, err)
		had := bytes.Contains(data, []byte("\uFFFD")) || strings.Contains(strings.ToLower(string(data)), `\ufffd`)
		if !had && bytes.Contains(out, []byte("\uFFFD")) {
			t.Fatalf("the scanner accepted %q, which decodes with a replacement character", data)
		}
	})
}

// nested returns an object nested depth levels deep, each level under a
// key of keyLen bytes.
func nested(depth, keyLen int) []byte {
	key := strings.Repeat("k", keyLen)
	return []byte(strings.Repeat(`{"`+key+`":`, depth) + "1" + strings.Repeat("}", depth))
}

// TestScanDepth: a value may nest maxDepth levels; one level more is
// refused, naming where, rather than walked at any cost.
func TestScanDepth(t *testing.T) {
	require.NoError(t, check(nested(maxDepth, 1), nil))
	err := check(nested(maxDepth+1, 1), nil)
	var fe *fieldError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Msg, "nests deeper than 64 levels")
	assert.Equal(t, strings.Repeat("k.", maxDepth-1)+"k", fe.Field)
	err = check([]byte(strings.Repeat("[", 1000)+strings.Repeat("]", 1000)), nil)
	require.ErrorAs(t, err, &fe)
	err = check([]byte(strings.Repeat("[", 1000)+strings.Repeat("]", 999)), nil)
	assert.IsType(t, errSyntax{}, err, "a line that is not JSON is that first, however deep")
	err = check([]byte(strings.Repeat("[", maxSyntaxDepth)+strings.Repeat("]", maxSyntaxDepth)), nil)
	require.ErrorAs(t, err, &fe, "as deep as encoding/json reads")
	err = check([]byte(strings.Repeat("[", maxSyntaxDepth+1)+strings.Repeat("]", maxSyntaxDepth+1)), nil)
	assert.IsType(t, errSyntax{}, err, "deeper than encoding/json reads")
	assert.False(t, json.Valid([]byte(strings.Repeat("[", maxSyntaxDepth+1)+strings.Repeat("]", maxSyntaxDepth+1))))
}

// TestScanCostGrowsWithTheInput: the bytes a line's checks allocate grow
// with the length of the line, not with its depth times its length (a
// path spelled out at every level would cost depth² × key length).
func TestScanCostGrowsWithTheInput(t *testing.T) {
	alloc := func(line []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		require.NoError(t, check(line, nil))
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, depth := range []int{8, 64} {
		line := nested(depth, 10<<10)
		got := alloc(line)
		t.Logf("depth %d, %d-byte line: %d bytes allocated", depth, len(line), got)
		assert.Less(t, got, uint64(8*len(line)), "depth %d", depth)
	}
	wide := []byte("[" + strings.Repeat("0,", 1<<20) + "0]")
	var s scanner
	require.NoError(t, s.scan(wide))
	assert.LessOrEqual(t, uintptr(cap(s.nodes))*reflect.TypeFor[node]().Size(), uintptr(16*len(wide)), "nodes of a wide line")
}

// TestScanRefusesRepeatedKeys: a key given twice is refused in small and
// large objects alike, and so are two spellings of one name.
func TestScanRefusesRepeatedKeys(t *testing.T) {
	var members []string
	for i := range 100 {
		members = append(members, `"k`+strings.Repeat("x", i)+`":1`)
	}
	for _, n := range []int{2, smallObject, smallObject + 1, 100} {
		line := "{" + strings.Join(members[:n], ",") + `,"k":2}`
		var fe *fieldError
		require.ErrorAs(t, check([]byte(line), nil), &fe, "%d members", n)
		assert.Equal(t, "k", fe.Field)
		assert.NoError(t, check([]byte("{"+strings.Join(members[:n], ",")+"}"), nil), "%d members", n)
	}
	var fe *fieldError
	require.ErrorAs(t, check([]byte(`{"a":{"k":1,"\u006b":2}}`), nil), &fe)
	assert.Equal(t, `field "a.k" appears more than once`, fe.Msg)
}

// TestDecodeNull: null stands for an absent field, so a field may be
// null; an entry of a map of strings or an element of a list of strings
// cannot be absent, and null there is refused rather than read as "".
func TestDecodeNull(t *testing.T) {
	type req struct {
		Name   string            `json:"name"`
		Inputs map[string]string `json:"inputs"`
		Roots  []string          `json:"roots"`
		Ref    json.RawMessage   `json:"ref"`
		Extra  map[string]any    `json:"extra"`
	}
	typ := reflect.TypeFor[req]()
	for _, ok := range []string{
		`{"name":null}`, `{"inputs":null}`, `{"roots":null}`, `{"ref":null}`, `{"ref":{"a":null}}`, `{"extra":{"a":null}}`,
	} {
		assert.NoError(t, check([]byte(ok), typ), ok)
	}
	for bad, field := range map[string]string{`{"inputs":{"a.md":null}}`: "inputs.a.md", `{"roots":["output",null]}`: "roots[1]"} {
		var fe *fieldError
		require.ErrorAs(t, check([]byte(bad), typ), &fe, bad)
		assert.Equal(t, field, fe.Field)
		assert.Contains(t, fe.Msg, "must be a string, not null")
	}
}

// TestDecodeMatchesEncodingJSON: what passes the checks reads into a
// request type exactly as encoding/json reads it: pointers, null, empty
// lists, raw JSON, UnmarshalJSON and escapes included.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	type inner struct {
		A  *int   `json:"a"`
		Bs []bool `json:"bs"`
	}
	type req struct {
		base
		S   *string           `json:"s"`
		N   int64             `json:"n"`
		U   uint8             `json:"u"`
		F   float64           `json:"f"`
		M   map[string]string `json:"m"`
		L   []string          `json:"l"`
		In  *inner            `json:"in"`
		Raw json.RawMessage   `json:"raw"`
		At  *ckptRef          `json:"at"`
		Any any               `json:"any"`
		B   []byte            `json:"b"`
	}
	for _, line := range []string{
		`{"op":"x","s":"a\u00e9\n\ud83d\ude00\"\\","n":-7,"u":255,"f":1.5e3,"m":{"k":"v","":"e"},"l":[],"in":{"a":3,"bs":[true,false]}}`,
		`{"raw":{ "a" : [1, 2] },"at":"cp_000004","any":{"x":[1,"y",null,true]},"b":"AAEC","id":[1,{"z":null}]}`,
		`{"s":null,"m":null,"l":null,"in":null,"raw":null,"at":null,"any":null,"b":null}`,
		`{"at":7,"in":{},"l":["a","b"],"runId":"r"}`,
		`{}`,
	} {
		var want, got req
		require.NoError(t, json.Unmarshal([]byte(line), &want), line)
		require.NoError(t, check([]byte(line), nil), line)
		var s scanner
		require.NoError(t, s.scan([]byte(line)))
		require.NoError(t, decode(&s.tree, 0, &got), line)
		assert.Equal(t, want, got, line)
	}
}

// TestOpaqueFields: the fields a session scans without nodes are ones no
// op decodes: every op takes its id as raw JSON, and the manifest, which
// manifest.set decodes from the tree, keeps its nodes.
func TestOpaqueFields(t *testing.T) {
	for _, o := range ops {
		f, ok := fieldsOf(reflect.TypeOf(o.request[0])).byName["id"]
		require.True(t, ok, "op %s", o.name)
		assert.True(t, takesRaw(f.typ), "op %s: id", o.name)
	}
	assert.True(t, opaqueField([]byte("run.create"), []byte("chatRef")))
	assert.True(t, opaqueField([]byte("write"), []byte("chatRef")), "an unknown field is refused by name")
	assert.True(t, opaqueField([]byte("explode"), []byte("anything")))
	assert.False(t, opaqueField([]byte("manifest.set"), []byte("manifest")))
	assert.False(t, opaqueField([]byte("run.create"), []byte("profile")))
	assert.False(t, opaqueField(nil, []byte("chatRef")), "before op, only id is known to be raw")

	s := NewSession(Backend{})
	wide := []byte(`{"op":"finish","runId":"r","id":[` + strings.Repeat(`{"a":[0,"x"]},`, 1<<14) + `0]}`)
	require.NoError(t, s.scan.scan(wide))
	assert.Len(t, s.scan.nodes, 7, "the root, and the names and values of op, runId and id")
	id := s.scan.tree.member(0, "id")
	assert.Equal(t, wide[strings.Index(string(wide), `[`):len(wide)-1], s.scan.raw(id))

	err := s.scan.scan([]byte(`{"op":"finish","id":[{"a":1},{"b":[{"c":1,"c":2}]}]}`))
	var fe *fieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, `field "id[1].b[0].c" appears more than once`, fe.Msg, "raw JSON is checked all the same")
	err = s.scan.scan([]byte(`{"id":{"x":["\udc00"]},"op":"finish"}`))
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "id.x[0]", fe.Field)
}

// TestScanMaxValues: a line of more than MaxValues values and names is
// refused, and what lies past the bound gets no nodes, so the tree stays
// bounded whatever the line holds; a repeated name in a large object is
// still found below the bound.
func TestScanMaxValues(t *testing.T) {
	line := func(keys int, dup bool) []byte {
		var b bytes.Buffer
		b.WriteString(`{"op":"stat","x":{`)
		for i := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":0`, i)
		}
		if dup {
			b.WriteString(`,"k7":1`)
		}
		b.WriteString("}}")
		return b.Bytes()
	}
	var s scanner
	err := s.scan(line(MaxValues/2+10, false))
	var fe *fieldError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Msg, "more than 2097152 values")
	assert.LessOrEqual(t, len(s.nodes), MaxValues+1, "no nodes past the bound")

	err = s.scan(line(100000, true))
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, `field "x.k7" appears more than once`, fe.Msg)
	require.NoError(t, s.scan(line(100000, false)))
}
