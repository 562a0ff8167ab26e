package runs_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func TestApplyImportsAndEditsAsOneStep(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	var edits []runs.Edit
	for i := range 200 {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/src/d%02d/f%03d.go", i%20, i)), Content: []byte(fmt.Sprint("package p // ", i))})
	}
	trees, events, cps := e.count("trees"), e.count("events"), e.count("checkpoints")
	infos, err := e.svc.Workspace(r.ID, runs.ModelScope).Apply(e.ctx, edits)
	require.NoError(t, err)
	require.Len(t, infos, 200)
	assert.Equal(t, 20+3, e.count("trees")-trees, "20 leaf directories, src/, output/ and the root: each written once")
	assert.Equal(t, 200+1, e.count("events")-events, "one event per file and the checkpoint's")
	assert.Equal(t, 1, e.count("checkpoints")-cps)
	assert.Equal(t, "package p // 7", e.read(e.svc.Workspace(r.ID, runs.ModelScope), "output/src/d07/f007.go"))
	assert.Equal(t, infos[0].Checkpoint, infos[199].Checkpoint)

	infos, err = e.svc.Workspace(r.ID, runs.ModelScope).Apply(e.ctx, []runs.Edit{
		{Path: vfs.MustPath("output/src/d00/f000.go"), Content: []byte("package p // changed")},
		{Path: vfs.MustPath("output/src/d01/f001.go"), Remove: true},
	})
	require.NoError(t, err)
	assert.Len(t, infos, 2, "one result per edit, the removal's too")
	assert.Equal(t, "package p // changed", e.read(e.svc.Workspace(r.ID, runs.ModelScope), "output/src/d00/f000.go"))
	evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{BeforeSeq: 1 << 40, Limit: 3})
	require.NoError(t, err)
	assert.Equal(t, []journal.Type{journal.WorkspaceFileWritten, journal.WorkspaceFileDeleted, journal.CheckpointCreated},
		[]journal.Type{evs[0].Type, evs[1].Type, evs[2].Type})
}

func TestApplyIsAllOrNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/keep.md", "keep")
	cases := map[string]struct {
		edits []runs.Edit
		code  wserr.Code
	}{
		"ErrNotWritable":   {[]runs.Edit{{Path: vfs.MustPath("output/a.md"), Content: []byte("a")}, {Path: vfs.MustPath("input/x"), Content: []byte("x")}}, wserr.PathNotVisible},
		"ErrRemoveMissing": {[]runs.Edit{{Path: vfs.MustPath("output/a.md"), Content: []byte("a")}, {Path: vfs.MustPath("output/none.md"), Remove: true}}, wserr.FileNotFound},
		"ErrTwice":         {[]runs.Edit{{Path: vfs.MustPath("output/a.md"), Content: []byte("a")}, {Path: vfs.MustPath("output/a.md"), Content: []byte("b")}}, wserr.InvalidArgument},
		// Named twice, whatever else is wrong with the second edit.
		"ErrTwiceRemoved": {[]runs.Edit{{Path: vfs.MustPath("output/q"), Content: []byte("a")}, {Path: vfs.MustPath("output/q"), Remove: true}}, wserr.InvalidArgument},
		"ErrFileAndBelow": {[]runs.Edit{{Path: vfs.MustPath("output/d/x"), Remove: true}, {Path: vfs.MustPath("output/d"), Content: []byte("a")}}, wserr.InvalidArgument},
		"ErrDirectory":    {[]runs.Edit{{Path: vfs.MustPath("output"), Content: []byte("a")}}, wserr.PathNotWritable},
		"ErrEmpty":        {nil, wserr.InvalidArgument},
		// keep.md is there: a removal with content would remove it.
		"ErrRemoveWithContent": {[]runs.Edit{{Path: vfs.MustPath("output/keep.md"), Content: []byte("new"), Remove: true}}, wserr.InvalidArgument},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := rowCounts(e)
			run, err := e.svc.Run(e.ctx, r.ID)
			require.NoError(t, err)
			_, err = e.svc.Workspace(r.ID, runs.ModelScope).Apply(e.ctx, c.edits)
			assert.True(t, wserr.Is(err, c.code), "%v", err)
			assert.Equal(t, before, rowCounts(e), "a failed batch changes nothing")
			after, err := e.svc.Run(e.ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, run.Root, after.Root)
		})
	}
}

func TestStoreSizeCap(t *testing.T) {
	e := newLifecycleEnv(t)
	capped := e.service(runs.Options{MaxStoreBytes: 1 << 20})
	r, err := capped.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}})
	require.NoError(t, err)
	ws := capped.Workspace(r.ID, runs.ModelScope)
	_, err = ws.Write(e.ctx, vfs.MustPath("output/small.md"), []byte("fits"), vfs.WriteOptions{})
	require.NoError(t, err)

	big := make([]byte, 2<<20)
	before := rowCounts(e)
	_, err = ws.Write(e.ctx, vfs.MustPath("output/big.bin"), big, vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	_, err = ws.Apply(e.ctx, []runs.Edit{{Path: vfs.MustPath("output/big.bin"), Content: big}})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	// Each of two edits fits in the room left, the two together do not.
	size, err := e.st.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	part := (1<<20 - size) * 2 / 3
	require.Positive(t, part)
	_, err = ws.Apply(e.ctx, []runs.Edit{
		{Path: vfs.MustPath("output/a.bin"), Content: make([]byte, part)},
		{Path: vfs.MustPath("output/b.bin"), Content: make([]byte, part)},
	})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.ErrorContains(t, err, "output/b.bin")
	assert.Equal(t, before, rowCounts(e), "a refused write changes nothing")

	_, err = ws.WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), bytes.NewReader(big), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	_, err = ws.Stat(e.ctx, vfs.MustPath("output/big.bin"))
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "a refused stream is not in the workspace")

	require.NoError(t, ws.Remove(e.ctx, vfs.MustPath("output/small.md")), "removals are always allowed")
}

func TestMaterializeVirtualResources(t *testing.T) {
	e := newLifecycleEnv(t)
	v := vfs.NewVirtual()
	history := "user: hello\n"
	require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return []byte(history), nil
	})))
	svc := e.service(runs.Options{Virtual: v})
	r, err := svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
		Materialize: []string{"chat/history.tail.md"}})
	require.NoError(t, err)
	history = "user: hello\nassistant: hi\n"

	host := svc.Workspace(r.ID, runs.HostScope)
	res, err := host.Read(e.ctx, vfs.MustPath("input/chat/history.tail.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "user: hello\n", string(res.Content), "the input keeps the content of run start")
	assert.Equal(t, vfs.ResourceMaterialized, res.Info.Resource)
	live, err := host.Read(e.ctx, vfs.MustPath("chat/history.tail.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, history, string(live.Content), "the virtual resource stays live")

	_, err = svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
		Materialize: []string{"chat/none.md"}})
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)

	// A run that is not there is named as such before any path is looked
	// at, served or not.
	for _, p := range []string{"chat/none.md", "chat/history.tail.md"} {
		_, err = svc.Materialize(e.ctx, "run_missing", []vfs.Path{vfs.MustPath(p)})
		assert.True(t, wserr.Is(err, wserr.RunNotFound), "%s: %v", p, err)
	}
}

// TestUnreadableStoreCapRefusesWrites: a store cap that cannot be read (a
// damaged policy row) is never taken for no cap: every write fails with
// store.corrupt and changes nothing; a streamed one before storing its
// content.
func TestUnreadableStoreCapRefusesWrites(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c", runs.CreateRequest{})
	limit := int64(1 << 20)
	require.NoError(t, e.svc.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))
	e.write(r.ID, "output/small.md", "fits")
	require.NoError(t, e.st.DB.Exec(e.ctx, `UPDATE policies SET policy = '{"maxStoreBytes":' WHERE scope = '*'`))

	svc := e.service(runs.Options{}) // reads the policy afresh
	ws := svc.Workspace(r.ID, runs.ModelScope)
	big := make([]byte, 2<<20)
	before := rowCounts(e)
	_, err := ws.Write(e.ctx, vfs.MustPath("output/big.bin"), big, vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.Corrupt), "write: %v", err)
	_, err = ws.Apply(e.ctx, []runs.Edit{{Path: vfs.MustPath("output/big.bin"), Content: big}})
	assert.True(t, wserr.Is(err, wserr.Corrupt), "apply: %v", err)
	_, err = ws.WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), bytes.NewReader(big), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.Corrupt), "streamed write: %v", err)
	_, err = svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c2"},
		Inputs: map[string][]byte{"a.md": big}})
	assert.True(t, wserr.Is(err, wserr.Corrupt), "create with inputs: %v", err)
	assert.Equal(t, before, rowCounts(e), "a refused write changes nothing")

	_, err = svc.CancelAndDeleteRun(e.ctx, r.ID)
	require.NoError(t, err, "a deletion is never refused")
	_, err = svc.Run(e.ctx, r.ID)
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "%v", err)
}

// TestStoreCapHoldsEveryAddition: the store's cap holds what the contents
// do not count too: records, manual checkpoints, and the trees, events and
// checkpoints of writes, also of empty files, shorter versions, streamed
// and batched writes. Each kind is refused once the store would pass its
// cap, never leaving it past; removals and rollbacks still run.
func TestStoreCapHoldsEveryAddition(t *testing.T) {
	// No background re-encoding: compressing the raw versions between
	// a refusal and its retry would make room for the retry.
	e := newLifecycleEnvWith(t, wsstore.Options{CAS: cas.Options{ReencodeIdle: time.Hour}})
	used := func() int64 {
		n, err := e.st.DB.UsedBytes(e.ctx)
		require.NoError(t, err)
		return n
	}
	steps := map[string]func(svc *runs.Service, id string, i int) error{
		"model request": func(svc *runs.Service, id string, i int) error {
			_, err := svc.RecordModelRequest(e.ctx, id, runs.ModelRequestRecord{Round: i + 1, Model: fmt.Sprintf("%01000d", i)})
			return err
		},
		"checkpoint": func(svc *runs.Service, id string, _ int) error {
			_, err := svc.Checkpoint(e.ctx, id, "manual")
			return err
		},
		"small write": func(svc *runs.Service, id string, i int) error {
			_, err := svc.Workspace(id, runs.ModelScope).Write(e.ctx, vfs.MustPath(fmt.Sprintf("output/n%04d.md", i)), []byte("a note"), vfs.WriteOptions{})
			return err
		},
		"empty file": func(svc *runs.Service, id string, i int) error {
			_, err := svc.Workspace(id, runs.ModelScope).Write(e.ctx, vfs.MustPath(fmt.Sprintf("output/e%04d.md", i)), nil, vfs.WriteOptions{})
			return err
		},
		"shorter version": func(svc *runs.Service, id string, i int) error {
			_, err := svc.Workspace(id, runs.ModelScope).Write(e.ctx, vfs.MustPath("output/draft.md"), []byte(fmt.Sprintf("%0*d", 4000-i, i)), vfs.WriteOptions{})
			return err
		},
		"streamed write": func(svc *runs.Service, id string, i int) error {
			_, err := svc.Workspace(id, runs.ModelScope).WriteFrom(e.ctx, vfs.MustPath(fmt.Sprintf("output/s%04d.md", i)), strings.NewReader(fmt.Sprint("streamed ", i)), vfs.WriteOptions{})
			return err
		},
		"apply": func(svc *runs.Service, id string, i int) error {
			_, err := svc.Workspace(id, runs.ModelScope).Apply(e.ctx, []runs.Edit{{Path: vfs.MustPath(fmt.Sprintf("output/a%04d.md", i))}})
			return err
		},
	}
	for name, step := range steps {
		limit := used() + 64<<10 + 123 // not a whole number of pages
		svc := e.service(runs.Options{MaxStoreBytes: limit})
		r, err := svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: name}})
		require.NoError(t, err)
		refused := -1
		for i := range 2000 {
			if err := step(svc, r.ID, i); err != nil {
				require.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%s %d: %v", name, i, err)
				refused = i
				break
			}
			require.LessOrEqual(t, used(), limit, "%s %d left the store past its cap", name, i)
		}
		require.Positive(t, refused, "%s: refused once the store is full", name)
		before := rowCounts(e)
		require.Error(t, step(svc, r.ID, refused))
		assert.Equal(t, before, rowCounts(e), "%s: a refused change changes nothing", name)
		_, err = svc.Rollback(e.ctx, r.ID, 1, runs.RollbackOptions{})
		require.NoError(t, err, "%s: a rollback is never refused", name)
		_, err = svc.CancelAndDeleteRun(e.ctx, r.ID)
		require.NoError(t, err, "%s: a deletion is never refused", name)
	}
}

// TestStoreCapHoldsAManifest: a manifest is kept whole on the run's row,
// so one that would take the store past its cap is refused and changes
// nothing; a small one fits, and one that adds no pages is set even when
// the store is already past its cap.
func TestStoreCapHoldsAManifest(t *testing.T) {
	e := newLifecycleEnv(t)
	used := func() int64 {
		n, err := e.st.DB.UsedBytes(e.ctx)
		require.NoError(t, err)
		return n
	}
	limit := used() + 64<<10 + 123
	svc := e.service(runs.Options{MaxStoreBytes: limit})
	r, err := svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "manifest"}})
	require.NoError(t, err)
	large := func(n int) runs.Manifest {
		m := seedManifest()
		for i := range n {
			m.Artifacts = append(m.Artifacts, runs.Artifact{ID: fmt.Sprintf("a%05d", i), Path: fmt.Sprintf("output/d/%s%05d.md", strings.Repeat("x", 150), i),
				Target: runs.Target{Kind: runs.TargetHidden}})
		}
		return m
	}
	before := rowCounts(e)
	beforeUsed := used()
	err = svc.SetManifest(e.ctx, r.ID, large(2000))
	require.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "a manifest that takes the store past its cap: %v", err)
	assert.Equal(t, before, rowCounts(e), "a refused manifest changes nothing")
	assert.Equal(t, beforeUsed, used())
	m, err := svc.Manifest(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Len(t, m.Artifacts, len(runs.DefaultManifest().Artifacts), "the run keeps the manifest it had")

	require.NoError(t, svc.SetManifest(e.ctx, r.ID, seedManifest()), "a small manifest fits")
	assert.LessOrEqual(t, used(), limit)

	// Past the cap (a sync brought more in), a manifest that adds no
	// pages is still set: only one that grows the store is refused.
	over := e.service(runs.Options{MaxStoreBytes: used() - 1})
	require.NoError(t, over.SetManifest(e.ctx, r.ID, seedManifest()))
}
