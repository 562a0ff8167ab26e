package runs_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func readSnapshot(t *testing.T, e *wsEnv, runID string) runs.PersistSnapshot {
	t.Helper()
	var snap runs.PersistSnapshot
	require.NoError(t, json.Unmarshal([]byte(e.read(e.host(runID), "input/persist_snapshot.json")), &snap))
	return snap
}

// TestCreateRun proves what a new run starts with: its inputs under
// input/ (readable by the host, hidden from the model, never writable), a
// persist snapshot naming the chat's persist base, the running status, an
// initial checkpoint, and the journal of all of it.
func TestCreateRun(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	P := vfs.MustPath
	inputs := map[string][]byte{
		"prompt_snapshot.json":     []byte(`{"chatCompletionPayload":{"messages":[{"role":"user","content":"hi"}]}}`),
		"world/activated.md":       []byte("# Activated\nThe pass is closed.\n"),
		"./character//card.md":     []byte("Alice\n"), // cleaned to character/card.md
		"preset/instructions.md":   []byte(""),
		"skills/index/example.bin": {0, 1, 2},
	}
	r := e.newRun("run_a", runs.CreateRequest{ChatRef: json.RawMessage(`{"fileName":"a.jsonl"}`), Inputs: inputs})

	assert.Equal(t, runs.Running, r.Status)
	assert.Equal(t, runs.ChatWorkspaceID(testChat), r.ChatID)
	assert.Equal(t, testChat.Kind, r.Kind)
	assert.Equal(t, testChat.StableChatID, r.StableChatID)
	assert.Equal(t, "default", r.Profile.ID)
	assert.Equal(t, runs.DefaultRoots, r.Profile.VisibleRoots)
	assert.Equal(t, runs.DefaultRoots, r.Profile.WritableRoots)
	assert.EqualValues(t, 1, r.HeadCheckpoint, "the initial workspace is checkpointed")
	assert.Nil(t, r.FinishedAt)

	t.Run("InputsMaterialized", func(t *testing.T) {
		host, model := e.host("run_a"), e.model("run_a")
		for name, content := range inputs {
			p := P("input/" + strings.TrimPrefix(strings.ReplaceAll(name, "//", "/"), "./"))
			res, err := host.Read(ctx, p, vfs.ReadOptions{})
			require.NoError(t, err, p)
			assert.Equal(t, string(content), string(res.Content), p)
			assert.Equal(t, vfs.ResourceMaterialized, res.Info.Resource)
			assert.False(t, res.Info.Writable)

			_, err = model.Read(ctx, p, vfs.ReadOptions{})
			requireModelError(t, err, wserr.PathNotVisible)
			_, err = host.Write(ctx, p, []byte("changed"), vfs.WriteOptions{})
			requireModelError(t, err, wserr.PathNotWritable)
			_, err = model.Write(ctx, p, []byte("changed"), vfs.WriteOptions{})
			requireModelError(t, err, wserr.PathNotVisible)
		}
		ls, err := host.List(ctx, P("input"), 1)
		require.NoError(t, err)
		var names []string
		for _, fi := range ls {
			names = append(names, fi.Path.Base())
		}
		assert.Equal(t, []string{"character", "persist_snapshot.json", "preset", "prompt_snapshot.json", "skills", "world"}, names)
	})

	t.Run("PersistSnapshotOfEmptyLayer", func(t *testing.T) {
		snap := readSnapshot(t, e, "run_a")
		assert.Equal(t, runs.PersistSnapshot{ChatWorkspaceID: r.ChatID, PersistRoot: vfs.EmptyTree, PersistVersion: 0}, snap)
		assert.Equal(t, vfs.EmptyTree, r.PersistBase)
		fi, err := e.host("run_a").Stat(ctx, P("persist"))
		require.NoError(t, err, "an empty persist/ is an empty directory")
		assert.Equal(t, vfs.FileInfo{Path: P("persist"), Kind: vfs.KindDir, Hash: vfs.EmptyTree, Resource: vfs.ResourceGenerated}, fi)
		_, err = e.st.Trees.Lookup(ctx, nil, e.run("run_a").Root, P("persist"))
		requireModelError(t, err, wserr.FileNotFound) // nothing stored for it
	})

	t.Run("Journal", func(t *testing.T) {
		evs, err := e.st.Journal.Page(ctx, "run_a", journal.PageQuery{})
		require.NoError(t, err)
		require.Len(t, evs, 3)
		assert.Equal(t, []journal.Type{journal.RunCreated, journal.StatusChanged, journal.CheckpointCreated}, eventTypes(evs))
		var created map[string]any
		require.NoError(t, json.Unmarshal(evs[0].Payload, &created))
		assert.Equal(t, "run_a", created["runId"])
		assert.Equal(t, r.ChatID, created["workspaceId"])
		assert.Equal(t, testChat.StableChatID, created["stableChatId"])
		var sc journal.StatusChange
		require.NoError(t, json.Unmarshal(evs[1].Payload, &sc))
		assert.Equal(t, journal.StatusChange{From: "created", To: "running", Reason: "started"}, sc)
		cp, err := e.st.Checkpoints.Get(ctx, nil, "run_a", 1)
		require.NoError(t, err)
		assert.Equal(t, r.Root, cp.Root)
		assert.Equal(t, "after_init", cp.Reason)
		assert.EqualValues(t, 3, cp.EventSeq)
	})

	t.Run("NoAutoCheckpoint", func(t *testing.T) {
		off := false
		r := e.newRun("run_nocp", runs.CreateRequest{Profile: &runs.Profile{AutoCheckpoint: &off}})
		assert.Zero(t, r.HeadCheckpoint)
		n, err := e.st.Checkpoints.Count(ctx, nil, "run_nocp")
		require.NoError(t, err)
		assert.Zero(t, n)
	})

	t.Run("GeneratedID", func(t *testing.T) {
		e := newWSEnv(t, runs.Options{})
		r, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
		require.NoError(t, err)
		assert.Regexp(t, regexp.MustCompile(`^run_[0-9a-f]{16}$`), r.ID)
	})

	t.Run("ErrReservedInput", func(t *testing.T) {
		before := e.rows("runs")
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_reserved",
			Inputs: map[string][]byte{"persist_snapshot.json": []byte("{}")}})
		requireModelError(t, err, wserr.InvalidPath)
		assert.Equal(t, before, e.rows("runs"))
	})
}

func eventTypes(evs []journal.Event) []journal.Type {
	out := make([]journal.Type, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// TestCreateRunErrors proves a refused run leaves no row behind: a taken
// id (run.exists), a malformed id, a bad profile or manifest.
func TestCreateRunErrors(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	e.newRun("run_a", runs.CreateRequest{})
	e.write("run_a", "output/main.md", "mine")

	type counts struct{ Runs, Chats, Trees, Blobs, Events, Checkpoints int }
	snapshot := func() counts {
		return counts{e.rows("runs"), e.rows("chats"), e.rows("trees"), e.rows("blobs"), e.rows("events"), e.rows("checkpoints")}
	}

	t.Run("ErrRunExists", func(t *testing.T) {
		before, state := snapshot(), e.state("run_a")
		for _, chat := range []runs.ChatKey{testChat, {Kind: "group", StableChatID: "other"}} {
			_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_a",
				Inputs: map[string][]byte{"prompt_snapshot.json": []byte("{}")}})
			requireHostError(t, err, wserr.RunExists)
		}
		assert.Equal(t, before, snapshot())
		assert.Equal(t, state, e.state("run_a"), "the existing run is untouched")
		assert.Equal(t, "mine", e.read(e.model("run_a"), "output/main.md"))
	})

	t.Run("ErrInvalidRunID", func(t *testing.T) {
		for _, id := range []string{
			"../run", "run/1", "run 1", "-run", "_run", ".run", "run\x00", "run\n", "ラン", strings.Repeat("r", 129), "run:1",
			"latest", // wsctl's name for the newest run
		} {
			before := snapshot()
			_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: id})
			requireModelError(t, err, wserr.InvalidArgument)
			assert.Equal(t, before, snapshot(), "%q", id)
		}
		for _, id := range []string{"r", "run_01HX.b-2", strings.Repeat("r", 128), "7"} {
			_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: id})
			assert.NoError(t, err, "%q", id)
		}
	})

	t.Run("ErrChatNamedTooLong", func(t *testing.T) {
		// Every row of the chat and its runs holds these: bounded so
		// that no row outgrows what an archive row holds.
		long := strings.Repeat("k", runs.MaxChatKeyBytes+1)
		for name, req := range map[string]runs.CreateRequest{
			"Kind":         {Chat: runs.ChatKey{Kind: long, StableChatID: "c"}},
			"StableChatID": {Chat: runs.ChatKey{Kind: "character", StableChatID: long}},
			"ChatRef":      {Chat: testChat, ChatRef: json.RawMessage(`"` + strings.Repeat("r", runs.MaxChatRefBytes) + `"`)},
		} {
			before := snapshot()
			_, err := e.svc.CreateRun(ctx, req)
			requireModelError(t, err, wserr.InvalidArgument)
			assert.Equal(t, before, snapshot(), name)
		}
		at := strings.Repeat("k", runs.MaxChatKeyBytes)
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: at, StableChatID: at},
			ChatRef: json.RawMessage(`"` + strings.Repeat("r", runs.MaxChatRefBytes-2) + `"`)})
		assert.NoError(t, err, "at the limits")
	})

	t.Run("ErrInvalidProfile", func(t *testing.T) {
		for name, prof := range map[string]runs.Profile{
			"WritableNotVisible": {VisibleRoots: []string{"output"}, WritableRoots: []string{"output", "scratch"}},
			"InputWritable":      {VisibleRoots: []string{"output", "input"}, WritableRoots: []string{"input"}},
			"RootNotOneSegment":  {VisibleRoots: []string{"output/drafts"}},
			"RootDotDot":         {VisibleRoots: []string{".."}},
			"NegativeCap":        {MaxRunBytes: -1},
		} {
			before := snapshot()
			_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_prof", Profile: &prof})
			requireModelError(t, err, wserr.InvalidArgument)
			assert.Equal(t, before, snapshot(), name)
		}
	})

	t.Run("ErrRootNamedTwice", func(t *testing.T) {
		// A root listed twice is a host's mistake: refused by name, as two
		// allowed host paths of one name are, rather than stored twice.
		for name, prof := range map[string]runs.Profile{
			"Visible":  {VisibleRoots: []string{"output", "scratch", "output"}},
			"Writable": {VisibleRoots: []string{"output", "scratch"}, WritableRoots: []string{"scratch", "scratch"}},
		} {
			before := snapshot()
			_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_twice", Profile: &prof})
			we := requireModelError(t, err, wserr.InvalidArgument)
			assert.Contains(t, we.Error(), "twice", name)
			assert.Equal(t, before, snapshot(), name)
		}
	})

	t.Run("ErrRootSaysWhy", func(t *testing.T) {
		// A root refused by the path contract says which rule it broke.
		prof := runs.Profile{VisibleRoots: []string{"output", "nul"}}
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_why", Profile: &prof})
		we := requireModelError(t, err, wserr.InvalidArgument)
		assert.Equal(t, "nul", we.Path)
		assert.Contains(t, we.Error(), "device name")
	})

	t.Run("ErrReservedRootProfile", func(t *testing.T) {
		// input/ and the runtime records stay hidden from the model, whatever
		// the profile says: each is refused by name and nothing is written.
		for _, root := range runs.ReservedRoots {
			for name, prof := range map[string]runs.Profile{
				"Visible":  {VisibleRoots: []string{"output", root}, WritableRoots: []string{"output"}},
				"Writable": {VisibleRoots: []string{"output", root}, WritableRoots: []string{"output", root}},
			} {
				before := snapshot()
				_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_reserved", Profile: &prof})
				we := requireModelError(t, err, wserr.InvalidArgument)
				assert.Equal(t, root, we.Path, "%s %s", name, root)
				assert.Contains(t, we.Error(), "reserved")
				assert.Equal(t, before, snapshot(), "%s %s", name, root)
			}
		}
		r := e.newRun("run_inputs_hidden", runs.CreateRequest{Inputs: map[string][]byte{"prompt_snapshot.json": []byte("{}")}})
		_, err := e.model(r.ID).Read(ctx, vfs.MustPath("input/prompt_snapshot.json"), vfs.ReadOptions{})
		requireModelError(t, err, wserr.PathNotVisible)
		_, err = e.model(r.ID).Write(ctx, vfs.MustPath("input/prompt_snapshot.json"), []byte("x"), vfs.WriteOptions{})
		requireModelError(t, err, wserr.PathNotVisible)
	})

	t.Run("ErrDuplicateInput", func(t *testing.T) {
		// Two spellings of one path: which content would win is map order.
		before := snapshot()
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_dup",
			Inputs: map[string][]byte{"world/a.md": []byte("one"), "./world//a.md": []byte("two")}})
		we := requireModelError(t, err, wserr.InvalidArgument)
		assert.Equal(t, "input/world/a.md", we.Path)
		assert.Equal(t, before, snapshot())
	})

	t.Run("ErrInputFileAndDirectory", func(t *testing.T) {
		before := snapshot()
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_clash",
			Inputs: map[string][]byte{"world": []byte("file"), "world/a.md": []byte("below it")}})
		require.Error(t, err)
		assert.Contains(t, []wserr.Code{wserr.NotADirectory, wserr.PathIsDirectory}, wserr.CodeOf(err), "%v", err)
		assert.Equal(t, before, snapshot())
		// A name that sorts between the two as a string ("world-x")
		// does not hide the clash.
		_, err = e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_clash",
			Inputs: map[string][]byte{"world": []byte("file"), "world-x": []byte("beside it"), "world/a.md": []byte("below it")}})
		require.Error(t, err)
		assert.Contains(t, []wserr.Code{wserr.NotADirectory, wserr.PathIsDirectory}, wserr.CodeOf(err), "%v", err)
		assert.Equal(t, before, snapshot())
	})

	t.Run("ErrInvalidManifest", func(t *testing.T) {
		before := snapshot()
		m := runs.DefaultManifest()
		m.Artifacts[0].Path = "../main.md"
		_, err := e.svc.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "run_man", Manifest: &m})
		requireHostError(t, err, wserr.InvalidManifest)
		assert.Equal(t, before, snapshot())
	})
}

// TestPersistProjection proves persist/ reaches a new run in O(1): after a
// run promotes files to the chat's persist layer, the next run sees them
// under persist/, shares the layer's tree (nothing copied), records its
// base in input/persist_snapshot.json, and costs the same tree rows
// whether the layer holds 5 files or 500.
func TestPersistProjection(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	off := false
	noCheckpoints := &runs.Profile{AutoCheckpoint: &off}

	// layer gives chat a persist layer of n files through a finished run.
	layer := func(chat runs.ChatKey, n int) runs.Chat {
		t.Helper()
		a := e.newRun("run_layer_"+chat.StableChatID, runs.CreateRequest{Chat: chat, Profile: noCheckpoints})
		e.write(a.ID, "persist/memory.md", "Alice likes tea.\n")
		for i := 1; i < n; i++ {
			e.write(a.ID, fmt.Sprintf("persist/facts/f%03d.md", i), fmt.Sprintf("fact %d\n", i))
		}
		res, err := e.svc.Finish(ctx, a.ID)
		require.NoError(t, err)
		require.Len(t, res.PersistChanges, n)
		c, err := e.svc.Chat(ctx, a.ChatID)
		require.NoError(t, err)
		return c
	}
	// create makes a run in chat and returns how many tree rows it added.
	create := func(id string, chat runs.ChatKey) (runs.Run, int) {
		t.Helper()
		before := e.rows("trees")
		r := e.newRun(id, runs.CreateRequest{Chat: chat, Inputs: map[string][]byte{"prompt_snapshot.json": []byte("{}")}})
		return r, e.rows("trees") - before
	}

	small, big := runs.ChatKey{Kind: "character", StableChatID: "small"}, runs.ChatKey{Kind: "character", StableChatID: "big"}
	smallChat, bigChat := layer(small, 5), layer(big, 500)
	assert.EqualValues(t, 1, bigChat.PersistVersion)

	rs, smallRows := create("run_small_b", small)
	rb, bigRows := create("run_big_b", big)
	t.Logf("tree rows added by CreateRun: %d with a 5-file persist layer, %d with a 500-file one", smallRows, bigRows)
	assert.Equal(t, smallRows, bigRows, "creating a run adds the same tree rows whatever the persist layer's size")
	assert.LessOrEqual(t, bigRows, 6, "a handful: input/, the root, the snapshot's path")

	for _, tc := range []struct {
		run  runs.Run
		chat runs.Chat
	}{{rs, smallChat}, {rb, bigChat}} {
		assert.Equal(t, "Alice likes tea.\n", e.read(e.model(tc.run.ID), "persist/memory.md"))
		pe, err := e.st.Trees.Lookup(ctx, nil, tc.run.Root, vfs.MustPath("persist"))
		require.NoError(t, err)
		assert.Equal(t, tc.chat.PersistRoot, pe.Hash, "the run's persist/ is the chat's layer, shared")
		assert.Equal(t, tc.chat.PersistRoot, tc.run.PersistBase)
		assert.Equal(t, tc.chat.PersistVersion, tc.run.PersistVersion)
		assert.Equal(t, runs.PersistSnapshot{ChatWorkspaceID: tc.chat.ID, PersistRoot: tc.chat.PersistRoot, PersistVersion: 1},
			readSnapshot(t, e, tc.run.ID))
	}
	fi, err := e.model("run_big_b").Stat(ctx, vfs.MustPath("persist/facts/f499.md"))
	require.NoError(t, err)
	assert.True(t, fi.Writable, "persist/ is written like any generated root")

	t.Run("UnfinishedRunsDoNotLeak", func(t *testing.T) {
		e.write("run_big_b", "persist/memory.md", "Alice hates tea.\n")
		require.NoError(t, e.svc.SetStatus(ctx, "run_big_b", runs.Cancelled, "user"))
		c, _ := create("run_big_c", big)
		assert.Equal(t, "Alice likes tea.\n", e.read(e.model(c.ID), "persist/memory.md"), "a cancelled run never touches the layer")
		chat, err := e.svc.Chat(ctx, bigChat.ID)
		require.NoError(t, err)
		assert.Equal(t, bigChat.PersistRoot, chat.PersistRoot)
	})
}

// TestDeleteRun proves an active run cannot be deleted (it must be
// cancelled first) and a finished one goes with its journal and
// checkpoints, leaving its chat and the other runs alone.
func TestDeleteRun(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	e.newRun("run_keep", runs.CreateRequest{})
	e.write("run_keep", "output/main.md", "keep")

	for _, st := range []runs.Status{runs.Running, runs.AwaitingApproval, runs.Paused} {
		t.Run("ErrActive/"+string(st), func(t *testing.T) {
			id := "run_active_" + string(st)
			e.newRun(id, runs.CreateRequest{})
			if st != runs.Running {
				require.NoError(t, e.svc.SetStatus(ctx, id, st, "test"))
			}
			before := e.state(id)
			err := e.svc.DeleteRun(ctx, id)
			requireHostError(t, err, wserr.InvalidState)
			assert.Contains(t, err.Error(), "cancel it first")
			assert.Equal(t, before, e.state(id))
		})
	}

	for _, st := range []runs.Status{runs.Completed, runs.Failed, runs.Cancelled} {
		t.Run("OK/"+string(st), func(t *testing.T) {
			id := "run_done_" + string(st)
			e.newRun(id, runs.CreateRequest{})
			e.write(id, "output/main.md", "done")
			if st == runs.Completed {
				_, err := e.svc.Finish(ctx, id)
				require.NoError(t, err)
			} else {
				require.NoError(t, e.svc.SetStatus(ctx, id, st, "test"))
			}
			keep := e.state("run_keep")
			chats := e.rows("chats")

			require.NoError(t, e.svc.DeleteRun(ctx, id))
			_, err := e.svc.Run(ctx, id)
			requireHostError(t, err, wserr.RunNotFound)
			last, err := e.st.Journal.Last(ctx, nil, id)
			require.NoError(t, err)
			assert.Zero(t, last, "the journal goes with the run")
			n, err := e.st.Checkpoints.Count(ctx, nil, id)
			require.NoError(t, err)
			assert.Zero(t, n, "so do the checkpoints")
			assert.Equal(t, chats, e.rows("chats"), "the chat workspace stays")
			k := e.state("run_keep")
			keep.Events, keep.Runs, k.Events, k.Runs = 0, 0, 0, 0
			assert.Equal(t, keep, k, "other runs are untouched")
			assert.Equal(t, "keep", e.read(e.model("run_keep"), "output/main.md"))

			requireHostError(t, e.svc.DeleteRun(ctx, id), wserr.RunNotFound)
		})
	}

	t.Run("IDReusableAfterDelete", func(t *testing.T) {
		r := e.newRun("run_done_completed", runs.CreateRequest{})
		last, err := e.st.Journal.Last(ctx, nil, r.ID)
		require.NoError(t, err)
		assert.EqualValues(t, 3, last, "a new journal starts at 1")
		_, err = e.model(r.ID).Stat(ctx, vfs.MustPath("output/main.md"))
		requireModelError(t, err, wserr.FileNotFound)
	})
}

// TestRunsList proves listing filters by chat and status, orders newest
// first and honours the limit.
func TestRunsList(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	other := runs.ChatKey{Kind: "group", StableChatID: "g"}
	e.newRun("run_1", runs.CreateRequest{})
	e.newRun("run_2", runs.CreateRequest{Chat: other})
	e.newRun("run_3", runs.CreateRequest{})
	require.NoError(t, e.svc.SetStatus(ctx, "run_3", runs.Failed, "model error"))

	ids := func(rs []runs.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	all, err := e.svc.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	assert.Equal(t, []string{"run_3", "run_2", "run_1"}, ids(all))
	mine, err := e.svc.Runs(ctx, runs.ListQuery{ChatID: runs.ChatWorkspaceID(testChat)})
	require.NoError(t, err)
	assert.Equal(t, []string{"run_3", "run_1"}, ids(mine))
	failed, err := e.svc.Runs(ctx, runs.ListQuery{Status: runs.Failed})
	require.NoError(t, err)
	assert.Equal(t, []string{"run_3"}, ids(failed))
	one, err := e.svc.Runs(ctx, runs.ListQuery{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, []string{"run_3"}, ids(one))
	_, err = e.svc.Runs(ctx, runs.ListQuery{Status: "sleeping"})
	requireModelError(t, err, wserr.InvalidArgument)

	_, err = e.svc.Run(ctx, "run_missing")
	requireHostError(t, err, wserr.RunNotFound)
	_, err = e.model("run_missing").Read(ctx, vfs.MustPath("output/main.md"), vfs.ReadOptions{})
	requireHostError(t, err, wserr.RunNotFound)
}

// TestRunIDsWithPrefix: the runs whose id starts with a prefix, in id
// order, at most limit of them, and how many there are.
func TestRunIDsWithPrefix(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	for _, id := range []string{"run_b", "run_a", "run_a.2", "run_a-1", "run_az", "runa", "Z9"} {
		e.newRun(id, runs.CreateRequest{})
	}
	for _, c := range []struct {
		prefix string
		limit  int
		ids    []string
		n      int
	}{
		{"run_a", 10, []string{"run_a", "run_a-1", "run_a.2", "run_az"}, 4},
		{"run_a", 2, []string{"run_a", "run_a-1"}, 4},
		{"run_", 0, nil, 5},
		{"run_b", 5, []string{"run_b"}, 1},
		{"Z", 5, []string{"Z9"}, 1},
		{"run_c", 5, nil, 0},
		{"runé", 5, nil, 0},
	} {
		ids, n, err := e.svc.RunIDsWithPrefix(e.ctx, c.prefix, c.limit)
		require.NoError(t, err)
		assert.Equal(t, c.ids, ids, "%q", c.prefix)
		assert.Equal(t, c.n, n, "%q", c.prefix)
	}
}

// TestCreateRunWritesEachDirectoryOnce: a run's inputs go into its tree
// as one change, so the trees a creation writes do not grow with the
// inputs in a directory (one per input, each a version of the directory
// left for gc, made a creation quadratic in them: 8,000 inputs in one
// directory took 26 s).
func TestCreateRunWritesEachDirectoryOnce(t *testing.T) {
	e := newLifecycleEnv(t)
	e.create("warm", runs.CreateRequest{}) // the trees every run shares (the empty one) are there
	written := map[int]int{}
	for _, n := range []int{10, 400} {
		inputs := map[string][]byte{}
		for i := range n {
			inputs[fmt.Sprintf("docs/f%04d.md", i)] = []byte(fmt.Sprintf("input %d of %d\n", i, n))
		}
		before := e.count("trees")
		_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("inputs", n)}, Inputs: inputs})
		require.NoError(t, err)
		written[n] = e.count("trees") - before
	}
	assert.Equal(t, written[10], written[400], "trees written for 10 and 400 inputs in one directory")
}
