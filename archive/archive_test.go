package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func open(t testing.TB) *wsstore.Store {
	t.Helper()
	return storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: cas.Options{InlineMax: 64 << 10}})
}

func random(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// populate fills s with two chats (runs r1 and r2 in one, r3 in the other),
// files with several versions, scratch files, a large chunked file, a
// commit, and two actor spaces.
func populate(t testing.TB, s *wsstore.Store) {
	t.Helper()
	ctx := context.Background()
	mk := func(chat, id string) {
		_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: id,
			Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{"prompt":"` + id + `"}`)}})
		require.NoError(t, err)
	}
	write := func(id, p string, b []byte) {
		_, err := s.Runs.Workspace(id, runs.HostScope).Write(ctx, vfs.MustPath(p), b, vfs.WriteOptions{})
		require.NoError(t, err)
	}
	mk("c1", "r1")
	mk("c1", "r2")
	mk("c2", "r3")
	doc := "# Report\n"
	for i := range 5 {
		doc += strings.Repeat("line of the report, ", i+3) + "\n"
		write("r1", "output/main.md", []byte(doc))
	}
	write("r1", "scratch/tmp.bin", random(1, 5000))
	write("r1", "output/scratch/kept.md", []byte("a scratch/ below the top is the run's own")) // exported
	write("r1", "plan/steps.md", []byte("1. write\n2. commit\n"))
	write("r1", "output/big.bin", random(2, 300<<10))
	_, err := s.Runs.Commit(ctx, "r1", runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"messageId":"m1"}`), nil
	}), runs.CommitOptions{})
	require.NoError(t, err)
	write("r2", "output/report.md", []byte("# Other\n"))
	write("r2", "scratch/notes.txt", []byte("scratch only"))
	write("r3", "output/a.txt", []byte("a"))
	_, err = s.Runs.Workspace("r3", runs.HostScope).Delete(ctx, vfs.MustPath("output/a.txt"))
	require.NoError(t, err)
	for _, up := range []struct{ actor, path, body string }{
		{"alice", "reports/weekly.md", "week 1"},
		{"alice", "reports/weekly.md", "week 1 and 2"},
		{"alice", "notes/meeting.md", "notes"},
		{"bob", "drafts/contract-v2.md", "contract"},
	} {
		_, err := s.Actors.Upload(ctx, up.actor, up.path, strings.NewReader(up.body))
		require.NoError(t, err)
	}
	_, err = s.Actors.Delete(ctx, "alice", "notes/meeting.md")
	require.NoError(t, err)
}

// files lists every file below root by path, without a top-level
// scratch/, which an archive never holds.
func files(t testing.TB, s *wsstore.Store, root cas.Hash) map[string]cas.Hash {
	t.Helper()
	out := map[string]cas.Hash{}
	require.NoError(t, s.Trees.Walk(context.Background(), nil, root, func(p vfs.Path, e vfs.Entry) error {
		if p.String() == "scratch" {
			return fs.SkipDir
		}
		if e.Kind == vfs.KindFile {
			out[p.String()] = e.Hash
		}
		return nil
	}))
	return out
}

// runView is what a round trip must keep of a run.
type runView struct {
	Run         runs.Run
	Files       map[string]cas.Hash
	Checkpoints []checkpoint.Checkpoint
	AtEach      []map[string]cas.Hash
	Commits     []runs.CommitRecord
	Events      string
}

type storeView struct {
	Chats  map[string]runs.Chat
	Runs   map[string]runView
	Actors map[string]any
}

// view reads what the round trip compares: every file at every checkpoint
// and of every actor version, every journal event, every row.
func view(t testing.TB, s *wsstore.Store) storeView {
	t.Helper()
	ctx := context.Background()
	v := storeView{Chats: map[string]runs.Chat{}, Runs: map[string]runView{}, Actors: map[string]any{}}
	chats, _, err := s.Runs.ChatsPage(ctx, runs.ChatQuery{})
	require.NoError(t, err)
	for _, c := range chats {
		v.Chats[c.ID] = c
	}
	rs, err := s.Runs.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	for _, r := range rs {
		rv := runView{Run: r, Files: files(t, s, r.Root)}
		rv.Run.Root = cas.Hash{}
		cps, err := s.Checkpoints.List(ctx, r.ID)
		require.NoError(t, err)
		for _, c := range cps {
			rv.AtEach = append(rv.AtEach, files(t, s, c.Root))
			c.Root = cas.Hash{}
			rv.Checkpoints = append(rv.Checkpoints, c)
		}
		rv.Commits, err = s.Runs.Commits(ctx, r.ID)
		require.NoError(t, err)
		var ev bytes.Buffer
		require.NoError(t, s.Journal.Export(ctx, r.ID, &ev))
		rv.Events = ev.String()
		v.Runs[r.ID] = rv
	}
	spaces, err := s.Actors.Actors(ctx)
	require.NoError(t, err)
	for _, sp := range spaces {
		changes, err := s.Actors.Changes(ctx, sp.Actor, 0, 0)
		require.NoError(t, err)
		var versions []map[string]cas.Hash
		for _, c := range changes {
			if !c.Root.IsZero() {
				versions = append(versions, files(t, s, c.Root))
			}
		}
		v.Actors[sp.Actor] = map[string]any{"space": sp, "changes": changes, "files": files(t, s, sp.Root), "versions": versions}
	}
	return v
}

// only keeps the parts of v that scope selects.
func only(v storeView, chats, runIDs, actors []string) storeView {
	out := storeView{Chats: map[string]runs.Chat{}, Runs: map[string]runView{}, Actors: map[string]any{}}
	for _, id := range chats {
		out.Chats[id] = v.Chats[id]
	}
	for _, id := range runIDs {
		out.Runs[id] = v.Runs[id]
	}
	for _, a := range actors {
		out.Actors[a] = v.Actors[a]
	}
	return out
}

func export(t testing.TB, s *wsstore.Store, scope archive.Scope) ([]byte, archive.Summary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := s.Archive.Export(context.Background(), &buf, scope, archive.Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(buf.Len()), sum.ArchiveBytes)
	return buf.Bytes(), sum
}

// eachSpill runs fn with the sets of exports and imports in memory, then
// with them on disk from the first address.
func eachSpill(t *testing.T, fn func(t *testing.T)) {
	t.Run("InMemory", fn)
	t.Run("OnDisk", func(t *testing.T) {
		defer archive.SetSpillAfter(1)()
		fn(t)
	})
}

func TestRoundTrip(t *testing.T) { eachSpill(t, testRoundTrip) }

func testRoundTrip(t *testing.T) {
	src := open(t)
	populate(t, src)
	all := view(t, src)
	chat1 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "c1"})
	chat2 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "c2"})
	for _, tc := range []struct {
		name  string
		scope archive.Scope
		want  storeView
	}{
		{"Run", archive.Scope{Runs: []string{"r1"}}, only(all, []string{chat1}, []string{"r1"}, nil)},
		{"Chat", archive.Scope{Chats: []string{chat1}}, only(all, []string{chat1}, []string{"r1", "r2"}, nil)},
		{"Actor", archive.Scope{Actors: []string{"alice"}}, only(all, nil, nil, []string{"alice"})},
		{"Store", archive.Scope{All: true}, only(all, []string{chat1, chat2}, []string{"r1", "r2", "r3"}, []string{"alice", "bob"})},
		{"StoreSkipWorkspace", archive.Scope{All: true, SkipWorkspace: true}, only(all, []string{chat1, chat2}, []string{"r1", "r2", "r3"}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arc, sum := export(t, src, tc.scope)
			assert.Equal(t, len(tc.want.Runs), sum.Runs)
			assert.NotContains(t, string(arc), "scratch only", "scratch is never exported")
			dst := open(t)
			got, err := dst.Archive.Import(context.Background(), bytes.NewReader(arc), archive.Options{})
			require.NoError(t, err)
			assert.Empty(t, got.Conflicts)
			assert.Equal(t, sum.Objects, got.Objects)
			assert.Equal(t, sum.Bytes, got.Bytes)
			assert.Equal(t, tc.want, view(t, dst))

			// Importing again adds nothing.
			again, err := dst.Archive.Import(context.Background(), bytes.NewReader(arc), archive.Options{})
			require.NoError(t, err)
			assert.Empty(t, again.Added)
			assert.Empty(t, again.Conflicts)
			assert.Zero(t, again.NewObjects)
			assert.Equal(t, tc.want, view(t, dst))

			// The imported store exports the same archive content.
			arc2, sum2 := export(t, dst, tc.scope)
			assert.Equal(t, sum.Objects, sum2.Objects)
			assert.Equal(t, len(arc), len(arc2))
		})
	}
}

func TestImportReportsConflicts(t *testing.T) {
	ctx := context.Background()
	src := open(t)
	populate(t, src)
	arc, _ := export(t, src, archive.Scope{All: true})
	dst := open(t)
	_, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
	require.NoError(t, err)
	_, err = dst.Runs.Workspace("r2", runs.HostScope).Write(ctx, vfs.MustPath("output/local.md"), []byte("local"), vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = dst.Actors.Upload(ctx, "bob", "drafts/local.md", strings.NewReader("local"))
	require.NoError(t, err)
	before := view(t, dst)

	sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
	require.NoError(t, err)
	var ids []string
	for _, c := range sum.Conflicts {
		ids = append(ids, c.Kind+" "+c.ID)
	}
	assert.ElementsMatch(t, []string{"run r2", "actor bob"}, ids)
	assert.Empty(t, sum.Added)
	assert.Equal(t, before, view(t, dst), "a conflict overwrites nothing")
}

// TestImportSummaryListsAreAlwaysThere: an import's JSON always carries
// added, unchanged and conflicts, as lists (empty when nothing is in one),
// so a host can read them without testing for the key; an export's carries
// none of them.
func TestImportSummaryListsAreAlwaysThere(t *testing.T) {
	ctx := context.Background()
	src := open(t)
	populate(t, src)
	arc, exported := export(t, src, archive.Scope{All: true})
	b, err := json.Marshal(exported)
	require.NoError(t, err)
	for _, key := range []string{`"added"`, `"unchanged"`, `"conflicts"`} {
		assert.NotContains(t, string(b), key, "an export's summary")
	}
	dst := open(t)
	for _, want := range []map[string]int{
		{"added": 1, "unchanged": 0, "conflicts": 0}, // first import: all new
		{"added": 0, "unchanged": 1, "conflicts": 0}, // again: all held
	} {
		sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
		require.NoError(t, err)
		b, err := json.Marshal(sum)
		require.NoError(t, err)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &m))
		for key, nonEmpty := range want {
			var list []json.RawMessage
			require.Contains(t, m, key, "%s", b)
			require.NoError(t, json.Unmarshal(m[key], &list))
			require.NotNil(t, list, "%s is a list, not null: %s", key, b)
			assert.Equal(t, nonEmpty == 1, len(list) > 0, "%s: %s", key, b)
		}
	}
}

// TestExportRefusesEmptyScopes: a scope that selects nothing, or names a
// run's tail from a negative seq, is workspace.invalid_argument.
func TestExportRefusesEmptyScopes(t *testing.T) {
	s := open(t)
	populate(t, s)
	for name, scope := range map[string]archive.Scope{
		"Nothing":              {},
		"ActorSkipWorkspace":   {Actors: []string{"alice"}, SkipWorkspace: true},
		"SkipWorkspaceNoChats": {All: true, SkipWorkspace: true},
		"NegativeFrom":         {Runs: []string{"r1"}, From: map[string]int64{"r1": -1}},
		"AllAndRuns":           {All: true, Runs: []string{"r1"}},
		"AllAndActors":         {All: true, Actors: []string{"alice"}},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "SkipWorkspaceNoChats" {
				e := open(t)
				_, err := e.Actors.Upload(context.Background(), "bob", "a.md", strings.NewReader("a"))
				require.NoError(t, err)
				_, err = e.Archive.Export(context.Background(), &bytes.Buffer{}, scope, archive.Options{})
				assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
				return
			}
			_, err := s.Archive.Export(context.Background(), &bytes.Buffer{}, scope, archive.Options{})
			assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
		})
	}
	_, err := s.Archive.Export(context.Background(), &bytes.Buffer{}, archive.Scope{Runs: []string{"nope"}}, archive.Options{})
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "%v", err)
}

// TestNilStreams: a nil writer or reader is workspace.invalid_argument,
// not a panic.
func TestNilStreams(t *testing.T) {
	s := open(t)
	_, err := s.Archive.Export(context.Background(), nil, archive.Scope{All: true}, archive.Options{})
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	_, err = s.Archive.Import(context.Background(), nil, archive.Options{})
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
}

// TestImportedRunFinishesOntoTheLocalPersistLayer: a run imported beside a
// chat whose persist layer differs (the same version promoted from another
// root) started from a base this store's chat never held. Finishing it
// merges its persist changes into the local layer rather than replacing
// the layer with the base it started from: the local promotion stays.
func TestImportedRunFinishesOntoTheLocalPersistLayer(t *testing.T) {
	ctx := context.Background()
	write := func(s *wsstore.Store, id, p, body string) {
		t.Helper()
		_, err := s.Runs.Workspace(id, runs.HostScope).Write(ctx, vfs.MustPath(p), []byte(body), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	create := func(s *wsstore.Store, id string) {
		t.Helper()
		_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "qc"}, RunID: id})
		require.NoError(t, err)
	}
	finish := func(s *wsstore.Store, id string) runs.FinishResult {
		t.Helper()
		res, err := s.Runs.Finish(ctx, id)
		require.NoError(t, err)
		return res
	}
	src := open(t)
	create(src, "q1")
	write(src, "q1", "persist/a.md", "from the source")
	finish(src, "q1")
	create(src, "q3")
	write(src, "q3", "persist/b.md", "the imported run's file")
	arc, _ := export(t, src, archive.Scope{Runs: []string{"q3"}})

	dst := open(t)
	create(dst, "q2")
	write(dst, "q2", "persist/important.md", "promoted here")
	finish(dst, "q2")
	sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
	require.NoError(t, err)
	require.Len(t, sum.Conflicts, 1, "the chat's persist layers differ")

	res := finish(dst, "q3")
	assert.True(t, res.Merged, "the run started from a root this chat's layer is not")
	create(dst, "q4")
	infos, err := dst.Runs.Workspace("q4", runs.HostScope).List(ctx, vfs.MustPath("persist"), 1)
	require.NoError(t, err)
	var got []string
	for _, fi := range infos {
		got = append(got, fi.Path.String())
	}
	assert.Equal(t, []string{"persist/b.md", "persist/important.md"}, got,
		"the local promotion stays and the run's change joins it")
}

// endingReader yields r's first n bytes, then ends ctx and fails, as a
// network body does when the request it belongs to is cancelled.
type endingReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (e *endingReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		e.cancel()
		return 0, errors.New("connection closed")
	}
	if len(p) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= n
	return n, err
}

// TestImportEndedAsItReadsIsCoded: an import whose context ends while its
// archive is read fails with store.canceled, not the bare context error,
// and makes nothing visible.
func TestImportEndedAsItReadsIsCoded(t *testing.T) {
	src := open(t)
	populate(t, src)
	var arc bytes.Buffer
	_, err := src.Archive.Export(context.Background(), &arc, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	for _, at := range []int{600, arc.Len() / 2} {
		dst := open(t)
		ctx, cancel := context.WithCancel(context.Background())
		_, err = dst.Archive.Import(ctx, &endingReader{r: bytes.NewReader(arc.Bytes()), n: at, cancel: cancel}, archive.Options{})
		cancel()
		_, coded := errors.AsType[*wserr.Error](err)
		assert.True(t, coded, "at %d: store.canceled, not a bare context error: %v", at, err)
		assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "at %d: %v", at, err)
		list, err := dst.Runs.Runs(context.Background(), runs.ListQuery{})
		require.NoError(t, err)
		assert.Empty(t, list)
	}
}

// TestCheckExportAgreesWithExport: CheckExport fails, or not, with the
// code Export does for the same scope, without writing anything.
func TestCheckExportAgreesWithExport(t *testing.T) {
	s := open(t)
	populate(t, s)
	empty := open(t)
	actorOnly := open(t)
	_, err := actorOnly.Actors.Upload(context.Background(), "bob", "a.md", strings.NewReader("a"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		st    *wsstore.Store
		scope archive.Scope
	}{
		{"Run", s, archive.Scope{Runs: []string{"r1"}}},
		{"ChatByKey", s, archive.Scope{Chats: []string{"character:c2"}}},
		{"Actor", s, archive.Scope{Actors: []string{"alice"}}},
		{"All", s, archive.Scope{All: true}},
		{"AllActorsOnly", actorOnly, archive.Scope{All: true}},
		{"ErrNothing", s, archive.Scope{}},
		{"ErrAllAndRuns", s, archive.Scope{All: true, Runs: []string{"r1"}}},
		{"ErrNegativeFrom", s, archive.Scope{Runs: []string{"r1"}, From: map[string]int64{"r1": -1}}},
		{"ErrRunNotFound", s, archive.Scope{Runs: []string{"r1", "nope"}}},
		{"ErrChatNotFound", s, archive.Scope{Chats: []string{"character:nope"}}},
		{"ErrActorNotFound", s, archive.Scope{Actors: []string{"alice", "nobody"}}},
		{"ErrInvalidActor", s, archive.Scope{Actors: []string{".."}}},
		{"ErrAllOfNothing", empty, archive.Scope{All: true}},
		{"ErrSkipWorkspaceNoChats", actorOnly, archive.Scope{All: true, SkipWorkspace: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked := tc.st.Archive.CheckExport(context.Background(), tc.scope)
			_, exported := tc.st.Archive.Export(context.Background(), io.Discard, tc.scope, archive.Options{})
			assert.Equal(t, wserr.CodeOf(exported), wserr.CodeOf(checked), "export: %v; check: %v", exported, checked)
			assert.Equal(t, strings.HasPrefix(tc.name, "Err"), checked != nil, "%v", checked)
		})
	}
}

// TestImportNamesAThousand: an import's summary names the first
// archive.MaxNames of what it added, and of what it held already, in the
// archive's order, and counts them all; Options.Taken sees every one.
func TestImportNamesAThousand(t *testing.T) {
	ctx := context.Background()
	src := open(t)
	n := archive.MaxNames + 5
	for i := range n {
		_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
			RunID: fmt.Sprintf("r-%06d", i)})
		require.NoError(t, err)
	}
	arc, _ := export(t, src, archive.Scope{All: true})
	dst := open(t)
	var taken []string
	opt := archive.Options{Taken: func(o archive.Outcome, name string, _ archive.Conflict) error {
		taken = append(taken, string(o)+" "+name)
		return nil
	}}
	sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), opt)
	require.NoError(t, err)
	assert.Equal(t, n+1, sum.AddedCount, "the chat and its runs")
	require.Len(t, sum.Added, archive.MaxNames)
	assert.True(t, strings.HasPrefix(sum.Added[0], "chat "), sum.Added[0])
	assert.Equal(t, "run r-000000", sum.Added[1])
	assert.Equal(t, fmt.Sprintf("run r-%06d", archive.MaxNames-2), sum.Added[archive.MaxNames-1])
	require.Len(t, taken, n+1)
	assert.Equal(t, "added "+sum.Added[0], taken[0])
	assert.Equal(t, fmt.Sprintf("added run r-%06d", n-1), taken[n])
	assert.Zero(t, sum.UnchangedCount)

	taken = nil
	opt.Merge = true
	sum, err = dst.Archive.Import(ctx, bytes.NewReader(arc), opt)
	require.NoError(t, err)
	assert.Equal(t, n+1, sum.UnchangedCount)
	require.Len(t, sum.Unchanged, archive.MaxNames)
	assert.Empty(t, sum.Added)
	assert.Zero(t, sum.AddedCount)
	require.Len(t, taken, n+1)
	assert.Equal(t, fmt.Sprintf("unchanged run r-%06d", n-1), taken[n])
	b, err := json.Marshal(sum)
	require.NoError(t, err)
	assert.Contains(t, string(b), fmt.Sprintf(`"unchangedCount":%d`, n+1))
	assert.NotContains(t, string(b), `"addedCount"`, "a count of none is left out")
}

// TestImportTakenFailing: an import whose Options.Taken fails, at each of
// its calls in turn, fails with that error and imports nothing.
func TestImportTakenFailing(t *testing.T) {
	ctx := context.Background()
	src := open(t)
	populate(t, src)
	arc, exported := export(t, src, archive.Scope{All: true})
	total := exported.Chats + exported.Runs + exported.Actors
	for k := 1; k <= total; k++ {
		dst := open(t)
		calls := 0
		injected := errors.New("injected failure")
		_, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{Taken: func(archive.Outcome, string, archive.Conflict) error {
			if calls++; calls == k {
				return injected
			}
			return nil
		}})
		require.ErrorIs(t, err, injected, "call %d", k)
		assert.Equal(t, view(t, open(t)), view(t, dst), "call %d: nothing imported", k)
		sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
		require.NoError(t, err)
		assert.Equal(t, total, sum.AddedCount, "call %d: all of it imported after", k)
	}
}
