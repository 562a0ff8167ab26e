package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
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
