package maint_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
)

// faultyStore opens a store whose blobs go through the fault-injecting
// wrapper, which has none of the SQLite storage's batch and usage
// abilities, with two runs, versions of one file (delta encoded) and run_b
// deleted, so a GC has blobs to sweep.
func faultyStore(t *testing.T) (*wsstore.Store, *storagetest.Faults) {
	t.Helper()
	st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
	s := storetest.OpenStoreWith(t, wsstore.Options{CAS: cas.Options{Storage: st}})
	ctx := context.Background()
	createRun(t, s, "chat-1", "run_a")
	createRun(t, s, "chat-1", "run_b")
	body := strings.Repeat("a line of the report that changes little\n", 200)
	for i := range 4 {
		write(t, s, "run_a", "output/report.md", fmt.Sprintf("%sedit %d\n", body, i))
	}
	for i := range 5 {
		write(t, s, "run_b", fmt.Sprintf("output/b%d.md", i), fmt.Sprintf("only b, file %d\n", i))
	}
	write(t, s, "run_b", "output/shared.md", "both\n")
	write(t, s, "run_a", "output/shared.md", "both\n")
	require.NoError(t, s.Runs.SetStatus(ctx, "run_b", runs.Cancelled, "test"))
	require.NoError(t, s.Runs.DeleteRun(ctx, "run_b"))
	// What the writes queued, so the comparisons see one state.
	_, err := s.Blobs.Reencode(ctx, 0)
	require.NoError(t, err)
	return s, faults
}

// TestMaintenanceOverStorage: gc, fsck, stats and du over a Storage with
// no optional abilities find what they find over the SQLite storage's
// fast paths on the same tables.
func TestMaintenanceOverStorage(t *testing.T) {
	s, faults := faultyStore(t)
	ctx := context.Background()
	over := newMaintainer(s)
	p := parts(s)
	direct, err := cas.New(s.DB, cas.Options{})
	require.NoError(t, err)
	p.Blobs = direct
	sqlite := maint.New(p)

	want, err := sqlite.Stats(ctx)
	require.NoError(t, err)
	got, err := over.Stats(ctx)
	require.NoError(t, err)
	want.FileBytes, got.FileBytes = 0, 0
	assert.Equal(t, want, got)
	assert.Positive(t, got.DeltaSavedBytes, "the versions are delta encoded")

	wantDU, err := collectDU(ctx, sqlite)
	require.NoError(t, err)
	gotDU, err := collectDU(ctx, over)
	require.NoError(t, err)
	assert.Equal(t, wantDU, gotDU)

	fsck, err := over.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.True(t, fsck.OK(), "%v", fsck.Problems)

	later := func() time.Time { return time.Now().Add(time.Hour) }
	wantPlan, err := sqlite.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	plan, err := over.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	assert.Equal(t, wantPlan, plan)
	require.Positive(t, plan.Freed.Blobs)

	rep, err := over.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
	require.NoError(t, err)
	plan.DryRun = false
	assert.Equal(t, plan, rep)
	assert.Equal(t, plan.Freed.Blobs, faults.Calls(storagetest.Delete), "one Delete per blob swept")
	assert.Zero(t, faults.Fired())
	after, err := over.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.True(t, after.OK(), "%v", after.Problems)
}

// TestGCStorageDeleteFails: a Storage Delete that fails part way through
// the sweep rolls the sweep back, blobs deleted before it included.
func TestGCStorageDeleteFails(t *testing.T) {
	s, faults := faultyStore(t)
	ctx := context.Background()
	m := newMaintainer(s)
	later := func() time.Time { return time.Now().Add(time.Hour) }
	plan, err := m.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	require.Greater(t, plan.Freed.Blobs, 2)

	faults.Add(storagetest.Fault{Method: storagetest.Delete, Nth: 3})
	_, err = m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
	require.ErrorIs(t, err, storagetest.ErrInjected)
	assert.Equal(t, 3, faults.Calls(storagetest.Delete), "two deletes went through before the third failed")

	again, err := m.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	assert.Equal(t, plan, again, "nothing was deleted")
}
