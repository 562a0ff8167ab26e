package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestParseChatRef: a chat workspace id first, then KIND:ID split at the
// first ':', then KIND/ID split at the first '/', then, where a command
// takes one, a bare stableChatId; anything else is wsctl.invalid_argument
// naming the forms.
func TestParseChatRef(t *testing.T) {
	key := func(kind, id string) chatRef {
		k := runs.ChatKey{Kind: kind, StableChatID: id}
		return chatRef{id: runs.ChatWorkspaceID(k), key: k}
	}
	for _, tc := range []struct {
		in   string
		bare bool
		want chatRef
	}{
		{"chat_0123456789abcdef", false, chatRef{id: "chat_0123456789abcdef"}},
		{"chat_0123456789abcdef", true, chatRef{id: "chat_0123456789abcdef"}},
		{"character:abc", false, key("character", "abc")},
		{"character/abc", false, key("character", "abc")},
		{"character:a:b/c", false, key("character", "a:b/c")},
		{"group/a/b:c", false, key("group/a/b", "c")}, // ':' is tried first
		{"group/a/b", false, key("group", "a/b")},
		{"chat_0123456789abcdef:x", false, key("chat_0123456789abcdef", "x")},
		{"abc", true, chatRef{stable: "abc"}},
		{"chat_XYZ", true, chatRef{stable: "chat_XYZ"}},
		{":abc", true, chatRef{stable: ":abc"}},
	} {
		got, err := parseChatRef("op", tc.in, tc.bare)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", " ", "abc", "chat_", "chat_0123", "chat_0123456789ABCDEF", "chat_0123456789abcdeg",
		"chat_0123456789abcdef0", "character:", ":abc", " :abc", "character: ", "character/", "/abc", ":", "/"} {
		_, err := parseChatRef("op", bad, false)
		assert.Equal(t, protocol.CodeInvalidArgument, wserr.CodeOf(err), "%q", bad)
		assert.ErrorContains(t, err, chatRefHelp, "%q", bad)
	}
	for _, bad := range []string{"", " ", "\t"} {
		_, err := parseChatRef("op", bad, true)
		assert.Equal(t, protocol.CodeInvalidArgument, wserr.CodeOf(err), "%q", bad)
	}
}

// TestChatNamedEveryWay: runs --chat, policy --chat, prune --chat, export
// --chat, chats --after and rm-chat each take a chat by the workspace id
// chats prints, by KIND:ID and by the KIND/ID runs prints, and find the
// same chat; runs --chat a bare stableChatId too.
func TestChatNamedEveryWay(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	seedChatRun(t, st, "s1", "a1", true)
	seedChatRun(t, st, "s1", "a2", true)
	seedChatRun(t, st, "s2", "b1", true)
	seedChatRun(t, st, "s3", "c1", true)
	seedChatRun(t, st, "s4", "d1", true)
	id1 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s1"})

	// The forms as the commands print them: the WORKSPACE column of chats
	// (and its --json id), the STABLE CHAT column of runs.
	var fromChats, fromRuns string
	for _, l := range strings.Split(c.ok("chats"), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[2] == "s1" {
			fromChats = f[0]
		}
	}
	for _, l := range strings.Split(c.ok("runs"), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == "a1" {
			fromRuns = f[3]
		}
	}
	require.Equal(t, id1, fromChats)
	require.Equal(t, "character/s1", fromRuns)
	var list []runs.Chat
	c.jsonOut(&list, "chats", "--stable-chat", "s1")
	require.Len(t, list, 1)
	require.Equal(t, id1, list[0].ID)
	forms := []string{fromChats, "character:s1", fromRuns}

	runIDs := func(args ...string) []string {
		var rs []runs.Run
		c.jsonOut(&rs, args...)
		ids := []string{}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	for _, f := range append(forms, "s1") {
		assert.Equal(t, []string{"a2", "a1"}, runIDs("runs", "--chat", f), f)
	}

	c.ok("policy", "--set", "keepCompletedRuns=1")
	for _, f := range forms {
		var pol struct {
			Scope string `json:"scope"`
		}
		c.jsonOut(&pol, "policy", "--chat", f)
		assert.Equal(t, id1, pol.Scope, f)
		var rep runs.PruneReport
		c.jsonOut(&rep, "prune", "--dry-run", "--chat", f)
		require.Len(t, rep.Runs, 1, f)
		assert.Equal(t, "a1", rep.Runs[0].RunID, f)

		var sum archive.Summary
		c.jsonOut(&sum, "export", "--chat", f, filepath.Join(t.TempDir(), "chat.wsar"))
		assert.Equal(t, 1, sum.Chats, f)
		assert.Equal(t, 2, sum.Runs, f)
	}
	c.ok("policy", "--chat", "character/s1", "--set", "keepCompletedRuns=2")
	p, err := st.Runs.Policy(context.Background(), id1)
	require.NoError(t, err)
	require.NotNil(t, p.KeepCompletedRuns)
	assert.Equal(t, 2, *p.KeepCompletedRuns, "set on the chat named by KIND/ID")
	c.ok("policy", "--chat", "character/s1", "--set", "keepCompletedRuns=-")
	assert.Contains(t, c.ok("prune", "--chat", "character/s1"), "deleted run a1 ("+id1+", completed)")

	// The chats after s1, newest first: s1 is the oldest but one.
	var all []runs.Chat
	c.jsonOut(&all, "chats")
	require.Len(t, all, 4)
	require.Equal(t, id1, all[3].ID)
	for _, f := range []string{all[2].ID, all[2].Kind + ":" + all[2].StableChatID, all[2].Kind + "/" + all[2].StableChatID} {
		var after []runs.Chat
		c.jsonOut(&after, "chats", "--after", f)
		require.Len(t, after, 1, f)
		assert.Equal(t, id1, after[0].ID, f)
	}

	id2 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s2"})
	var res runs.DeleteChatsResult
	c.jsonOut(&res, "rm-chat", id2, "character:s3", "character/s4")
	require.Len(t, res.Chats, 3)
	for i, stable := range []string{"s2", "s3", "s4"} {
		assert.True(t, res.Chats[i].Found, stable)
		assert.Equal(t, runs.ChatKey{Kind: "character", StableChatID: stable}, res.Chats[i].Chat)
	}
	assert.Equal(t, []string{"a2"}, runIDsOf(t, st))
	out := c.ok("rm-chat", fromChats)
	assert.Contains(t, out, "deleted chat "+id1+" (character:s1): 1 runs, 0 cancelled")
	assert.Empty(t, runIDsOf(t, st))
}

// TestChatNameRefused: a chat named in none of the forms is exit 2 naming
// them, before anything is read or changed; a well-formed one the store
// does not hold is store.not_found (exit 3) where the command needs the
// chat, and rm-chat given one deletes none of the others.
func TestChatNameRefused(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	seedChatRun(t, st, "s1", "a1", true)
	seedChatRun(t, st, "s1", "a2", true)
	id1 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s1"})
	c.ok("policy", "--set", "keepCompletedRuns=0")
	archivePath := filepath.Join(t.TempDir(), "x.wsar")
	named := regexp.QuoteMeta(chatRefHelp)

	for _, bad := range []string{"nope", "chat_XYZ", "chat_0123", strings.ToUpper(id1[5:]), "chat_" + strings.ToUpper(id1[5:]),
		"character:", ":s1", "character/", "/s1", " :s1"} {
		for _, args := range [][]string{
			{"policy", "--chat", bad, "--set", "keepCompletedRuns=5"},
			{"prune", "--chat", bad},
			{"export", "--chat", bad, archivePath},
			{"chats", "--after", bad},
			{"rm-chat", "character:s1", bad},
			{"rm-chat", bad, "character:s1"},
		} {
			errOut := c.fails(2, args...)
			assert.Contains(t, errOut, "wsctl.invalid_argument", "%q", args)
			assert.Regexp(t, named, errOut, "%q", args)
		}
	}
	assert.Contains(t, c.fails(2, "runs", "--chat", " "), "wsctl.invalid_argument")
	assert.NoFileExists(t, archivePath)
	assert.ElementsMatch(t, []string{"a1", "a2"}, runIDsOf(t, st), "a refused name deletes nothing")
	p, err := st.Runs.Policy(context.Background(), id1)
	require.NoError(t, err)
	assert.Nil(t, p.KeepCompletedRuns, "nor sets anything")
	var ds []runs.Deletion
	c.jsonOut(&ds, "deletions")
	assert.Empty(t, ds)

	for _, missing := range []string{"chat_0000000000000000", "character:nobody", "character/nobody"} {
		for _, args := range [][]string{
			{"policy", "--chat", missing},
			{"prune", "--chat", missing},
			{"export", "--chat", missing, archivePath},
			{"chats", "--after", missing},
		} {
			assert.Contains(t, c.fails(3, args...), "store.not_found", "%q", args)
		}
		assert.Equal(t, "[]\n", c.ok("runs", "--chat", missing, "--json"), "runs of a chat not held: none, as before")
	}
	// rm-chat needs the key of a chat named by its workspace id: one the
	// store does not hold is store.not_found, and the chat named beside it
	// stays.
	assert.Contains(t, c.fails(3, "rm-chat", "character:s1", "chat_0000000000000000"), "store.not_found")
	assert.Contains(t, c.fails(3, "rm-chat", "chat_0000000000000000", id1), "store.not_found")
	assert.ElementsMatch(t, []string{"a1", "a2"}, runIDsOf(t, st))
	// A key the store never saw is reported, as before.
	assert.Contains(t, c.ok("rm-chat", "character:nobody", "character/nobody"), "no workspace for character:nobody")
	assert.ElementsMatch(t, []string{"a1", "a2"}, runIDsOf(t, st))
	c.jsonOut(&ds, "deletions")
	assert.Empty(t, ds)
}
