package runs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

var allStatuses = []runs.Status{
	runs.Created, runs.Running, runs.AwaitingApproval, runs.Paused, runs.Completed, runs.Failed, runs.Cancelled,
}

// legalMoves is the run status machine, written out here independently of
// the package's table: a run starts created and goes running; a running
// run may wait for approval or pause and come back; any unfinished run may
// fail or be cancelled; only a running run completes; final statuses are
// final.
var legalMoves = map[[2]runs.Status]bool{
	{runs.Created, runs.Running}:   true,
	{runs.Created, runs.Failed}:    true,
	{runs.Created, runs.Cancelled}: true,

	{runs.Running, runs.AwaitingApproval}: true,
	{runs.Running, runs.Paused}:           true,
	{runs.Running, runs.Completed}:        true,
	{runs.Running, runs.Failed}:           true,
	{runs.Running, runs.Cancelled}:        true,

	{runs.AwaitingApproval, runs.Running}:   true,
	{runs.AwaitingApproval, runs.Paused}:    true,
	{runs.AwaitingApproval, runs.Failed}:    true,
	{runs.AwaitingApproval, runs.Cancelled}: true,

	{runs.Paused, runs.Running}:   true,
	{runs.Paused, runs.Failed}:    true,
	{runs.Paused, runs.Cancelled}: true,
}

// TestStatusMachine checks every pair of statuses against legalMoves.
func TestStatusMachine(t *testing.T) {
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			assert.Equal(t, legalMoves[[2]runs.Status{from, to}], from.CanTransition(to), "%s -> %s", from, to)
		}
		assert.True(t, from.Valid())
		assert.Equal(t, from == runs.Completed || from == runs.Failed || from == runs.Cancelled, from.Final(), "%s final", from)
		assert.Equal(t, from == runs.Running || from == runs.AwaitingApproval || from == runs.Paused, from.Active(), "%s active", from)
	}
	assert.False(t, runs.Status("sleeping").Valid())
	assert.False(t, runs.Status("").Valid())
}

// pathTo lists the moves that take a new (running) run to status st.
// Created is not reachable: CreateRun starts the run in the transaction
// that creates it.
func pathTo(st runs.Status) []runs.Status {
	if st == runs.Running {
		return nil
	}
	return []runs.Status{st}
}

// TestSetStatus makes every move from every reachable status through the
// service: a legal move updates the run and journals status_changed (and
// run_completed, run_failed or run_cancelled when final); an illegal one
// fails with run.invalid_transition, a host-level error, and changes
// nothing.
func TestSetStatus(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	finalEvent := map[runs.Status]journal.Type{
		runs.Completed: journal.RunCompleted, runs.Failed: journal.RunFailed, runs.Cancelled: journal.RunCancelled,
	}
	n := 0
	for _, from := range allStatuses {
		if from == runs.Created {
			continue
		}
		for _, to := range allStatuses {
			// Only Finish completes a run (it promotes persist/); SetStatus
			// refuses completed even where the machine allows it.
			legal := legalMoves[[2]runs.Status{from, to}] && to != runs.Completed
			name := fmt.Sprintf("%s/%s", from, to)
			if !legal {
				name = "ErrInvalidTransition/" + name
			}
			t.Run(name, func(t *testing.T) {
				n++
				id := fmt.Sprintf("run_%03d", n)
				e.newRun(id, runs.CreateRequest{})
				for _, st := range pathTo(from) {
					if st == runs.Completed {
						_, err := e.svc.Finish(ctx, id)
						require.NoError(t, err)
						continue
					}
					require.NoError(t, e.svc.SetStatus(ctx, id, st, "setup"))
				}
				require.Equal(t, from, e.run(id).Status)
				before := e.state(id)

				err := e.svc.SetStatus(ctx, id, to, "because")
				if !legal {
					requireHostError(t, err, wserr.InvalidState)
					assert.Equal(t, "run.invalid_transition", string(wserr.CodeOf(err)))
					assert.Equal(t, before, e.state(id), "a refused move changes nothing")
					return
				}
				require.NoError(t, err)
				r := e.run(id)
				assert.Equal(t, to, r.Status)
				assert.True(t, r.UpdatedAt.After(before.UpdatedAt))
				assert.Equal(t, to.Final(), r.FinishedAt != nil, "finishedAt is set exactly for final statuses")
				assert.Equal(t, before.Root, r.Root, "a status change leaves the workspace alone")
				assert.Equal(t, before.Checkpoints, e.state(id).Checkpoints)

				evs, err := e.st.Journal.Page(ctx, id, journal.PageQuery{AfterSeq: before.LastSeq})
				require.NoError(t, err)
				want := []journal.Type{journal.StatusChanged}
				if ft, ok := finalEvent[to]; ok {
					want = append(want, ft)
				}
				require.Equal(t, want, eventTypes(evs))
				var sc journal.StatusChange
				require.NoError(t, json.Unmarshal(evs[0].Payload, &sc))
				assert.Equal(t, journal.StatusChange{From: string(from), To: string(to), Reason: "because"}, sc)
				if to == runs.Failed {
					assert.Equal(t, journal.Error, evs[1].Level)
				}
			})
		}
	}

	t.Run("ErrUnknownStatus", func(t *testing.T) {
		e.newRun("run_unknown", runs.CreateRequest{})
		before := e.state("run_unknown")
		requireModelError(t, e.svc.SetStatus(ctx, "run_unknown", "sleeping", ""), wserr.InvalidArgument)
		assert.Equal(t, before, e.state("run_unknown"))
	})

	t.Run("ErrRunNotFound", func(t *testing.T) {
		requireHostError(t, e.svc.SetStatus(ctx, "run_missing", runs.Paused, ""), wserr.RunNotFound)
	})
}

// TestWritesNeedRunning proves only a running run's workspace changes: a
// run waiting for approval, paused or finished refuses writes with
// run.invalid_transition (host-level: the runtime, not the model, is out
// of step) and still serves reads.
func TestWritesNeedRunning(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	for _, st := range []runs.Status{runs.AwaitingApproval, runs.Paused, runs.Completed, runs.Failed, runs.Cancelled} {
		t.Run(string(st), func(t *testing.T) {
			id := "run_" + string(st)
			e.newRun(id, runs.CreateRequest{})
			e.write(id, "output/main.md", "draft")
			if st == runs.Completed {
				_, err := e.svc.Finish(ctx, id)
				require.NoError(t, err)
			} else {
				require.NoError(t, e.svc.SetStatus(ctx, id, st, "test"))
			}
			ws := e.model(id)
			before := e.state(id)

			_, err := ws.Write(ctx, vfs.MustPath("output/main.md"), []byte("more"), vfs.WriteOptions{})
			requireHostError(t, err, wserr.InvalidState)
			_, err = ws.Patch(ctx, vfs.MustPath("output/main.md"), "draft", "final", vfs.PatchOptions{})
			requireHostError(t, err, wserr.InvalidState)
			requireHostError(t, ws.Remove(ctx, vfs.MustPath("output/main.md")), wserr.InvalidState)
			assert.Equal(t, before, e.state(id))
			assert.Equal(t, "draft", e.read(ws, "output/main.md"))

			if st.Active() {
				require.NoError(t, e.svc.SetStatus(ctx, id, runs.Running, "resume"))
				e.write(id, "output/main.md", "resumed")
			}
		})
	}
}
