package runs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

var errInjected = errors.New("injected failure")

// createCheckpoint names the insert of a checkpoint's row in a fault rule; an
// event type names an append of that type, anyAppend every append.
const (
	createCheckpoint = "checkpoint.create"
	anyAppend        = "journal.append"
)

// faults decides which calls of a Service's journal and checkpoint store
// fail (faultyDeps wraps them): before each Append and each checkpoint
// Create, the first rule that names the call, if any, returns its error
// instead. It records every call it was asked about. Safe for concurrent
// use.
type faults struct {
	mu    sync.Mutex
	rules []faultRule
	seen  []string
}

type faultRule struct {
	call string // an event type, anyAppend or createCheckpoint
	err  error
	once bool // the rule goes after its first failure
}

// failOnce makes the next call named call fail with err.
func (f *faults) failOnce(call string, err error) { f.add(faultRule{call: call, err: err, once: true}) }

// fail makes every call named call fail with err, until clear.
func (f *faults) fail(call string, err error) { f.add(faultRule{call: call, err: err}) }

func (f *faults) add(r faultRule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, r)
}

// clear removes every rule.
func (f *faults) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// calls returns the calls asked about so far, in order.
func (f *faults) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// check records a call (names: what it is, most specific first) and
// returns the error of the first rule that names it.
func (f *faults) check(names ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, names[0])
	for i, r := range f.rules {
		if slices.Contains(names, r.call) {
			if r.once {
				f.rules = slices.Delete(f.rules, i, i+1)
			}
			return r.err
		}
	}
	return nil
}

// faultyJournal is a journal whose appends f may fail.
type faultyJournal struct {
	runs.Journal
	f *faults
}

func (j faultyJournal) Append(ctx context.Context, tx *index.Tx, runID string, typ journal.Type, level journal.Level, payload any) (journal.Event, error) {
	if err := j.f.check(string(typ), anyAppend); err != nil {
		return journal.Event{}, err
	}
	return j.Journal.Append(ctx, tx, runID, typ, level, payload)
}

// AppendEntries fails as Append would for the first entry a rule names.
func (j faultyJournal) AppendEntries(ctx context.Context, tx *index.Tx, runID string, es ...journal.Entry) ([]journal.Event, error) {
	for _, e := range es {
		if err := j.f.check(string(e.Type()), anyAppend); err != nil {
			return nil, err
		}
	}
	return j.Journal.AppendEntries(ctx, tx, runID, es...)
}

// faultyCheckpoints is a checkpoint store whose row inserts f may fail.
type faultyCheckpoints struct {
	runs.Checkpoints
	f *faults
}

func (c faultyCheckpoints) Insert(ctx context.Context, tx *index.Tx, p checkpoint.Planned, eventSeq int64) (checkpoint.Checkpoint, error) {
	if err := c.f.check(createCheckpoint); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	return c.Checkpoints.Insert(ctx, tx, p, eventSeq)
}

// faultyDeps returns d with its journal and checkpoint store failing as f
// says.
func faultyDeps(d runs.Deps, f *faults) runs.Deps {
	d.Journal = faultyJournal{Journal: d.Journal, f: f}
	d.Checkpoints = faultyCheckpoints{Checkpoints: d.Checkpoints, f: f}
	return d
}

// faultyService returns a Service on st and clock, with opts, whose
// journal and checkpoint store fail as the returned faults say (nothing
// fails until told).
func faultyService(st *wsstore.Store, clock *storetest.Clock, opts runs.Options) (*runs.Service, *faults) {
	f := &faults{}
	opts.Now = clock.Now
	return runs.New(faultyDeps(deps(st), f), opts), f
}

// withFaults makes e's service a faultyService.
func (e *lifecycleEnv) withFaults(opts runs.Options) *faults {
	svc, f := faultyService(e.st, e.clock, opts)
	e.svc = svc
	return f
}

// TestFailureAfterEventsLeavesNothing: a failure between the journal
// events and the checkpoint of a write rolls back the events, the blob,
// the trees, the delta re-encoding of the previous version, and the root.
func TestFailureAfterEventsLeavesNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	v1 := "# draft\n\n" + "the keeper lit the lamp at dusk and watched the harbour for ships; "
	for range 6 {
		v1 += v1
	}
	v2 := v1 + "a second paragraph"
	e.write(r.ID, "output/main.md", v1)
	e.write(r.ID, "output/main.md", v2)
	info, err := e.st.Blobs.Stat(e.ctx, cas.Sum([]byte(v2)))
	require.NoError(t, err)
	require.NotEqual(t, cas.CodecDelta, info.Codec, "the newest version is whole")

	before := rowCounts(e)
	run, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	faults := e.withFaults(runs.Options{})
	faults.failOnce(createCheckpoint, errInjected) // after the events, before the root moves
	_, err = e.svc.Workspace(r.ID, runs.ModelScope).Write(e.ctx, vfs.MustPath("output/main.md"), []byte(v2+" and a third"), vfs.WriteOptions{})
	require.ErrorIs(t, err, errInjected)
	assert.Equal(t, []string{string(journal.WorkspaceFileWritten), string(journal.CheckpointCreated), createCheckpoint}, faults.calls(),
		"the write's event and its checkpoint's were appended before the checkpoint's row failed")

	assert.Equal(t, before, rowCounts(e))
	after, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, run.Root, after.Root)
	assert.Equal(t, run.HeadCheckpoint, after.HeadCheckpoint)
	info, err = e.st.Blobs.Stat(e.ctx, cas.Sum([]byte(v2)))
	require.NoError(t, err)
	assert.NotEqual(t, cas.CodecDelta, info.Codec, "the rolled-back write did not leave v2 as a delta against content that is gone")
	assert.Equal(t, v2, e.read(e.svc.Workspace(r.ID, runs.ModelScope), "output/main.md"))

	e.write(r.ID, "output/main.md", v2+" and a third")
	_, err = e.st.Blobs.Reencode(e.ctx, 0) // what the write queued
	require.NoError(t, err)
	info, err = e.st.Blobs.Stat(e.ctx, cas.Sum([]byte(v2)))
	require.NoError(t, err)
	assert.Equal(t, cas.CodecDelta, info.Codec, "the same write, committed, does turn v2 into a delta")
}

// TestFailureAfterPromotionLeavesNothing: a failure after Finish moved the
// chat's persist layer, before the run completed, undoes the promotion.
func TestFailureAfterPromotionLeavesNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "persist/memory.md", "likes tea")
	before := rowCounts(e)
	faults := e.withFaults(runs.Options{})
	faults.failOnce(string(journal.StatusChanged), errInjected) // after the promotion, as the run completes
	_, err := e.svc.Finish(e.ctx, r.ID)
	require.ErrorIs(t, err, errInjected)
	assert.Equal(t, []string{string(journal.PersistentChangesCommitted), string(journal.StatusChanged)}, faults.calls(), "the promotion was journaled before completing failed")
	assert.Equal(t, before, rowCounts(e))
	chat, err := e.svc.Chat(e.ctx, r.ChatID)
	require.NoError(t, err)
	assert.Zero(t, chat.PersistVersion)
	assert.Empty(t, e.chatPersist(r.ChatID))
	got, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, got.Status)

	res, err := e.svc.Finish(e.ctx, r.ID)
	require.NoError(t, err, "the run finishes once the failure is gone")
	assert.Equal(t, int64(1), res.PersistVersion)
}
