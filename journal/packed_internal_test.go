package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SamplePayloads is samplePayloads for the external tests.
var SamplePayloads = samplePayloads

// testHash returns a content address in the form the store journals it.
func testHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// samplePayloads returns, by name, the payloads of storePayloads and
// edgePayloads.
func samplePayloads() map[string]any {
	out := storePayloads()
	maps.Copy(out, edgePayloads())
	return out
}

// storePayloads returns, by name, every typed payload and a payload like
// each map the store appends, with realistic values.
func storePayloads() map[string]any {
	h1, h2, h3 := testHash("one"), testHash("two"), testHash("three")
	return map[string]any{
		"Empty":                nil,
		"FileWrittenNew":       FileWritten{Path: "output/status.md", Hash: h1, Bytes: 723, Mode: "replace"},
		"FileWrittenReplace":   FileWritten{Path: "output/status.md", Hash: h2, Bytes: 731, Mode: "replace", PrevHash: h1},
		"FileWrittenAppend":    FileWritten{Path: "scratch/notes/log.txt", Hash: h3, Bytes: 20480, Mode: "append", PrevHash: h2},
		"PatchApplied":         PatchApplied{Path: "plan/steps.md", Hash: h2, PrevHash: h1, Replacements: 3},
		"FileDeleted":          FileDeleted{Path: "summaries/round-3.md", PrevHash: h3},
		"StatusChange":         StatusChange{From: "created", To: "running", Reason: "started"},
		"StatusChangeNoReason": StatusChange{From: "running", To: "completed"},
		"CheckpointFirst":      CheckpointMade{CheckpointID: "cp_000001", Seq: 1, Root: h1, Reason: "after_init"},
		"CheckpointAuto":       CheckpointMade{CheckpointID: "cp_000049", Seq: 49, Root: h2, Reason: "after_workspace_write", Parent: "cp_000048"},
		"CheckpointManual":     CheckpointMade{CheckpointID: "cp_001000", Seq: 1000, Root: h3, Reason: "round 25: append", Parent: "cp_000999"},
		"RolledBack":           RolledBack{CheckpointID: "cp_000012", Root: h1, PrevRoot: h2},
		"RunCreated":           map[string]any{"runId": "run_0123456789abcdef", "workspaceId": "ws_42", "stableChatId": "chat-7", "kind": "character", "profileId": "default", "root": h1, "inputs": 2},
		"PersistentChanges":    map[string]any{"workspaceId": "ws_42", "paths": []string{"persist/memory.md"}, "merged": false, "persistVersion": 4, "persistRoot": h3},
		"ArtifactAssembled":    map[string]any{"commitId": "commit_run_0123456789abcdef_0001", "checkpointId": "cp_000050", "artifactSetId": "artifact_set_0a1b2c3d", "artifacts": []map[string]string{{"id": "main", "kind": "body", "path": "output/main.md", "hash": h2}}},
		"ChatCommitRequested":  map[string]any{"commitId": "commit_run_0123456789abcdef_0001", "checkpointId": "cp_000050", "mode": "replace", "kind": "commit"},
		"ChatCommitFailed":     map[string]any{"commitId": "commit_run_0123456789abcdef_0002", "checkpointId": "cp_000051", "mode": "append", "kind": "rollback", "error": "sink: 503 \"unavailable\""},
		"ManifestSet":          map[string]any{"artifacts": 2},
		"RunCompleted":         map[string]any{"reason": "finished"},
	}
}

// edgePayloads returns, by name, payloads that test the edges of packing:
// tokens and hashes where they are not keys and values, hex strings that
// are not content addresses, escapes and unicode.
func edgePayloads() map[string]any {
	h1, h2, h3 := testHash("one"), testHash("two"), testHash("three")
	return map[string]any{
		"TokensInsideStrings": map[string]any{"path": `output/"path":"replace"/cp_000.md`, "reason": `"reason":"after_workspace_write"`, "to": `say "replace`, "from": `see "cp_000042" in "output/`},
		"HexOfOtherLengths":   map[string]any{"a": h1[:63], "b": h1 + "0", "c": strings.ToUpper(h1), "d": "0x" + h1, "e": h1[:32] + "g" + h1[33:]},
		"HexInsideStrings":    map[string]any{"q": `"` + h1 + `"`, "r": h1 + " " + h2, "s": []string{h1, h2, h3}, "t": `x"` + h1, "u": `"` + h1 + `x`},
		"UnicodeAndHTML":      map[string]any{"path": "output/ü日本/<a&b>.md", "note": "tab\tnew\nline \u2028 \U0001F600 \\ \"", "hash": h1},
		"NumbersAndNested":    map[string]any{"n": -1.5e300, "z": 0, "b": true, "nil": nil, "o": map[string]any{"hash": h1, "seq": 1}},
		"KeysThatAreHashes":   map[string]any{h1: h2},
		"ControlCharsEscaped": map[string]any{"s": "\u0000\u001f\u007f"},
		"LongPath":            FileWritten{Path: "output/" + strings.Repeat("deep/", 40) + "file.md", Hash: h1, Bytes: 1, Mode: "replace"},
	}
}

// payloadJSONs returns the JSON text Append makes of each payload.
func payloadJSONs(tb testing.TB, payloads map[string]any) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for name, p := range payloads {
		js, err := marshalPayload(p)
		require.NoError(tb, err, name)
		out[name] = js
	}
	return out
}

func FuzzPayloadCodec(f *testing.F) {
	for _, js := range payloadJSONs(f, samplePayloads()) {
		f.Add(js)
	}
	h := testHash("x")
	for _, s := range []string{
		``, `{}`, `{`, `"`, `""`, `"path":`, `"cp_000`, `"replace"`,
		`"` + h + `"`, `"` + h + `"` + h + `"`, `""` + h + `""`, `"` + h, h,
		`{"a":"` + h[:63] + `"}`, `{"a":"` + h + `0"}`, `{"a":"` + strings.ToUpper(h) + `"}`,
		`{"a":"\"` + h + `\""}`, `{"a":"x\"` + h + `"}`,
		`{"a":"\"path\":\"replace\""}`, `{"path":"日本語 \u00e9 ✓"}`, `["` + h + `",1,{"seq":2}]`, `null`,
		"\x00", "\x01", "\x01\x00", "\x02", "\t{}", "\n", "\r\x01", "{\"a\":\"\x01\x00\x1f\"}", "\xff\xfe",
		"\x01{\x03\x00" + strings.Repeat("\xaa", 32) + "}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		stored, packed := encodePayload(js)
		got, err := decodePayload(stored)
		require.NoError(t, err)
		require.Equal(t, string(js), string(got), "decode(encode(x)) == x")
		assert.Equal(t, !isPlain(stored), packed, "the first byte says whether a value is packed")
		if isPlain(js) {
			assert.LessOrEqual(t, len(stored), len(js), "a stored payload is never longer than its JSON")
		}

		got, err = decodePayload(packPayload(js))
		require.NoError(t, err)
		require.Equal(t, string(js), string(got), "decode(pack(x)) == x")

		// Any stored value decodes or fails; what decodes packs back to
		// something that decodes the same.
		if plain, err := decodePayload(js); err == nil {
			again, err := decodePayload(packPayload(plain))
			require.NoError(t, err)
			assert.Equal(t, string(plain), string(again))
		}
	})
}

// TestPackedFormat1 pins format 1: the token table and the greedy scan.
// If it fails, stored payloads no longer read back; a different table
// needs a new format byte, not an edit here.
func TestPackedFormat1(t *testing.T) {
	h := testHash("pin")
	hb, err := hex.DecodeString(h)
	require.NoError(t, err)
	var in, want bytes.Buffer
	want.WriteByte(formatPacked1)
	for _, c := range []byte{
		0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0B, 0x0C, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13,
		0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F,
	} {
		in.WriteString(tokens[c])
		want.WriteByte(c)
	}
	in.WriteString(`"` + h + `"`)
	want.WriteByte(codeHash)
	want.Write(hb)
	assert.Equal(t,
		`"path":"hash":"bytes":"mode":"prevHash":"replacements":"from":"to":"reason":"checkpointId":"seq":"root":"parent":"prevRoot":`+
			`"commitId":"kind":"runId":"workspaceId":"error":"replace""append""cp_000"after_workspace_"output/"scratch/"commit_run_"commit"`+
			`"`+h+`"`, in.String())
	assert.Equal(t, want.Bytes(), packPayload(in.Bytes()))

	js := []byte(`{"path":"output/a.md","hash":"` + h + `","bytes":7,"mode":"replace"}`)
	want.Reset()
	want.Write([]byte{formatPacked1, '{', 0x02, 0x1C})
	want.WriteString(`a.md",`)
	want.Write([]byte{0x03, codeHash})
	want.Write(hb)
	want.Write([]byte{',', 0x04, '7', ',', 0x05, 0x18, '}'})
	assert.Equal(t, want.Bytes(), packPayload(js))

	// Longest token first: "replacements": is not "replace" and the rest.
	assert.Equal(t, []byte{formatPacked1, '{', 0x07, '1', '}'}, packPayload([]byte(`{"replacements":1}`)))
}

func TestEncodePayload(t *testing.T) {
	t.Run("OKEmptyObjectStaysPlain", func(t *testing.T) {
		stored, packed := encodePayload([]byte(`{}`))
		assert.False(t, packed)
		assert.Equal(t, `{}`, string(stored))
	})
	t.Run("OKEveryAppendedSampleIsPacked", func(t *testing.T) {
		for name, js := range payloadJSONs(t, storePayloads()) {
			if name == "Empty" || name == "ManifestSet" {
				continue
			}
			stored, packed := encodePayload(js)
			assert.True(t, packed, name)
			assert.Less(t, len(stored), len(js), name)
		}
	})
	t.Run("OKControlByteFirstIsEscaped", func(t *testing.T) {
		// Stored plain, "\x02{}" would read as an unknown format.
		stored, packed := encodePayload([]byte("\x02{}"))
		assert.True(t, packed)
		assert.Equal(t, []byte{formatPacked1, codeEscape, 0x02, '{', '}'}, stored)
	})
	t.Run("OKControlByteLaterStaysPlain", func(t *testing.T) {
		stored, packed := encodePayload([]byte("{\"a\":\"\x02\"}"))
		assert.False(t, packed)
		assert.Equal(t, "{\"a\":\"\x02\"}", string(stored))
	})
}

func TestDecodePayloadErrors(t *testing.T) {
	hash := string(bytes.Repeat([]byte{0xab}, 32))
	tests := []struct {
		name   string
		stored string
		want   string
	}{
		{"ErrUnknownFormat", "\x02{}", "unknown payload format 0x02"},
		{"ErrFormatZero", "\x00{}", "unknown payload format 0x00"},
		{"ErrTruncatedHash", "\x01{\x03\x00" + hash[:31], "hash at byte 3 is truncated"},
		{"ErrTruncatedEscape", "\x01{\x01", "escape at byte 2 is truncated"},
		{"ErrUnusedCodeTab", "\x01{\x09}", "unused code 0x09 at byte 2"},
		{"ErrUnusedCodeLF", "\x01{\x0a}", "unused code 0x0a"},
		{"ErrUnusedCodeCR", "\x01{\x0d}", "unused code 0x0d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePayload([]byte(tt.stored))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Nil(t, got)
		})
	}
	t.Run("OKHashOfAnyBytes", func(t *testing.T) {
		raw := "\x00\x01\x09\x0a\x0d\x20\x22\x7b\xff" + strings.Repeat("\x00", 23)
		got, err := decodePayload([]byte("\x01{\x03\x00" + raw + "}"))
		require.NoError(t, err)
		assert.Equal(t, `{"hash":"`+hex.EncodeToString([]byte(raw))+`"}`, string(got))
	})
	t.Run("OKPlainAsItIs", func(t *testing.T) {
		for _, s := range []string{"", "{}", " {}", "\t{}", "\n{}", "\r{}", "not json"} {
			got, err := decodePayload([]byte(s))
			require.NoError(t, err)
			assert.Equal(t, s, string(got))
		}
	})
}
