package runs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/runs"
)

// TestChatWorkspaceIDIsCanonicalJSON pins the id to the SHA-256 of the
// RFC 8785 encoding a host in another language would produce
// (JSON.stringify({kind, stableChatId}) with sorted keys).
func TestChatWorkspaceIDIsCanonicalJSON(t *testing.T) {
	cases := map[string]struct{ kind, id, json string }{
		"HTMLCharactersLiteral": {"group", "a<b&c>", `{"kind":"group","stableChatId":"a<b&c>"}`},
		"QuoteAndBackslash":     {"character", `x"y\z`, `{"kind":"character","stableChatId":"x\"y\\z"}`},
		"ControlCharacters":     {"character", "a\nb\x01", `{"kind":"character","stableChatId":"a\nb\u0001"}`},
		"LineSeparatorLiteral":  {"character", "a\u2028b", "{\"kind\":\"character\",\"stableChatId\":\"a\u2028b\"}"},
		"NonASCII":              {"character", "聊天-1", `{"kind":"character","stableChatId":"聊天-1"}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(c.json))
			want := "chat_" + hex.EncodeToString(sum[:])[:16]
			assert.Equal(t, want, runs.ChatWorkspaceID(runs.ChatKey{Kind: c.kind, StableChatID: c.id}))
		})
	}
}
