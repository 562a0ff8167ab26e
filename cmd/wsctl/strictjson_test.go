package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzCheckJSON: checkJSON never panics on valid JSON, and whatever it
// accepts decodes without encoding/json replacing anything by U+FFFD: a
// U+FFFD in the decoded value was in the input, raw or as \ufffd.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, `["\udc00"]`, `"\ud800\u0041"`,
		`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"\ud800":1}`, `"\\\ud800"`, `"\ufffd"`, `1.5`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || !utf8.Valid(data) {
			return
		}
		if checkJSON(data, nil, "") != nil {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // 1e700 is valid JSON but no float64
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("valid JSON does not decode: %v", err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		had := bytes.Contains(data, []byte("\uFFFD")) || strings.Contains(strings.ToLower(string(data)), `\ufffd`)
		if !had && bytes.Contains(out, []byte("\uFFFD")) {
			t.Fatalf("checkJSON accepted %q, which decodes with a replacement character", data)
		}
	})
}

// nested returns an object nested depth levels deep, each level under a
// key of keyLen bytes.
func nested(depth, keyLen int) []byte {
	key := strings.Repeat("k", keyLen)
	return []byte(strings.Repeat(`{"`+key+`":`, depth) + "1" + strings.Repeat("}", depth))
}

// TestCheckJSONDepth: a value may nest maxJSONDepth levels; one level more
// is refused, naming where, rather than walked at any cost.
func TestCheckJSONDepth(t *testing.T) {
	require.NoError(t, checkJSON(nested(maxJSONDepth, 1), nil, ""))
	err := checkJSON(nested(maxJSONDepth+1, 1), nil, "")
	var fe *fieldError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Msg, "nests deeper than 64 levels")
	assert.Equal(t, strings.Repeat("k.", maxJSONDepth-1)+"k", fe.Field)
	err = checkJSON([]byte(strings.Repeat("[", 1000)+strings.Repeat("]", 1000)), nil, "")
	require.ErrorAs(t, err, &fe)
}

// TestCheckJSONCostGrowsWithTheInput: the bytes checkJSON allocates grow
// with the length of the line, not with its depth times its length (a
// path spelled out at every level would cost depth² × key length).
func TestCheckJSONCostGrowsWithTheInput(t *testing.T) {
	alloc := func(line []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		require.NoError(t, checkJSON(line, nil, ""))
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, depth := range []int{8, 64} {
		line := nested(depth, 10<<10)
		got := alloc(line)
		t.Logf("depth %d, %d-byte line: %d bytes allocated", depth, len(line), got)
		assert.Less(t, got, uint64(8*len(line)), "depth %d", depth)
	}
}

// TestCheckJSONNull: null stands for an absent field, so a field may be
// null; an entry of a map of strings or an element of a list of strings
// cannot be absent, and null there is refused rather than read as "".
func TestCheckJSONNull(t *testing.T) {
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
		assert.NoError(t, checkJSON([]byte(ok), typ, ""), ok)
	}
	for bad, field := range map[string]string{`{"inputs":{"a.md":null}}`: "inputs.a.md", `{"roots":["output",null]}`: "roots[1]"} {
		var fe *fieldError
		require.ErrorAs(t, checkJSON([]byte(bad), typ, ""), &fe, bad)
		assert.Equal(t, field, fe.Field)
		assert.Contains(t, fe.Msg, "must be a string, not null")
	}
}
