package protocol_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
)

// retentionSession is a session over a fresh store with the retention
// ops, and a helper that sends a line and decodes the answer.
type retentionSession struct {
	t  *testing.T
	st *wsstore.Store
	s  *protocol.Session
}

func newRetentionSession(t *testing.T) *retentionSession {
	st := storetest.OpenStore(t)
	return &retentionSession{t: t, st: st,
		s: protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Retention: st.Runs})}
}

// newHostSession is newRetentionSession on a store with a test clock,
// serving the host's run ops too.
func newHostSession(t *testing.T) *retentionSession {
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	return &retentionSession{t: t, st: st, s: protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal,
		Retention: st.Runs, Host: st.Runs})}
}

// ask sends l and returns whether it was ok, its result (or error) as
// JSON-decoded values, and the error code.
func (e *retentionSession) ask(l string) (map[string]any, string) {
	e.t.Helper()
	r := e.s.Handle(context.Background(), []byte(l))
	var out struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	require.NoError(e.t, json.Unmarshal([]byte(line(e.t, r)), &out))
	if out.Error != nil {
		return nil, out.Error.Code
	}
	return out.Result, ""
}

func (e *retentionSession) ok(l string) map[string]any {
	e.t.Helper()
	res, code := e.ask(l)
	require.Empty(e.t, code, "%s", l)
	return res
}

func (e *retentionSession) runIDs() []string {
	e.t.Helper()
	rs, err := e.st.Runs.Runs(context.Background(), runs.ListQuery{})
	require.NoError(e.t, err)
	ids := []string{}
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func (e *retentionSession) counts() map[string]int {
	m := map[string]int{}
	for _, tb := range []string{"chats", "runs", "events", "checkpoints", "commits", "deletions", "policies", "trees", "blobs"} {
		m[tb] = storetest.CountRows(e.t, e.st.DB, tb)
	}
	return m
}

// TestRetentionOps: policy.set, prune (dry and not) and chat.delete
// answer with what they did, and a refused request changes nothing.
func TestRetentionOps(t *testing.T) {
	e := newRetentionSession(t)
	ctx := context.Background()
	for _, id := range []string{"old", "new"} {
		e.ok(`{"op":"run.create","runId":"` + id + `","chat":{"kind":"character","stableChatId":"s1"}}`)
		e.ok(`{"op":"write","path":"output/a.md","content":"` + id + `"}`)
		e.ok(`{"op":"finish"}`)
	}
	e.ok(`{"op":"run.create","runId":"live","chat":{"kind":"character","stableChatId":"s2"}}`)
	chat1 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s1"})

	t.Run("PolicySet", func(t *testing.T) {
		res := e.ok(`{"op":"policy.set","policy":{"keepCompletedRuns":1}}`)
		assert.Equal(t, map[string]any{"scope": "*", "policy": map[string]any{"keepCompletedRuns": float64(1)}}, res)
		res = e.ok(`{"op":"policy.set","workspaceId":"` + chat1 + `","policy":{"keepFailedRuns":3}}`)
		assert.Equal(t, chat1, res["scope"])
		eff, err := e.st.Runs.EffectivePolicy(ctx, chat1)
		require.NoError(t, err)
		require.NotNil(t, eff.KeepCompletedRuns)
		assert.Equal(t, 1, *eff.KeepCompletedRuns, "inherited from the store")
		assert.Equal(t, 3, *eff.KeepFailedRuns)
	})

	t.Run("PolicySetRefused", func(t *testing.T) {
		before := e.counts()
		for l, want := range map[string]string{
			`{"op":"policy.set","policy":{"keepCompletedRuns":-1}}`:                                   "workspace.invalid_argument",
			`{"op":"policy.set","workspaceId":"` + chat1 + `","policy":{"maxStoreBytes":10}}`:         "workspace.invalid_argument",
			`{"op":"policy.set","workspaceId":"chat_0000000000000000","policy":{"keepFailedRuns":1}}`: "store.not_found",
			`{"op":"policy.set"}`: "batch.invalid_request",
			`{"op":"policy.set","policy":{"keepCompletedRun":1}}`: "batch.invalid_request",
		} {
			_, code := e.ask(l)
			assert.Equal(t, want, code, l)
		}
		assert.Equal(t, before, e.counts())
		p, err := e.st.Runs.Policy(ctx, runs.StoreScope)
		require.NoError(t, err)
		assert.Equal(t, 1, *p.KeepCompletedRuns, "the store policy is as it was")
	})

	t.Run("PruneDryRun", func(t *testing.T) {
		before := e.counts()
		res := e.ok(`{"op":"prune","dryRun":true}`)
		assert.Equal(t, true, res["dryRun"])
		rs := res["runs"].([]any)
		require.Len(t, rs, 1)
		assert.Equal(t, "old", rs[0].(map[string]any)["runId"])
		assert.Equal(t, "keepCompletedRuns", rs[0].(map[string]any)["reason"])
		assert.Equal(t, float64(1), res["runCount"])
		for _, n := range []string{"checkpointRuns", "checkpointCount", "checkpointBytes", "heldCount"} {
			assert.Equal(t, float64(0), res[n], n)
		}
		assert.Equal(t, false, res["truncated"])
		assert.Equal(t, before, e.counts(), "a dry run deletes nothing")
	})

	t.Run("Prune", func(t *testing.T) {
		res := e.ok(`{"op":"prune","workspaceId":"` + chat1 + `"}`)
		assert.Equal(t, false, res["dryRun"])
		rs := res["runs"].([]any)
		require.Len(t, rs, 1)
		assert.Equal(t, "old", rs[0].(map[string]any)["runId"])
		assert.Positive(t, rs[0].(map[string]any)["logId"])
		assert.ElementsMatch(t, []string{"new", "live"}, e.runIDs())
		ds, _, err := e.st.Runs.Deletions(ctx, 0, 0)
		require.NoError(t, err)
		require.NotEmpty(t, ds)
		assert.Equal(t, runs.DeletedRun, ds[0].Kind)
		assert.Equal(t, "old", ds[0].RunID)
		assert.Equal(t, chat1, ds[0].ChatID)
	})

	t.Run("ChatDeleteRefused", func(t *testing.T) {
		before := e.counts()
		_, code := e.ask(`{"op":"chat.delete","chats":[{"kind":"character","stableChatId":"s1"},{"kind":"character","stableChatId":"s2"}]}`)
		assert.Equal(t, "chat.active_run", code)
		_, code = e.ask(`{"op":"chat.delete","chats":[]}`)
		assert.Equal(t, "batch.invalid_request", code)
		_, code = e.ask(`{"op":"chat.delete","chats":[{"kind":"","stableChatId":"s1"}]}`)
		assert.Equal(t, "batch.invalid_request", code, "a field left out, as run.create's chat")
		assert.Equal(t, before, e.counts(), "a refused deletion changes nothing")
		assert.ElementsMatch(t, []string{"new", "live"}, e.runIDs())
	})

	t.Run("ChatDeleteForced", func(t *testing.T) {
		res := e.ok(`{"op":"chat.delete","force":true,"chats":[{"kind":"character","stableChatId":"s1"},{"kind":"character","stableChatId":"s2"},{"kind":"character","stableChatId":"never"}]}`)
		chats := res["chats"].([]any)
		require.Len(t, chats, 3)
		assert.Equal(t, []any{"new"}, chats[0].(map[string]any)["runs"])
		assert.Equal(t, []any{"live"}, chats[1].(map[string]any)["cancelled"])
		assert.Equal(t, false, chats[2].(map[string]any)["found"])
		assert.Empty(t, e.runIDs())
		assert.Zero(t, storetest.CountRows(t, e.st.DB, "chats"))
	})
	storetest.RequireSound(t, e.st)
}

// TestRetentionOpsWithoutService: a session whose backend has no
// retention service refuses the ops with store.invalid_options.
func TestRetentionOpsWithoutService(t *testing.T) {
	s := protocol.NewSession(protocol.Backend{})
	for _, l := range []string{`{"op":"prune"}`, `{"op":"policy.set","policy":{}}`, `{"op":"chat.delete","chats":[{"kind":"k","stableChatId":"s"}]}`} {
		r := s.Handle(context.Background(), []byte(l))
		require.NotNil(t, r.Error, l)
		assert.Equal(t, "store.invalid_options", string(r.Error.Code), l)
	}
}

// TestGCGraceSaturates: a graceSeconds too long for a time.Duration
// (about 292 years) is the longest grace there is, keeping every young
// unreachable row, not none of them.
func TestGCGraceSaturates(t *testing.T) {
	st := storetest.OpenStore(t)
	s := &retentionSession{t: t, st: st, s: protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Store: st})}
	s.ok(`{"op":"run.create","chat":{"kind":"character","stableChatId":"c1"},"runId":"r1","profile":{"autoCheckpoint":false}}`)
	s.ok(`{"op":"write","path":"output/a","content":"first"}`)
	s.ok(`{"op":"write","path":"output/a","content":"second"}`) // "first" is young garbage
	for _, grace := range []string{"3600", "9223372036", "9223372037", "1e300"} {
		res := s.ok(`{"op":"gc","dryRun":true,"graceSeconds":` + grace + `}`)
		freed := res["freed"].(map[string]any)
		young := res["keptYoung"].(map[string]any)
		assert.Zero(t, freed["blobs"], "graceSeconds %s frees nothing young", grace)
		assert.Positive(t, young["blobs"], "graceSeconds %s keeps it", grace)
	}
	res := s.ok(`{"op":"gc","dryRun":true,"graceSeconds":0}`)
	assert.Positive(t, res["freed"].(map[string]any)["blobs"], "no grace frees it")
}

// TestEmptyWorkspaceIDIsRefused: an empty "workspaceId" names no chat and
// is not read as absent (which means the whole store): policy.set would
// set the store's policy, prune would prune every chat. Each is refused
// with batch.invalid_request, as an empty runId is, and changes nothing.
func TestEmptyWorkspaceIDIsRefused(t *testing.T) {
	st := storetest.OpenStore(t)
	e := &retentionSession{t: t, st: st, s: protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal,
		Retention: st.Runs, Host: st.Runs})}
	e.ok(`{"op":"run.create","chat":{"kind":"character","stableChatId":"a"},"runId":"r1"}`)
	before := e.counts()
	for _, l := range []string{
		`{"op":"policy.set","workspaceId":"","policy":{"keepCompletedRuns":1}}`,
		`{"op":"prune","workspaceId":""}`,
		`{"op":"prune","workspaceId":"","dryRun":true}`,
		`{"op":"policy.get","workspaceId":""}`,
		`{"op":"policy.get","workspaceId":"","effective":true}`,
		`{"op":"runs.list","workspaceId":""}`,
		`{"op":"chat.show","workspaceId":""}`,
	} {
		_, code := e.ask(l)
		assert.Equal(t, string(protocol.CodeInvalidRequest), code, "%s", l)
	}
	assert.Equal(t, before, e.counts(), "nothing changed")
	p, err := st.Runs.Policy(context.Background(), runs.StoreScope)
	require.NoError(t, err)
	assert.Equal(t, runs.Policy{}, p, "the store's policy is as it was")

	// Left out, workspaceId still means the store.
	assert.Equal(t, "*", e.ok(`{"op":"policy.set","policy":{"keepCompletedRuns":3}}`)["scope"])
	assert.EqualValues(t, 3, e.ok(`{"op":"policy.get"}`)["policy"].(map[string]any)["keepCompletedRuns"])
	assert.NotEmpty(t, e.ok(`{"op":"prune","dryRun":true}`))
	assert.Len(t, e.ok(`{"op":"runs.list"}`)["runs"], 1)
}
