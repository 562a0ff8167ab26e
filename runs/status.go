package runs

import "github.com/wsstore/wsstore/wserr"

// Status is a run's lifecycle state.
type Status string

// Run statuses. Completed, Failed and Cancelled are final.
const (
	Created          Status = "created"
	Running          Status = "running"
	AwaitingApproval Status = "awaiting_approval"
	Paused           Status = "paused"
	Completed        Status = "completed"
	Failed           Status = "failed"
	Cancelled        Status = "cancelled"
)

// transitions lists, for each status, the statuses it may move to.
var transitions = map[Status][]Status{
	Created:          {Running, Failed, Cancelled},
	Running:          {AwaitingApproval, Paused, Completed, Failed, Cancelled},
	AwaitingApproval: {Running, Paused, Failed, Cancelled},
	Paused:           {Running, Failed, Cancelled},
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	switch s {
	case Created, Running, AwaitingApproval, Paused, Completed, Failed, Cancelled:
		return true
	}
	return false
}

// Final reports whether no transition leaves s.
func (s Status) Final() bool { return s == Completed || s == Failed || s == Cancelled }

// Active reports whether the workspace of a run in status s may change.
func (s Status) Active() bool { return s == Running || s == AwaitingApproval || s == Paused }

// CanTransition reports whether a run may move from s to to.
func (s Status) CanTransition(to Status) bool {
	for _, t := range transitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

func checkTransition(runID string, from, to Status) error {
	if !to.Valid() {
		return wserr.New(wserr.InvalidArgument, "set status", "", "unknown status %q", to)
	}
	if !from.CanTransition(to) {
		return wserr.New(wserr.InvalidState, "set status", "", "run %s cannot go from %s to %s", runID, from, to)
	}
	return nil
}
