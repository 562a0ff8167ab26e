package journal

import (
	"encoding/hex"
	"fmt"
	"slices"
)

// The stored form of a payload. A stored value is either plain, the JSON
// text itself, or packed, a format byte followed by a body:
//
//   - Plain: empty, or a first byte that JSON text can start with (any byte
//     from 0x20 up, or JSON whitespace: tab, LF, CR). Every row written
//     before packing existed is plain and reads back unchanged.
//   - Packed: a first byte below 0x20 that is not JSON whitespace, naming
//     the format. Only format 1 (formatPacked1) exists; any other format
//     byte is corruption.
//
// A format 1 body is the JSON text with three substitutions, each
// introduced by a byte below 0x20, which compact JSON never contains raw:
//
//   - codeHash (0x00) and 32 raw bytes stand for a quote, the 64 lowercase
//     hex digits of those bytes, and a quote: a content address.
//   - A code of the token table stands for its token.
//   - codeEscape (0x01) and one byte stand for that byte. It is how the
//     format represents a byte below 0x20 of the input, so packing is
//     defined for every input; Append never needs it.
//
// Every other byte stands for itself. The 32 bytes after codeHash may
// hold any value; decoding copies them as hex and never reads them as
// codes.
const (
	formatPacked1 = 0x01
	codeHash      = 0x00
	codeEscape    = 0x01
	hashBytes     = 32
	hashText      = 2*hashBytes + 2 // the hex digits and their quotes
)

// tokens is the token table of format 1: the keys of the payloads the
// store appends (the typed payloads in payload.go, then the maps runs
// appends) and their most common values, each starting with a quote.
// Codes 0x09, 0x0A and 0x0D, JSON's whitespace, stand for nothing: a stored
// value that starts with one is plain JSON, and in a body they are invalid.
//
// The table is part of format 1 and must never change: every stored packed
// payload is read with it. A different table needs a new format byte,
// with format 1 still read through this one.
var tokens = [0x20]string{
	0x02: `"path":`,
	0x03: `"hash":`,
	0x04: `"bytes":`,
	0x05: `"mode":`,
	0x06: `"prevHash":`,
	0x07: `"replacements":`,
	0x08: `"from":`,
	0x0B: `"to":`,
	0x0C: `"reason":`,
	0x0E: `"checkpointId":`,
	0x0F: `"seq":`,
	0x10: `"root":`,
	0x11: `"parent":`,
	0x12: `"prevRoot":`,
	0x13: `"commitId":`,
	0x14: `"kind":`,
	0x15: `"runId":`,
	0x16: `"workspaceId":`,
	0x17: `"error":`,
	0x18: `"replace"`,         // write and commit mode
	0x19: `"append"`,          // write and commit mode
	0x1A: `"cp_000`,           // checkpoint ids cp_000001 … cp_000999
	0x1B: `"after_workspace_`, // automatic checkpoint reasons
	0x1C: `"output/`,          // paths
	0x1D: `"scratch/`,         // paths
	0x1E: `"commit_run_`,      // commit ids
	0x1F: `"commit"`,          // commit kind
}

// tokensAfterQuote lists, for each byte, the codes of the tokens that
// start with a quote and that byte, longest token first. Every token
// starts with a quote, so the packer looks for one only at a quote.
var tokensAfterQuote = func() (m [256][]byte) {
	for c, tok := range tokens {
		if tok == "" {
			continue
		}
		if tok[0] != '"' || len(tok) < 2 {
			panic(fmt.Sprintf("journal: token %q does not start with a quote", tok))
		}
		m[tok[1]] = append(m[tok[1]], byte(c))
	}
	for i := range m {
		slices.SortStableFunc(m[i], func(a, b byte) int { return len(tokens[b]) - len(tokens[a]) })
	}
	return m
}()

// isPlain reports whether a stored payload is plain JSON text rather than
// a packed form.
func isPlain(stored []byte) bool {
	if len(stored) == 0 {
		return true
	}
	switch c := stored[0]; {
	case c >= 0x20, c == '\t', c == '\n', c == '\r':
		return true
	}
	return false
}

// encodePayload returns the value to store for the payload text js and
// whether it is packed. It packs js unless that would not make it shorter
// and js reads back as itself when stored plain; so a stored payload is
// never longer than its JSON, and decodePayload(encodePayload(js)) is js
// for every js.
func encodePayload(js []byte) (stored []byte, packed bool) {
	p := packPayload(js)
	if len(p) >= len(js) && isPlain(js) {
		return js, false
	}
	return p, true
}

// packPayload returns js in format 1. It scans left to right and at each
// position takes the first that applies: a quoted 64-digit lowercase hex
// string becomes codeHash and its 32 bytes; the longest token of the table
// becomes its code; a byte below 0x20 is escaped; any other byte is kept.
func packPayload(js []byte) []byte {
	out := make([]byte, 1, len(js)/2+16)
	out[0] = formatPacked1
	for i := 0; i < len(js); {
		c := js[i]
		if c < 0x20 {
			out = append(out, codeEscape, c)
			i++
			continue
		}
		if c != '"' {
			out = append(out, c)
			i++
			continue
		}
		rest := js[i:]
		if isQuotedHash(rest) {
			out = append(out, codeHash)
			out, _ = hex.AppendDecode(out, rest[1:hashText-1])
			i += hashText
			continue
		}
		if code, n := matchToken(rest); n > 0 {
			out = append(out, code)
			i += n
			continue
		}
		out = append(out, c)
		i++
	}
	return out
}

// matchToken returns the code and length of the longest token that b
// starts with; n is 0 if there is none.
func matchToken(b []byte) (code byte, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	for _, k := range tokensAfterQuote[b[1]] {
		tok := tokens[k]
		if len(b) >= len(tok) && string(b[:len(tok)]) == tok {
			return k, len(tok)
		}
	}
	return 0, 0
}

// isQuotedHash reports whether b starts with a quote, 64 lowercase hex
// digits and a quote.
func isQuotedHash(b []byte) bool {
	if len(b) < hashText || b[0] != '"' || b[hashText-1] != '"' {
		return false
	}
	for _, c := range b[1 : hashText-1] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// decodePayload returns the JSON text of a stored payload: a plain one as
// it is, a packed one unpacked. A packed payload that does not decode (an
// unknown format, a truncated hash or escape, an unused code) is an error.
func decodePayload(stored []byte) ([]byte, error) {
	if isPlain(stored) {
		return stored, nil
	}
	if stored[0] != formatPacked1 {
		return nil, fmt.Errorf("unknown payload format 0x%02x", stored[0])
	}
	body := stored[1:]
	out := make([]byte, 0, 2*len(body)+64)
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 0x20:
			out = append(out, c)
		case c == codeHash:
			if len(body)-i-1 < hashBytes {
				return nil, fmt.Errorf("packed payload: hash at byte %d is truncated", i+1)
			}
			out = append(out, '"')
			out = hex.AppendEncode(out, body[i+1:i+1+hashBytes])
			out = append(out, '"')
			i += hashBytes
		case c == codeEscape:
			if i+1 == len(body) {
				return nil, fmt.Errorf("packed payload: escape at byte %d is truncated", i+1)
			}
			i++
			out = append(out, body[i])
		case tokens[c] != "":
			out = append(out, tokens[c]...)
		default:
			return nil, fmt.Errorf("packed payload: unused code 0x%02x at byte %d", c, i+1)
		}
	}
	return out, nil
}
