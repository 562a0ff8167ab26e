package runs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestChatWorkspaceID pins the derivation of seed 000 §2: "chat_" + the
// first 16 hex digits of SHA-256 over the canonical JSON of {kind,
// stableChatId}, computed here from the literal bytes.
func TestChatWorkspaceID(t *testing.T) {
	sum := sha256.Sum256([]byte(`{"kind":"character","stableChatId":"abc"}`))
	want := "chat_" + hex.EncodeToString(sum[:])[:16]
	assert.Equal(t, want, runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "abc"}))
	assert.Len(t, want, len("chat_")+16)

	t.Run("KindAndIDBothCount", func(t *testing.T) {
		a := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "abc"})
		assert.NotEqual(t, a, runs.ChatWorkspaceID(runs.ChatKey{Kind: "group", StableChatID: "abc"}))
		assert.NotEqual(t, a, runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "abd"}))
		// No concatenation ambiguity: the JSON keeps the fields apart.
		assert.NotEqual(t,
			runs.ChatWorkspaceID(runs.ChatKey{Kind: "ab", StableChatID: "c"}),
			runs.ChatWorkspaceID(runs.ChatKey{Kind: "a", StableChatID: "bc"}))
	})

	t.Run("Unicode", func(t *testing.T) {
		sum := sha256.Sum256([]byte(`{"kind":"group","stableChatId":"群聊-1"}`))
		assert.Equal(t, "chat_"+hex.EncodeToString(sum[:])[:16],
			runs.ChatWorkspaceID(runs.ChatKey{Kind: "group", StableChatID: "群聊-1"}), "UTF-8 as is, not \\u-escaped")
	})
}

// TestChatRename proves a renamed chat keeps its workspace: runs created
// with the same ChatKey and different chat references share one chat
// workspace (and its persist layer), each run keeps the reference it was
// created with, and the chat row records the latest.
func TestChatRename(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	key := runs.ChatKey{Kind: "character", StableChatID: "integrity-7f3a"}
	refA := json.RawMessage(`{"kind":"character","characterId":"alice.png","fileName":"Alice - 2026-04-26.jsonl"}`)
	refB := json.RawMessage(`{"kind":"character","characterId":"alice.png","fileName":"Alice renamed.jsonl"}`)

	a := e.newRun("run_a", runs.CreateRequest{Chat: key, ChatRef: refA})
	e.write("run_a", "persist/memory.md", "Alice likes tea.\n")
	_, err := e.svc.Finish(ctx, "run_a")
	require.NoError(t, err)
	b := e.newRun("run_b", runs.CreateRequest{Chat: key, ChatRef: refB})

	id := runs.ChatWorkspaceID(key)
	assert.Equal(t, id, a.ChatID)
	assert.Equal(t, id, b.ChatID, "a rename does not split the workspace")
	assert.JSONEq(t, string(refA), string(e.run("run_a").ChatRef), "a run keeps the reference it started with")
	assert.JSONEq(t, string(refB), string(b.ChatRef))

	chat, err := e.svc.Chat(ctx, id)
	require.NoError(t, err)
	assert.JSONEq(t, string(refB), string(chat.ChatRef), "the chat records the latest reference")
	assert.Equal(t, key.Kind, chat.Kind)
	assert.Equal(t, key.StableChatID, chat.StableChatID)
	assert.EqualValues(t, 1, chat.PersistVersion, "recording a new reference keeps the persist layer")
	assert.Equal(t, "Alice likes tea.\n", e.read(e.model("run_b"), "persist/memory.md"))
	assert.True(t, chat.UpdatedAt.After(chat.CreatedAt))

	chats, _, err := e.svc.ChatsPage(ctx, runs.ChatQuery{})
	require.NoError(t, err)
	assert.Len(t, chats, 1)

	list, err := e.svc.Runs(ctx, runs.ListQuery{ChatID: id})
	require.NoError(t, err)
	assert.Len(t, list, 2)

	// A run created without a reference leaves the chat's as it is.
	e.newRun("run_d", runs.CreateRequest{Chat: key})
	chat, err = e.svc.Chat(ctx, id)
	require.NoError(t, err)
	assert.JSONEq(t, string(refB), string(chat.ChatRef), "no reference given, none recorded")
	assert.JSONEq(t, `{}`, string(e.run("run_d").ChatRef))

	t.Run("NoRefKeepsEmptyObject", func(t *testing.T) {
		r := e.newRun("run_c", runs.CreateRequest{Chat: runs.ChatKey{Kind: "group", StableChatID: "g1"}})
		assert.JSONEq(t, `{}`, string(r.ChatRef))
	})

	t.Run("ErrInvalidArgument", func(t *testing.T) {
		for _, k := range []runs.ChatKey{{}, {Kind: "character"}, {StableChatID: "x"}, {Kind: " ", StableChatID: "x"}} {
			before := e.rows("chats")
			_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: k})
			requireModelError(t, err, wserr.InvalidArgument)
			assert.Equal(t, before, e.rows("chats"))
		}
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: key, ChatRef: json.RawMessage(`{"broken"`)})
		requireModelError(t, err, wserr.InvalidArgument)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.svc.Chat(ctx, "chat_0000000000000000")
		requireHostError(t, err, wserr.NotFound)
	})

}
