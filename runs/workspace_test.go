package runs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/vfs/vfstest"
	"github.com/wsstore/wsstore/wserr"
)

// wsEnv is a throwaway store (verified when the test ends, see storetest)
// with a run service on a fake clock.
type wsEnv struct {
	tb    testing.TB
	ctx   context.Context
	st    *wsstore.Store
	clock *storetest.Clock
	svc   *runs.Service
	db    *index.DB
}

func newWSEnv(tb testing.TB, opts runs.Options) *wsEnv {
	tb.Helper()
	st, clock := openStore(tb, opts)
	return &wsEnv{tb: tb, ctx: context.Background(), st: st, clock: clock, svc: st.Runs, db: st.DB}
}

// testChat is the chat every run of these tests belongs to unless it names
// another.
var testChat = runs.ChatKey{Kind: "character", StableChatID: "stable-chat-1"}

// newRun creates run id; a zero req.Chat means testChat.
func (e *wsEnv) newRun(id string, req runs.CreateRequest) runs.Run {
	e.tb.Helper()
	if req.Chat == (runs.ChatKey{}) {
		req.Chat = testChat
	}
	req.RunID = id
	r, err := e.svc.CreateRun(e.ctx, req)
	require.NoError(e.tb, err)
	return r
}

func (e *wsEnv) model(runID string) *runs.Workspace { return e.svc.Workspace(runID, runs.ModelScope) }
func (e *wsEnv) host(runID string) *runs.Workspace  { return e.svc.Workspace(runID, runs.HostScope) }

// write writes content at path in the model's view and fails the test on
// error.
func (e *wsEnv) write(runID, path, content string) vfs.FileInfo {
	e.tb.Helper()
	fi, err := e.model(runID).Write(e.ctx, vfs.MustPath(path), []byte(content), vfs.WriteOptions{})
	require.NoError(e.tb, err, "write %s", path)
	return fi
}

func (e *wsEnv) read(ws *runs.Workspace, path string) string {
	e.tb.Helper()
	res, err := ws.Read(e.ctx, vfs.MustPath(path), vfs.ReadOptions{})
	require.NoError(e.tb, err, "read %s", path)
	return string(res.Content)
}

func (e *wsEnv) run(id string) runs.Run {
	e.tb.Helper()
	r, err := e.svc.Run(e.ctx, id)
	require.NoError(e.tb, err)
	return r
}

func (e *wsEnv) rows(table string) int {
	e.tb.Helper()
	return storetest.CountRows(e.tb, e.db, table)
}

// runState is everything about a run that a failed operation must leave
// as it was, with the store-wide row counts that would betray a partial
// write.
type runState struct {
	Root           cas.Hash
	Status         runs.Status
	HeadCheckpoint int64
	UpdatedAt      time.Time
	LastSeq        int64
	Checkpoints    int64
	Trees, Blobs   int
	Events, Runs   int
	Chats          int
}

func (e *wsEnv) state(runID string) runState {
	e.tb.Helper()
	r := e.run(runID)
	last, err := e.st.Journal.Last(e.ctx, nil, runID)
	require.NoError(e.tb, err)
	cps, err := e.st.Checkpoints.Count(e.ctx, nil, runID)
	require.NoError(e.tb, err)
	return runState{Root: r.Root, Status: r.Status, HeadCheckpoint: r.HeadCheckpoint, UpdatedAt: r.UpdatedAt,
		LastSeq: last, Checkpoints: cps, Trees: e.rows("trees"), Blobs: e.rows("blobs"),
		Events: e.rows("events"), Runs: e.rows("runs"), Chats: e.rows("chats")}
}

// requireModelError checks that err is a model-correctable *wserr.Error
// with code, reachable with errors.As and errors.Is, and returns it.
func requireModelError(tb testing.TB, err error, code wserr.Code) *wserr.Error {
	tb.Helper()
	require.Error(tb, err, "want %s", code)
	var we *wserr.Error
	require.ErrorAs(tb, err, &we, "error %v is not a *wserr.Error", err)
	require.Equal(tb, code, we.Code, "error: %v", err)
	assert.True(tb, we.Code.ModelCorrectable(), "%s is model-correctable", code)
	assert.ErrorIs(tb, err, &wserr.Error{Code: code})
	return we
}

// requireHostError checks that err carries code and is not
// model-correctable.
func requireHostError(tb testing.TB, err error, code wserr.Code) {
	tb.Helper()
	require.Error(tb, err, "want %s", code)
	require.Equal(tb, code, wserr.CodeOf(err), "error: %v", err)
	assert.False(tb, wserr.CodeOf(err).ModelCorrectable(), "%s is a host-level error", code)
}

// toolPath is what an agent tool does with a path argument: parse it at
// the boundary, so no operation ever sees an invalid path.
func toolPath(raw string) (vfs.Path, error) { return vfs.ParsePath(raw) }

// seedBadPaths are the forbidden paths of seed 000 §4.
var seedBadPaths = []string{
	"../secrets.json",
	"/Users/me/file",
	`C:\Users\me\file`,
	"output/../../chat.jsonl",
	"scratch/\x00bad",
}

// mountTestVirtual mounts the virtual resources the tests use: a static
// skills/ directory and a generated chat/history.tail.md whose content
// changes on every read. reads counts the generator's calls.
func mountTestVirtual(tb testing.TB, reads *atomic.Int64) *vfs.Virtual {
	tb.Helper()
	v := vfs.NewVirtual()
	skills, err := vfs.NewStaticProvider(map[string][]byte{
		"lore/SKILL.md":      []byte("# Lore\nDragons guard the northern pass.\n"),
		"romance/SKILL.md":   []byte("# Romance\nSlow burn, no dragons.\n"),
		"romance/example.md": []byte("她慢慢地笑了。\n"),
	})
	require.NoError(tb, err)
	require.NoError(tb, v.Mount(vfs.MustPath("skills"), skills))
	require.NoError(tb, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(ctx context.Context) ([]byte, error) {
		n := reads.Add(1)
		return fmt.Appendf(nil, "User: hello\nBot: hi (read %d)\n", n), nil
	})))
	return v
}

// errorFixture is a store with runs in the shapes the error-code tests
// need.
type errorFixture struct {
	*wsEnv
	main, notes, capped string
	checkpointSeq       int64
}

func newErrorFixture(t *testing.T) *errorFixture {
	t.Helper()
	var reads atomic.Int64
	e := newWSEnv(t, runs.Options{Virtual: mountTestVirtual(t, &reads)})
	f := &errorFixture{wsEnv: e, main: "run_main", notes: "run_notes", capped: "run_capped"}
	e.newRun(f.main, runs.CreateRequest{Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{"messages":[]}`)}})
	e.write(f.main, "output/main.md", "hello world\nsecond line\n")
	e.write(f.main, "output/dup.md", "dup dup\n")
	e.write(f.main, "output/sub/x.md", "x")
	e.write(f.main, "output/bin.dat", "\x00\x01\xff")
	f.checkpointSeq = e.run(f.main).HeadCheckpoint
	e.newRun(f.notes, runs.CreateRequest{Profile: &runs.Profile{ID: "reader",
		VisibleRoots: []string{"output", "notes"}, WritableRoots: []string{"output"}}})
	e.newRun(f.capped, runs.CreateRequest{Profile: &runs.Profile{ID: "capped", MaxRunBytes: 1000}})
	e.write(f.capped, "output/main.md", "small")
	return f
}

// TestWorkspaceErrors proves every workspace error code: each failing
// operation returns a model-correctable *wserr.Error with its code and
// changes nothing (root, status, journal, checkpoints, and no stray tree,
// blob, event, run or chat row).
func TestWorkspaceErrors(t *testing.T) {
	f := newErrorFixture(t)
	ctx := f.ctx
	P := vfs.MustPath
	model, host := f.model(f.main), f.host(f.main)
	stale := cas.Sum([]byte("a version nobody read"))
	hello := cas.Sum([]byte("hello world\nsecond line\n"))

	type tc struct {
		name string
		run  string // the run whose state must not change; default f.main
		code wserr.Code
		op   func() error
	}
	var cases []tc
	for _, raw := range seedBadPaths {
		cases = append(cases,
			tc{name: "ErrInvalidPath/write/" + raw, code: wserr.InvalidPath, op: func() error {
				p, err := toolPath(raw)
				if err != nil {
					return err
				}
				_, err = model.Write(ctx, p, []byte("x"), vfs.WriteOptions{})
				return err
			}},
			tc{name: "ErrInvalidPath/read/" + raw, code: wserr.InvalidPath, op: func() error {
				p, err := toolPath(raw)
				if err != nil {
					return err
				}
				_, err = host.Read(ctx, p, vfs.ReadOptions{})
				return err
			}})
	}
	cases = append(cases, []tc{
		{name: "ErrPathNotVisible/readInput", code: wserr.PathNotVisible, op: func() error {
			_, err := model.Read(ctx, P("input/prompt_snapshot.json"), vfs.ReadOptions{})
			return err
		}},
		{name: "ErrPathNotVisible/statInput", code: wserr.PathNotVisible, op: func() error {
			_, err := model.Stat(ctx, P("input"))
			return err
		}},
		{name: "ErrPathNotVisible/listInput", code: wserr.PathNotVisible, op: func() error {
			_, err := model.List(ctx, P("input"), 1)
			return err
		}},
		{name: "ErrPathNotVisible/searchInput", code: wserr.PathNotVisible, op: func() error {
			_, err := hitsOf(model.Search(ctx, "messages", vfs.SearchOptions{Path: P("input")}))
			return err
		}},
		{name: "ErrPathNotVisible/writeInput", code: wserr.PathNotVisible, op: func() error {
			_, err := model.Write(ctx, P("input/prompt_snapshot.json"), []byte("{}"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathNotVisible/runtimeFile", code: wserr.PathNotVisible, op: func() error {
			_, err := model.Read(ctx, P("tool-results/call_1.json"), vfs.ReadOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/inputHostScope", code: wserr.PathNotWritable, op: func() error {
			_, err := host.Write(ctx, P("input/prompt_snapshot.json"), []byte("{}"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/newInputHostScope", code: wserr.PathNotWritable, op: func() error {
			_, err := host.Write(ctx, P("input/extra.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/patchInputHostScope", code: wserr.PathNotWritable, op: func() error {
			_, err := host.Patch(ctx, P("input/prompt_snapshot.json"), "messages", "msgs", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/removeInputHostScope", code: wserr.PathNotWritable, op: func() error {
			return host.Remove(ctx, P("input/persist_snapshot.json"))
		}},
		{name: "ErrPathNotWritable/rootNotWritable", run: f.notes, code: wserr.PathNotWritable, op: func() error {
			_, err := f.model(f.notes).Write(ctx, P("notes/a.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/topLevelFile", code: wserr.PathNotWritable, op: func() error {
			_, err := host.Write(ctx, P("main.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/rootItselfAsFile", code: wserr.PathNotWritable, op: func() error {
			_, err := model.Write(ctx, P("output"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathNotWritable/removeRoot", code: wserr.PathNotWritable, op: func() error {
			return model.Remove(ctx, P("output"))
		}},
		{name: "ErrPathNotWritable/checkpointView", code: wserr.PathNotWritable, op: func() error {
			_, err := f.svc.WorkspaceAt(f.main, f.checkpointSeq, runs.ModelScope).Write(ctx, P("output/main.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrFileNotFound/read", code: wserr.FileNotFound, op: func() error {
			_, err := model.Read(ctx, P("output/missing.md"), vfs.ReadOptions{})
			return err
		}},
		{name: "ErrFileNotFound/stat", code: wserr.FileNotFound, op: func() error {
			_, err := model.Stat(ctx, P("output/missing.md"))
			return err
		}},
		{name: "ErrFileNotFound/list", code: wserr.FileNotFound, op: func() error {
			_, err := model.List(ctx, P("output/nope"), 1)
			return err
		}},
		{name: "ErrFileNotFound/belowFile", code: wserr.FileNotFound, op: func() error {
			_, err := model.Read(ctx, P("output/main.md/x"), vfs.ReadOptions{})
			return err
		}},
		{name: "ErrFileNotFound/patch", code: wserr.FileNotFound, op: func() error {
			_, err := model.Patch(ctx, P("output/missing.md"), "a", "b", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrFileNotFound/remove", code: wserr.FileNotFound, op: func() error {
			return model.Remove(ctx, P("output/missing.md"))
		}},
		{name: "ErrPathIsDirectory/read", code: wserr.PathIsDirectory, op: func() error {
			_, err := model.Read(ctx, P("output/sub"), vfs.ReadOptions{})
			return err
		}},
		{name: "ErrPathIsDirectory/readRoot", code: wserr.PathIsDirectory, op: func() error {
			_, err := model.Read(ctx, vfs.Root(), vfs.ReadOptions{})
			return err
		}},
		{name: "ErrPathIsDirectory/write", code: wserr.PathIsDirectory, op: func() error {
			_, err := model.Write(ctx, P("output/sub"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathIsDirectory/writeRoot", code: wserr.PathIsDirectory, op: func() error {
			_, err := model.Write(ctx, vfs.Root(), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPathIsDirectory/patch", code: wserr.PathIsDirectory, op: func() error {
			_, err := model.Patch(ctx, P("output/sub"), "a", "b", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrPathIsDirectory/remove", code: wserr.PathIsDirectory, op: func() error {
			return model.Remove(ctx, P("output/sub"))
		}},
		{name: "ErrNotADirectory/writeBelowFile", code: wserr.NotADirectory, op: func() error {
			_, err := model.Write(ctx, P("output/main.md/child.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrPatchOldStringNotFound", code: wserr.PatchOldStringNotFound, op: func() error {
			_, err := model.Patch(ctx, P("output/main.md"), "goodbye", "bye", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrPatchOldStringNotUnique", code: wserr.PatchOldStringNotUnique, op: func() error {
			_, err := model.Patch(ctx, P("output/dup.md"), "dup", "one", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrPatchNoChange", code: wserr.PatchNoChange, op: func() error {
			_, err := model.Patch(ctx, P("output/main.md"), "hello", "hello", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrPatchEmptyOldString", code: wserr.PatchEmptyOldString, op: func() error {
			_, err := model.Patch(ctx, P("output/main.md"), "", "x", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrWriteStaleFile/write", code: wserr.WriteStaleFile, op: func() error {
			_, err := model.Write(ctx, P("output/main.md"), []byte("lost update"), vfs.WriteOptions{ExpectedHash: stale})
			return err
		}},
		{name: "ErrWriteStaleFile/append", code: wserr.WriteStaleFile, op: func() error {
			_, err := model.Write(ctx, P("output/main.md"), []byte("more"), vfs.WriteOptions{Mode: vfs.Append, ExpectedHash: stale})
			return err
		}},
		{name: "ErrWriteStaleFile/patch", code: wserr.WriteStaleFile, op: func() error {
			_, err := model.Patch(ctx, P("output/main.md"), "hello", "bye", vfs.PatchOptions{ExpectedHash: stale})
			return err
		}},
		{name: "ErrWriteStaleFile/missingFile", code: wserr.WriteStaleFile, op: func() error {
			_, err := model.Write(ctx, P("output/new.md"), []byte("x"), vfs.WriteOptions{ExpectedHash: hello})
			return err
		}},
		{name: "ErrInvalidLineRange/pastEnd", code: wserr.InvalidLineRange, op: func() error {
			_, err := model.Read(ctx, P("output/main.md"), vfs.ReadOptions{StartLine: 3})
			return err
		}},
		{name: "ErrInvalidLineRange/reversed", code: wserr.InvalidLineRange, op: func() error {
			_, err := model.Read(ctx, P("output/main.md"), vfs.ReadOptions{StartLine: 2, EndLine: 1})
			return err
		}},
		{name: "ErrInvalidCharRange/pastEnd", code: wserr.InvalidCharRange, op: func() error {
			_, err := model.Read(ctx, P("output/main.md"), vfs.ReadOptions{StartChar: 1000})
			return err
		}},
		{name: "ErrInvalidCharRange/negative", code: wserr.InvalidCharRange, op: func() error {
			_, err := model.Read(ctx, P("output/main.md"), vfs.ReadOptions{StartChar: -1})
			return err
		}},
		{name: "ErrReadOnlyResource/writeStatic", code: wserr.ReadOnlyResource, op: func() error {
			_, err := model.Write(ctx, P("skills/lore/SKILL.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrReadOnlyResource/newFileInMount", code: wserr.ReadOnlyResource, op: func() error {
			_, err := host.Write(ctx, P("skills/new/SKILL.md"), []byte("x"), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrReadOnlyResource/patchGenerated", code: wserr.ReadOnlyResource, op: func() error {
			_, err := model.Patch(ctx, P("chat/history.tail.md"), "hello", "bye", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrReadOnlyResource/remove", code: wserr.ReadOnlyResource, op: func() error {
			return model.Remove(ctx, P("skills/lore/SKILL.md"))
		}},
		{name: "ErrSizeLimitExceeded/write", run: f.capped, code: wserr.SizeLimitExceeded, op: func() error {
			_, err := f.model(f.capped).Write(ctx, P("output/big.md"), []byte(strings.Repeat("x", 1000)), vfs.WriteOptions{})
			return err
		}},
		{name: "ErrSizeLimitExceeded/append", run: f.capped, code: wserr.SizeLimitExceeded, op: func() error {
			_, err := f.model(f.capped).Write(ctx, P("output/main.md"), []byte(strings.Repeat("x", 1000)), vfs.WriteOptions{Mode: vfs.Append})
			return err
		}},
		{name: "ErrNotText/patchBinary", code: wserr.NotText, op: func() error {
			_, err := model.Patch(ctx, P("output/bin.dat"), "\x01", "\x02", vfs.PatchOptions{})
			return err
		}},
		{name: "ErrNotText/readLinesOfBinary", code: wserr.NotText, op: func() error {
			_, err := model.Read(ctx, P("output/bin.dat"), vfs.ReadOptions{StartLine: 1})
			return err
		}},
		{name: "ErrInvalidArgument/writeMode", code: wserr.InvalidArgument, op: func() error {
			_, err := model.Write(ctx, P("output/main.md"), []byte("x"), vfs.WriteOptions{Mode: "insert"})
			return err
		}},
		{name: "ErrInvalidArgument/bothRanges", code: wserr.InvalidArgument, op: func() error {
			_, err := model.Read(ctx, P("output/main.md"), vfs.ReadOptions{StartLine: 1, StartChar: 1})
			return err
		}},
		{name: "ErrInvalidArgument/emptyQuery", code: wserr.InvalidArgument, op: func() error {
			_, err := hitsOf(model.Search(ctx, " ,.; ", vfs.SearchOptions{}))
			return err
		}},
	}...)

	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			runID := tt.run
			if runID == "" {
				runID = f.main
			}
			before := f.state(runID)
			err := tt.op()
			requireModelError(t, err, tt.code)
			assert.NotEmpty(t, wserr.MessageOf(err), "the model gets a sentence to act on")
			assert.Equal(t, before, f.state(runID), "a failed operation changes nothing")
		})
	}

	t.Run("EveryModelCodeCovered", func(t *testing.T) {
		seen := map[wserr.Code]bool{}
		for _, tt := range cases {
			seen[tt.code] = true
		}
		for _, c := range []wserr.Code{
			wserr.InvalidPath, wserr.PathNotVisible, wserr.PathNotWritable, wserr.FileNotFound,
			wserr.PathIsDirectory, wserr.NotADirectory, wserr.PatchOldStringNotFound,
			wserr.PatchOldStringNotUnique, wserr.PatchNoChange, wserr.PatchEmptyOldString,
			wserr.WriteStaleFile, wserr.InvalidLineRange, wserr.InvalidCharRange,
			wserr.ReadOnlyResource, wserr.NotText, wserr.InvalidArgument, wserr.SizeLimitExceeded,
		} {
			assert.True(t, seen[c], "no case for %s", c)
		}
	})

	t.Run("WritesStillWorkAfterwards", func(t *testing.T) {
		fi, err := model.Write(ctx, P("output/main.md"), []byte("bye"), vfs.WriteOptions{ExpectedHash: hello})
		require.NoError(t, err)
		assert.Equal(t, cas.Sum([]byte("bye")), fi.Hash)
	})
}

// TestWorkspaceInvalidPathChangesNothing proves the seed's forbidden paths
// are refused by vfs.ParsePath, each with a message, and that a run whose
// inputs name one is not created: no run, no chat, no rows.
func TestWorkspaceInvalidPathChangesNothing(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	for _, raw := range seedBadPaths {
		t.Run(fmt.Sprintf("%q", raw), func(t *testing.T) {
			_, err := vfs.ParsePath(raw)
			we := requireModelError(t, err, wserr.InvalidPath)
			assert.NotEmpty(t, we.Msg)

			trees, blobs, runsN, chats, events := e.rows("trees"), e.rows("blobs"), e.rows("runs"), e.rows("chats"), e.rows("events")
			_, err = e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: testChat, RunID: "run_bad",
				Inputs: map[string][]byte{"prompt_snapshot.json": []byte("{}"), raw: []byte("x")}})
			requireModelError(t, err, wserr.InvalidPath)
			assert.Equal(t, []int{trees, blobs, runsN, chats, events},
				[]int{e.rows("trees"), e.rows("blobs"), e.rows("runs"), e.rows("chats"), e.rows("events")})
		})
	}
}

// TestWorkspaceSizeLimit proves MaxRunBytes refuses exactly the write that
// would cross it, and never a write that shrinks the workspace: a run whose
// inputs or persist projection already exceed the cap can still delete and
// shrink files.
func TestWorkspaceSizeLimit(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	P := vfs.MustPath

	e.newRun("run_probe", runs.CreateRequest{})
	base := e.run("run_probe").Root
	baseEntry, err := e.st.Trees.Lookup(ctx, nil, base, vfs.Root())
	require.NoError(t, err)

	t.Run("UpToTheCap", func(t *testing.T) {
		// The cap counts what the run adds, not its input/.
		e.newRun("run_cap", runs.CreateRequest{Profile: &runs.Profile{MaxRunBytes: 100}})
		ws := e.model("run_cap")
		_, err := ws.Write(ctx, P("output/main.md"), []byte(strings.Repeat("a", 100)), vfs.WriteOptions{})
		require.NoError(t, err, "a write that reaches the cap exactly is allowed")
		before := e.state("run_cap")
		_, err = ws.Write(ctx, P("output/more.md"), []byte("b"), vfs.WriteOptions{})
		we := requireModelError(t, err, wserr.SizeLimitExceeded)
		assert.Contains(t, we.Msg, "cap is 100")
		assert.Equal(t, before, e.state("run_cap"))
		_, err = ws.Write(ctx, P("output/main.md"), []byte(strings.Repeat("c", 100)), vfs.WriteOptions{})
		require.NoError(t, err, "replacing with the same size stays at the cap")

		// A stream is read only up to the room the cap leaves, and a
		// refused one leaves nothing behind.
		_, err = ws.WriteFrom(ctx, P("output/main.md"), strings.NewReader(strings.Repeat("d", 100)), vfs.WriteOptions{})
		require.NoError(t, err, "a stream that replaces a file with as many bytes fits")
		before = e.state("run_cap")
		big := &countingReader{r: bytes.NewReader(make([]byte, 8<<20))}
		_, err = ws.WriteFrom(ctx, P("output/main.md"), big, vfs.WriteOptions{})
		we = requireModelError(t, err, wserr.SizeLimitExceeded)
		assert.Contains(t, we.Msg, "100")
		assert.Equal(t, before, e.state("run_cap"), "nothing of the stream is stored")
		assert.Less(t, big.n, int64(1<<20), "the stream is read no further than the room and one read")
		_ = baseEntry
	})

	t.Run("InheritedPersistDoesNotCount", func(t *testing.T) {
		// A persist layer bigger than the next run's cap.
		e.write("run_probe", "persist/one.md", "HEADER\n"+strings.Repeat("p", 2000))
		e.write("run_probe", "persist/two.md", strings.Repeat("q", 2000))
		_, err := e.svc.Finish(ctx, "run_probe")
		require.NoError(t, err)
		e.newRun("run_over", runs.CreateRequest{Profile: &runs.Profile{MaxRunBytes: 1000}})
		ws := e.model("run_over")
		size := func() int64 {
			en, err := e.st.Trees.Lookup(ctx, nil, e.run("run_over").Root, vfs.Root())
			require.NoError(t, err)
			return en.Size
		}
		require.Greater(t, size(), int64(4000), "the run starts with more inherited bytes than its cap")

		_, err = ws.Write(ctx, P("output/main.md"), []byte("x"), vfs.WriteOptions{})
		require.NoError(t, err, "inherited persist/ and input/ do not count against the run's cap")
		before := e.state("run_over")
		_, err = ws.Write(ctx, P("output/big.md"), []byte(strings.Repeat("b", 1000)), vfs.WriteOptions{})
		requireModelError(t, err, wserr.SizeLimitExceeded)
		assert.Equal(t, before, e.state("run_over"), "what the run adds past its cap is refused")

		_, err = ws.Patch(ctx, P("persist/one.md"), "HEADER\n", "", vfs.PatchOptions{})
		require.NoError(t, err, "a patch that shrinks the workspace is allowed")
		require.NoError(t, ws.Remove(ctx, P("persist/two.md")), "so is a removal")
		_, err = ws.Write(ctx, P("output/main.md"), []byte("y"), vfs.WriteOptions{})
		require.NoError(t, err)
	})
}

// TestWorkspaceHostErrors proves host-level failures are distinct from
// model-correctable ones: an injected fault and a corrupt blob come back
// with codes that are not model-correctable, and change nothing.
func TestWorkspaceHostErrors(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	e.newRun("run_a", runs.CreateRequest{})
	e.write("run_a", "output/main.md", "hello")
	ws := e.model("run_a")

	t.Run("InjectedFault", func(t *testing.T) {
		boom := errors.New("disk on fire")
		svc, faults := faultyService(e.st, e.clock, runs.Options{})
		faults.fail(anyAppend, boom)
		before := e.state("run_a")
		_, err := svc.Workspace("run_a", runs.ModelScope).Write(ctx, vfs.MustPath("output/main.md"), []byte("changed"), vfs.WriteOptions{})
		require.ErrorIs(t, err, boom)
		var we *wserr.Error
		assert.False(t, errors.As(err, &we) && we.Code.ModelCorrectable(), "a fault is not the model's to fix")
		requireHostError(t, err, wserr.Internal)
		assert.Equal(t, before, e.state("run_a"))
	})

	t.Run("CorruptBlob", func(t *testing.T) {
		h := cas.Sum([]byte("hello"))
		setData := func(b []byte) {
			require.NoError(t, e.db.Update(ctx, func(tx *index.Tx) error {
				// "hello" does not compress, so the row holds it raw; the
				// same length keeps the size check from noticing.
				res, err := tx.ExecContext(ctx, `UPDATE blobs SET data = ? WHERE hash = ? AND codec = 0`, b, h)
				require.NoError(t, err)
				n, _ := res.RowsAffected()
				require.EqualValues(t, 1, n)
				return nil
			}))
		}
		setData([]byte("jello"))
		t.Cleanup(func() { setData([]byte("hello")) }) // so the store verifies at the end

		before := e.state("run_a")
		_, err := ws.Read(ctx, vfs.MustPath("output/main.md"), vfs.ReadOptions{})
		require.ErrorIs(t, err, cas.ErrCorrupt)
		requireHostError(t, err, wserr.Corrupt)

		_, err = ws.Patch(ctx, vfs.MustPath("output/main.md"), "hello", "bye", vfs.PatchOptions{})
		require.ErrorIs(t, err, cas.ErrCorrupt, "a patch never works on bytes that fail verification")
		requireHostError(t, err, wserr.Corrupt)
		_, err = ws.Write(ctx, vfs.MustPath("output/main.md"), []byte("!"), vfs.WriteOptions{Mode: vfs.Append})
		require.ErrorIs(t, err, cas.ErrCorrupt)
		assert.Equal(t, before, e.state("run_a"))
	})
}

// TestWorkspaceAtomicity proves a failure after the trees are written but
// before the root moves and the event is appended leaves neither: the same
// root, no event, no checkpoint, and none of the transaction's tree and
// blob rows.
func TestWorkspaceAtomicity(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	e.newRun("run_a", runs.CreateRequest{})
	e.write("run_a", "output/main.md", "v1")
	// The journal fails every append: the trees and the blob are written,
	// the root has not moved.
	svc, faults := faultyService(e.st, e.clock, runs.Options{})
	faults.fail(anyAppend, errors.New("crash between the trees and the event"))
	ws := svc.Workspace("run_a", runs.ModelScope)
	content := []byte("content that exists nowhere else")
	p := vfs.MustPath("output/deep/new/file.md")
	before := e.state("run_a")
	_, err := ws.Write(ctx, p, content, vfs.WriteOptions{})
	require.Error(t, err)
	assert.Equal(t, []string{string(journal.WorkspaceFileWritten)}, faults.calls(), "the write got as far as its event")
	assert.Equal(t, before, e.state("run_a"), "root, journal, checkpoints and row counts are as before")
	has, err := e.st.Blobs.Has(ctx, cas.Sum(content))
	require.NoError(t, err)
	assert.False(t, has, "the blob written in the failed transaction is gone")
	_, err = ws.Stat(ctx, p)
	requireModelError(t, err, wserr.FileNotFound)

	for _, op := range []func() error{
		func() error {
			_, err := ws.Patch(ctx, vfs.MustPath("output/main.md"), "v1", "v2", vfs.PatchOptions{})
			return err
		},
		func() error { return ws.Remove(ctx, vfs.MustPath("output/main.md")) },
	} {
		require.Error(t, op())
		assert.Equal(t, before, e.state("run_a"))
	}

	// The same write succeeds once the fault is gone: the trees the failed
	// transaction built (and that the tree cache may remember) are written
	// again, so every tree the new root names is stored.
	faults.clear()
	_, err = ws.Write(ctx, p, content, vfs.WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(content), e.read(ws, p.String()))
	r := e.run("run_a")
	require.NoError(t, fstest.TestFS(e.st.Trees.FS(ctx, r.Root), "output/main.md", p.String()))
}

// TestWorkspaceConcurrentAppends proves a write is a read-modify-write in
// one transaction: appends racing on one file all land, none lost.
func TestWorkspaceConcurrentAppends(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	e.newRun("run_a", runs.CreateRequest{})
	ws := e.model("run_a")
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := ws.Write(e.ctx, vfs.MustPath("output/log.md"), fmt.Appendf(nil, "w%d-%d\n", w, i), vfs.WriteOptions{Mode: vfs.Append})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := e.read(ws, "output/log.md")
	for w := range writers {
		for i := range each {
			assert.Equal(t, 1, strings.Count(got, fmt.Sprintf("w%d-%d\n", w, i)))
		}
	}
}

// TestWorkspaceResourceKinds proves the three stored-or-provided kinds
// through one Workspace: materialized input/ (host-readable, hidden from
// the model, never writable), generated output/ (writable), and virtual
// mounts (listed at the root, readable, read-only, never stored).
func TestWorkspaceResourceKinds(t *testing.T) {
	var reads atomic.Int64
	e := newWSEnv(t, runs.Options{Virtual: mountTestVirtual(t, &reads)})
	ctx := e.ctx
	P := vfs.MustPath
	e.newRun("run_a", runs.CreateRequest{Inputs: map[string][]byte{
		"prompt_snapshot.json": []byte(`{"chatCompletionPayload":{"messages":[]}}`),
		"world/activated.md":   []byte("The northern pass is closed.\n"),
	}})
	e.write("run_a", "output/main.md", "Once upon a time.\n")
	model, host := e.model("run_a"), e.host("run_a")

	t.Run("Materialized", func(t *testing.T) {
		for _, p := range []string{"input/prompt_snapshot.json", "input/world/activated.md", "input/persist_snapshot.json"} {
			fi, err := host.Stat(ctx, P(p))
			require.NoError(t, err, p)
			assert.Equal(t, vfs.ResourceMaterialized, fi.Resource, p)
			assert.False(t, fi.Writable, p)
		}
		assert.Equal(t, "The northern pass is closed.\n", e.read(host, "input/world/activated.md"))
		_, err := model.Read(ctx, P("input/world/activated.md"), vfs.ReadOptions{})
		requireModelError(t, err, wserr.PathNotVisible)
		_, err = host.Write(ctx, P("input/world/activated.md"), []byte("open"), vfs.WriteOptions{})
		requireModelError(t, err, wserr.PathNotWritable)
	})

	t.Run("Generated", func(t *testing.T) {
		fi, err := model.Stat(ctx, P("output/main.md"))
		require.NoError(t, err)
		assert.Equal(t, vfs.ResourceGenerated, fi.Resource)
		assert.True(t, fi.Writable)
		assert.Equal(t, cas.Sum([]byte("Once upon a time.\n")), fi.Hash)
		dir, err := model.Stat(ctx, P("output"))
		require.NoError(t, err)
		assert.Equal(t, vfs.KindDir, dir.Kind)
		assert.False(t, dir.Writable, "a root itself is not a file to write")
		_, err = model.Write(ctx, P("output/sub/a.md"), []byte("a"), vfs.WriteOptions{})
		require.NoError(t, err)
		sub, err := model.Stat(ctx, P("output/sub"))
		require.NoError(t, err)
		assert.False(t, sub.Writable, "nor is a directory below it")
	})

	t.Run("Virtual", func(t *testing.T) {
		blobs, trees := e.rows("blobs"), e.rows("trees")
		before := e.state("run_a")

		root, err := model.List(ctx, vfs.Root(), 1)
		require.NoError(t, err)
		kinds := map[string]vfs.ResourceKind{}
		for _, fi := range root {
			kinds[fi.Path.String()] = fi.Resource
		}
		assert.Equal(t, map[string]vfs.ResourceKind{
			"chat": vfs.ResourceVirtual, "output": vfs.ResourceGenerated, "skills": vfs.ResourceVirtual,
			"scratch": vfs.ResourceGenerated, "plan": vfs.ResourceGenerated, "summaries": vfs.ResourceGenerated, "persist": vfs.ResourceGenerated,
		}, kinds, "the model sees its visible roots, empty ones too, and the virtual mounts, not input/")

		fi, err := model.Stat(ctx, P("skills/lore/SKILL.md"))
		require.NoError(t, err)
		assert.Equal(t, vfs.ResourceVirtual, fi.Resource)
		assert.False(t, fi.Writable)
		assert.Equal(t, "# Lore\nDragons guard the northern pass.\n", e.read(model, "skills/lore/SKILL.md"))
		res, err := model.Read(ctx, P("skills/lore/SKILL.md"), vfs.ReadOptions{StartLine: 2})
		require.NoError(t, err)
		assert.Equal(t, "Dragons guard the northern pass.\n", res.Text)

		first := e.read(model, "chat/history.tail.md")
		second := e.read(host, "chat/history.tail.md")
		assert.NotEqual(t, first, second, "a generated virtual file is made on every read, never stale")
		assert.Contains(t, second, "User: hello")

		ls, err := model.List(ctx, P("skills"), 2)
		require.NoError(t, err)
		assert.Len(t, ls, 5, "skills/ lists its two directories and three files")
		hits, err := hitsOf(model.Search(ctx, "dragons pass", vfs.SearchOptions{}))
		require.NoError(t, err)
		require.NotEmpty(t, hits)
		assert.Equal(t, "skills/lore/SKILL.md", hits[0].Path.String())

		assert.Equal(t, blobs, e.rows("blobs"), "reading virtual resources stores no blob")
		assert.Equal(t, trees, e.rows("trees"), "nor any tree")
		assert.Equal(t, before, e.state("run_a"))

		cp, err := e.svc.Checkpoint(ctx, "run_a", "probe")
		require.NoError(t, err)
		view, err := e.st.Checkpoints.View(ctx, "run_a", cp.Seq)
		require.NoError(t, err)
		for _, f := range view.Files {
			assert.NotContains(t, []string{"skills", "chat"}, vfs.MustPath(f.Path).Top(), "checkpoints hold no virtual file")
		}
	})
}

// TestWorkspaceConformance runs the vfs conformance suite against a run's
// workspace in the model's view: the read contract over stored and virtual
// files, and the write contract in output/.
func TestWorkspaceConformance(t *testing.T) {
	t.Run("WriteFS", func(t *testing.T) {
		e := newWSEnv(t, runs.Options{})
		e.newRun("run_a", runs.CreateRequest{})
		vfstest.TestWriteFS(t, e.model("run_a"), vfs.MustPath("output"))
	})

	t.Run("FS", func(t *testing.T) {
		v := vfs.NewVirtual()
		skills, err := vfs.NewStaticProvider(map[string][]byte{
			"lore/SKILL.md": []byte("# Lore\nDragons.\n"),
			"index.md":      []byte("lore\n"),
		})
		require.NoError(t, err)
		require.NoError(t, v.Mount(vfs.MustPath("skills"), skills))
		tail := []byte("User: hi\nBot: 你好，旅行者。\n")
		require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
			return tail, nil
		})))
		e := newWSEnv(t, runs.Options{Virtual: v})
		files := map[string]string{
			"output/main.md":         "line one\nline two\nline three\n",
			"output/cjk.md":          "巨龙在山洞里沉睡。\n第二行\n",
			"output/empty.md":        "",
			"output/bin.dat":         "\x00\x01\x02\xff",
			"output/a/b/deep.md":     "deep",
			"output/a-b.md":          "segment order puts output/a/ first",
			"scratch/notes.md":       "no trailing newline",
			"persist/memory.md":      "remember the dragon\n",
			"skills/lore/SKILL.md":   "# Lore\nDragons.\n",
			"skills/index.md":        "lore\n",
			"chat/history.tail.md":   string(tail),
			"summaries/round-001.md": "summary\n",
			"plan/":                  "", // a visible root with no file is an empty directory
			"no/":                    "",
		}
		// In the model's view every top-level name is a visible root,
		// which always exists, a virtual mount, or path_not_visible (it
		// has its own tests above): the suite probes missing paths below
		// an empty visible root instead of at the top.
		prof := runs.DefaultProfile()
		prof.VisibleRoots = append(prof.VisibleRoots, "no")
		e.newRun("run_a", runs.CreateRequest{Profile: &prof, Inputs: map[string][]byte{"hidden.md": []byte("hidden")}})
		for p, c := range files {
			if top := vfs.MustPath(p).Top(); top != "skills" && top != "chat" && !strings.HasSuffix(p, "/") {
				e.write("run_a", p, c)
			}
		}
		vfstest.TestFS(t, e.model("run_a"), files, "no/such-file.txt", "no/such/dir/file.md")
	})
}

// TestTreeFSConformance proves a run's live tree and a checkpoint's tree
// are io/fs file systems that pass testing/fstest.
func TestTreeFSConformance(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	e.newRun("run_a", runs.CreateRequest{Inputs: map[string][]byte{"prompt_snapshot.json": []byte("{}")}})
	e.write("run_a", "output/main.md", "hello\n")
	e.write("run_a", "output/parts/one.md", "一\n")
	e.write("run_a", "scratch/bin.dat", "\x00\xff")
	cp := e.run("run_a").HeadCheckpoint
	e.write("run_a", "output/main.md", "hello again\n")
	e.write("run_a", "plan/plan.md", "1. write\n")

	live := e.run("run_a").Root
	fsys := e.st.Trees.FS(ctx, live)
	require.NoError(t, fstest.TestFS(fsys, "input/prompt_snapshot.json", "input/persist_snapshot.json",
		"output/main.md", "output/parts/one.md", "scratch/bin.dat", "plan/plan.md"))

	c, err := e.st.Checkpoints.Get(ctx, nil, "run_a", cp)
	require.NoError(t, err)
	cpfs := e.st.Trees.FS(ctx, c.Root)
	require.NoError(t, fstest.TestFS(cpfs, "input/prompt_snapshot.json", "output/main.md", "output/parts/one.md", "scratch/bin.dat"))
	old, err := fs.ReadFile(cpfs, "output/main.md")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(old), "the checkpoint keeps the version it saw")
}

// TestWorkspaceRowComplexity proves a write costs rows by depth, not
// workspace size: writing a file three directories below the root of a
// 10,000-file workspace inserts one tree per directory on its path (root,
// output, output/a, output/a/b), exactly as in a workspace of one file.
func TestWorkspaceRowComplexity(t *testing.T) {
	const target = "output/a/b/file.md" // depth 3: three directories below the root
	depth := len(vfs.MustPath(target).Segments()) - 1

	measure := func(t *testing.T, files int) (trees, blobs, checkpoints, events int) {
		e := newWSEnv(t, runs.Options{})
		e.newRun("run_a", runs.CreateRequest{})
		e.write("run_a", "output/a/b/existing.md", "existing")
		if files > 1 {
			installBulkOutput(t, e, "run_a", files-1)
		}
		tr, bl, cp, ev := e.rows("trees"), e.rows("blobs"), e.rows("checkpoints"), e.rows("events")
		e.write("run_a", target, "new content")
		return e.rows("trees") - tr, e.rows("blobs") - bl, e.rows("checkpoints") - cp, e.rows("events") - ev
	}

	smallTrees, smallBlobs, smallCps, smallEvents := measure(t, 1)
	bigTrees, bigBlobs, bigCps, bigEvents := measure(t, 10_000)
	t.Logf("writing %s added %d tree rows in a 1-file workspace, %d in a 10,000-file one", target, smallTrees, bigTrees)
	assert.LessOrEqual(t, bigTrees, depth+1, "at most one tree per directory on the path")
	assert.Equal(t, smallTrees, bigTrees, "tree rows do not depend on workspace size")
	assert.Equal(t, []int{1, 1, 2}, []int{bigBlobs, bigCps, bigEvents}, "one blob, one checkpoint, two events")
	assert.Equal(t, []int{smallBlobs, smallCps, smallEvents}, []int{bigBlobs, bigCps, bigEvents})
}

// installBulkOutput adds n files to the run's output/ (100 per directory,
// output/dNNN/fNN.md, sharing 100 distinct contents) by building the trees
// bottom-up in one transaction and pointing the run's root at the result.
// It is test setup that bypasses the workspace API, which would take n
// transactions; the result is a workspace like any other.
func installBulkOutput(t *testing.T, e *wsEnv, runID string, n int) {
	t.Helper()
	ctx := e.ctx
	require.NoError(t, e.db.Update(ctx, func(tx *index.Tx) error {
		contents := make([]vfs.Entry, 100)
		for i := range contents {
			b := fmt.Appendf(nil, "file content %d\n", i)
			h, err := e.st.Blobs.PutBytes(ctx, tx, b)
			require.NoError(t, err)
			contents[i] = vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(b))}
		}
		r := e.run(runID)
		root := r.Root
		for d := 0; d*100 < n; d++ {
			var es []vfs.Entry
			var size int64
			for f := 0; f < 100 && d*100+f < n; f++ {
				en := contents[f]
				en.Name = fmt.Sprintf("f%02d.md", f)
				es = append(es, en)
				size += en.Size
			}
			h, err := e.st.Trees.Put(ctx, tx, es)
			require.NoError(t, err)
			root, err = e.st.Trees.Set(ctx, tx, root, vfs.MustPath(fmt.Sprintf("output/d%03d", d)), &vfs.Entry{Kind: vfs.KindDir, Hash: h, Size: size})
			require.NoError(t, err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE runs SET root = ? WHERE id = ?`, root, runID)
		return err
	}))
	var files int
	require.NoError(t, e.st.Trees.Walk(ctx, nil, e.run(runID).Root, func(p vfs.Path, en vfs.Entry) error {
		if en.Kind == vfs.KindFile && p.Top() == "output" {
			files++
		}
		return nil
	}))
	require.Equal(t, n+1, files, "bulk setup")
}

// TestWorkspaceSearch proves search finds words in the visible files (and
// the virtual mounts), never in input/ for the model, finds CJK text, and
// bounds its hits.
func TestWorkspaceSearch(t *testing.T) {
	var reads atomic.Int64
	e := newWSEnv(t, runs.Options{Virtual: mountTestVirtual(t, &reads)})
	ctx := e.ctx
	P := vfs.MustPath
	e.newRun("run_a", runs.CreateRequest{Inputs: map[string][]byte{"world/activated.md": []byte("The wyvern nests in input.\n")}})
	e.write("run_a", "output/main.md", "The knight rode north.\nThe wyvern slept.\n")
	e.write("run_a", "scratch/cjk.md", "第一章\n巨龙在山洞里沉睡。\n")
	e.write("run_a", "scratch/bin.dat", "wyvern\x00")
	for i := range 30 {
		e.write("run_a", fmt.Sprintf("plan/step%02d.md", i), fmt.Sprintf("step %d: sharpen the sword\n", i))
	}
	model, host := e.model("run_a"), e.host("run_a")

	paths := func(hits []vfs.Hit) []string {
		var out []string
		for _, h := range hits {
			out = append(out, h.Path.String())
		}
		return out
	}

	t.Run("VisibleOnly", func(t *testing.T) {
		hits, err := hitsOf(model.Search(ctx, "wyvern", vfs.SearchOptions{}))
		require.NoError(t, err)
		assert.Equal(t, []string{"output/main.md"}, paths(hits), "input/ and binary files are not searched for the model")
		require.Len(t, hits, 1)
		assert.Equal(t, 2, hits[0].StartLine)
		assert.Contains(t, hits[0].Snippet, "wyvern")

		hits, err = hitsOf(host.Search(ctx, "wyvern", vfs.SearchOptions{}))
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"output/main.md", "input/world/activated.md"}, paths(hits), "the host sees input/")
	})

	t.Run("CJK", func(t *testing.T) {
		hits, err := hitsOf(model.Search(ctx, "巨龙", vfs.SearchOptions{}))
		require.NoError(t, err)
		require.NotEmpty(t, hits)
		assert.Equal(t, "scratch/cjk.md", hits[0].Path.String())
		assert.Equal(t, 2, hits[0].StartLine)
		hits, err = hitsOf(model.Search(ctx, "笑", vfs.SearchOptions{}))
		require.NoError(t, err)
		assert.Equal(t, []string{"skills/romance/example.md"}, paths(hits), "CJK in virtual files too")
	})

	t.Run("Bounded", func(t *testing.T) {
		hits, err := hitsOf(model.Search(ctx, "sword", vfs.SearchOptions{}))
		require.NoError(t, err)
		assert.Len(t, hits, 20, "the default bound")
		hits, err = hitsOf(model.Search(ctx, "sword", vfs.SearchOptions{MaxHits: 5}))
		require.NoError(t, err)
		assert.Len(t, hits, 5)
		for i := 1; i < len(hits); i++ {
			assert.GreaterOrEqual(t, hits[i-1].Score, hits[i].Score, "best first")
		}
		_, err = hitsOf(model.Search(ctx, "sword", vfs.SearchOptions{MaxHits: 201}))
		requireModelError(t, err, wserr.InvalidArgument)
	})

	t.Run("BelowPath", func(t *testing.T) {
		hits, err := hitsOf(model.Search(ctx, "sword", vfs.SearchOptions{Path: P("output")}))
		require.NoError(t, err)
		assert.Empty(t, hits)
		hits, err = hitsOf(model.Search(ctx, "dragons", vfs.SearchOptions{Path: P("skills")}))
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"skills/lore/SKILL.md", "skills/romance/SKILL.md"}, paths(hits), "search below a virtual mount")
		_, err = hitsOf(model.Search(ctx, "sword", vfs.SearchOptions{Path: P("output/nothing-here")}))
		requireModelError(t, err, wserr.FileNotFound)
	})
}

// countingReader counts the bytes read from r, at most 64 KiB a read as a
// pipe or socket gives them.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b[:min(len(b), 64<<10)])
	c.n += int64(n)
	return n, err
}

// TestVirtualBelowStoredDirectory lists and searches a stored directory
// that a virtual mount lies below (chat/ written by the run, beside the
// mounted chat/history.tail.md): the mount shows there as Stat finds it
// and as the root's listing shows it.
func TestVirtualBelowStoredDirectory(t *testing.T) {
	var reads atomic.Int64
	e := newWSEnv(t, runs.Options{Virtual: mountTestVirtual(t, &reads)})
	ctx := e.ctx
	P := vfs.MustPath
	e.newRun("run_a", runs.CreateRequest{Profile: &runs.Profile{VisibleRoots: []string{"output", "chat"}}})
	e.write("run_a", "chat/notes.md", "User said hello twice.\n")
	model := e.model("run_a")

	paths := func(infos []vfs.FileInfo) []string {
		var out []string
		for _, fi := range infos {
			out = append(out, fi.Path.String())
		}
		return out
	}
	fi, err := model.Stat(ctx, P("chat/history.tail.md"))
	require.NoError(t, err)
	assert.Equal(t, vfs.ResourceVirtual, fi.Resource)

	ls, err := model.List(ctx, P("chat"), 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"chat/history.tail.md", "chat/notes.md"}, paths(ls))
	root, err := model.List(ctx, vfs.Root(), 2)
	require.NoError(t, err)
	assert.Subset(t, paths(root), paths(ls), "the root's listing shows the same entries")
	page, more, err := model.ListPage(ctx, P("chat"), 1, vfs.ListPage{After: P("chat/history.tail.md")})
	require.NoError(t, err)
	assert.False(t, more)
	assert.Equal(t, []string{"chat/notes.md"}, paths(page))

	hits, err := hitsOf(model.Search(ctx, "hello", vfs.SearchOptions{Path: P("chat")}))
	require.NoError(t, err)
	var got []string
	for _, h := range hits {
		got = append(got, h.Path.String())
	}
	assert.ElementsMatch(t, []string{"chat/history.tail.md", "chat/notes.md"}, got)
}

// brokenProvider is a virtual directory whose backend is down: every call
// fails.
type brokenProvider struct{}

func (brokenProvider) Stat(context.Context, vfs.Path) (vfs.FileInfo, error) {
	return vfs.FileInfo{}, errors.New("backend down")
}

func (brokenProvider) Read(context.Context, vfs.Path, vfs.ReadOptions) (vfs.ReadResult, error) {
	return vfs.ReadResult{}, errors.New("backend down")
}

func (brokenProvider) List(context.Context, vfs.Path, int) ([]vfs.FileInfo, error) {
	return nil, errors.New("backend down")
}

// TestSearchSkipsFailingMount: a search of the root, or of a stored
// directory a mount lies below, goes on past a virtual mount whose
// provider fails and names it in Skipped; a search of the mount itself
// fails with the provider's error.
func TestSearchSkipsFailingMount(t *testing.T) {
	var reads atomic.Int64
	v := mountTestVirtual(t, &reads)
	require.NoError(t, v.Mount(vfs.MustPath("docs"), brokenProvider{}))
	require.NoError(t, v.Mount(vfs.MustPath("chat/broken.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return nil, errors.New("history service down")
	})))
	e := newWSEnv(t, runs.Options{Virtual: v})
	ctx := e.ctx
	P := vfs.MustPath
	e.newRun("run_a", runs.CreateRequest{Profile: &runs.Profile{VisibleRoots: []string{"output", "chat", "skills", "docs"}, WritableRoots: []string{"output", "chat"}}})
	e.write("run_a", "output/dragons.md", "Dragons sleep in the northern pass.\n")
	e.write("run_a", "chat/notes.md", "The dragons said hello.\n")
	model := e.model("run_a")
	paths := func(hits []vfs.Hit) []string {
		var out []string
		for _, h := range hits {
			out = append(out, h.Path.String())
		}
		return out
	}
	broken := vfs.SkippedMount{Path: P("chat/broken.md"), Code: wserr.Internal, Message: "chat/broken.md: history service down"}

	res, err := model.Search(ctx, "dragons", vfs.SearchOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"output/dragons.md", "chat/notes.md", "skills/lore/SKILL.md", "skills/romance/SKILL.md"}, paths(res.Hits))
	assert.Equal(t, []vfs.SkippedMount{broken, {Path: P("docs"), Code: wserr.Internal, Message: "docs: backend down"}}, res.Skipped)

	res, err = model.Search(ctx, "dragons", vfs.SearchOptions{Path: P("chat")})
	require.NoError(t, err)
	assert.Equal(t, []string{"chat/notes.md"}, paths(res.Hits))
	assert.Equal(t, []vfs.SkippedMount{broken}, res.Skipped)

	res, err = model.Search(ctx, "dragons", vfs.SearchOptions{Path: P("output")})
	require.NoError(t, err)
	assert.Empty(t, res.Skipped, "no mount below output/")

	for _, p := range []string{"docs", "chat/broken.md"} {
		_, err = model.Search(ctx, "dragons", vfs.SearchOptions{Path: P(p)})
		assert.Equal(t, wserr.Internal, wserr.CodeOf(err), "%s: %v", p, err)
	}
}

// TestModelRootStatCountsWhatTheModelSees: the root as the model sees it
// holds the files it may list, so its size leaves out the roots it may
// not see (input/), and its address, which would name them, is not
// given; the host's root holds everything.
func TestModelRootStatCountsWhatTheModelSees(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	e.newRun("run_a", runs.CreateRequest{Inputs: map[string][]byte{
		"world/activated.md": []byte("The northern pass is closed.\n"),
	}})
	e.write("run_a", "output/main.md", "Once upon a time.\n")
	e.write("run_a", "scratch/notes.md", "x\n")
	model, host := e.model("run_a"), e.host("run_a")

	sum := func(fs *runs.Workspace) int64 {
		infos, _, err := fs.ListPage(ctx, vfs.Root(), 10, vfs.ListPage{})
		require.NoError(t, err)
		var n int64
		for _, fi := range infos {
			if fi.Kind == vfs.KindFile && fi.Resource != vfs.ResourceVirtual {
				n += fi.Size
			}
		}
		return n
	}
	fi, err := model.Stat(ctx, vfs.Root())
	require.NoError(t, err)
	assert.Equal(t, int64(len("Once upon a time.\n")+len("x\n")), fi.Size)
	assert.Equal(t, sum(model), fi.Size)
	assert.True(t, fi.Hash.IsZero(), "the stored root's address names input/ too")

	hfi, err := host.Stat(ctx, vfs.Root())
	require.NoError(t, err)
	assert.Greater(t, hfi.Size, fi.Size, "the host's root counts input/")
	assert.False(t, hfi.Hash.IsZero())
}

// hitsOf is a search's hits, for tests that look at nothing else.
func hitsOf(res vfs.SearchResult, err error) ([]vfs.Hit, error) { return res.Hits, err }
