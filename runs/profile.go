package runs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// DefaultRoots are the workspace roots a model sees and writes by default.
var DefaultRoots = []string{"output", "scratch", "plan", "summaries", "persist"}

// Top-level names with a fixed role: input/ holds the run's materialized
// inputs, never writable after creation and hidden from the model (it is
// one of ReservedRoots); persist/ is the run's projection of its chat's
// persist layer.
const (
	InputRoot   = "input"
	PersistRoot = "persist"
)

// Profile is the policy of a run: which roots the model sees and writes,
// automatic checkpoints, a size cap and a cap on checkpoints.
type Profile struct {
	ID string `json:"id"`
	// VisibleRoots are the top-level directories the model may read;
	// default DefaultRoots. Virtual mounts are visible in addition.
	VisibleRoots []string `json:"visibleRoots"`
	// WritableRoots ⊆ VisibleRoots; default DefaultRoots. No root of
	// ReservedRoots may be visible or writable.
	WritableRoots []string `json:"writableRoots"`
	// AutoCheckpoint takes a checkpoint after each mutating operation that
	// changes the workspace (and after init and before a commit); default
	// on. One that leaves it as it was, such as the same bytes written
	// again, is journaled and takes none.
	AutoCheckpoint *bool `json:"autoCheckpoint,omitempty"`
	// MaxRunBytes caps the total size of the run's live workspace; 0 means
	// no cap. A write that would cross it fails and changes nothing.
	MaxRunBytes int64 `json:"maxRunBytes,omitempty"`
	// MaxCheckpoints caps how many checkpoints the run keeps; 0 means no
	// cap. A checkpoint that takes the run past it deletes the oldest in
	// the same transaction, recorded by a checkpoints_pruned event. A
	// checkpoint a commit was assembled from is never deleted, so a run
	// whose commits pin more than the cap stays above it.
	MaxCheckpoints int `json:"maxCheckpoints,omitempty"`
	// MaxCheckpointBytes caps the bytes the run's checkpoints keep beyond
	// its live tree (checkpoint.Store.Retained); 0 means its chat's
	// maxCheckpointBytesPerRun, if any. Past it the oldest go, as for
	// MaxCheckpoints, in the transaction of the checkpoint that crossed
	// it, recorded in the journal and the deletion log.
	MaxCheckpointBytes int64 `json:"maxCheckpointBytes,omitempty"`
	// KeepScratch says which ended runs keep their scratch/; nil keeps
	// the defaults (seed 000 §11): collected when the run completes, kept
	// for debugging when it fails or is cancelled. See scratch.go.
	KeepScratch *KeepScratch `json:"keepScratch,omitempty"`
	// AllowPaths are the host directories the run reaches below host/
	// (seed 004 HostPaths): boundaries only, see hostpaths.go.
	AllowPaths []HostPath `json:"allowPaths,omitempty"`
	// PrimaryRoot is the run's active project: a host directory inside
	// AllowPaths or a workspace path inside output/ or host/; empty falls
	// back to AllowPaths[0], then output/. Run.PrimaryRoot reports the
	// result.
	PrimaryRoot string `json:"primaryRoot,omitempty"`
}

// MaxProfileBytes bounds a run's profile, as JSON: the run's row holds it
// whole, and an archive row holds at most 64 MiB.
const MaxProfileBytes = 1 << 20

// fits refuses a profile past MaxProfileBytes as JSON with
// workspace.invalid_argument, before anything reads its lists.
func (p Profile) fits() error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if len(b) > MaxProfileBytes {
		return wserr.New(wserr.InvalidArgument, "profile", "", "the profile is %d bytes as JSON, past the %d a run keeps", len(b), MaxProfileBytes)
	}
	return nil
}

// DefaultProfile returns the profile used when a run names none.
func DefaultProfile() Profile {
	return Profile{ID: "default", VisibleRoots: slices.Clone(DefaultRoots), WritableRoots: slices.Clone(DefaultRoots)}
}

// normalize fills defaults and validates: roots are single valid path
// segments, each named once, no two differing only in case (one directory
// to a case-insensitive file system), none of ReservedRoots nor host (in
// every profile, allowPaths or not) nor a case twin of one, writable ⊆
// visible, caps are not negative. A bad profile fails with
// workspace.invalid_argument naming the root.
func (p Profile) normalize() (Profile, error) {
	if p.ID == "" {
		p.ID = "default"
	}
	if p.VisibleRoots == nil {
		p.VisibleRoots = slices.Clone(DefaultRoots)
	}
	if p.WritableRoots == nil {
		p.WritableRoots = slices.Clone(p.VisibleRoots)
		p.WritableRoots = slices.DeleteFunc(p.WritableRoots, func(r string) bool { return r == InputRoot })
	}
	for _, r := range append(slices.Clone(p.VisibleRoots), p.WritableRoots...) {
		if _, err := vfs.Root().Join(r); err != nil {
			return p, wserr.New(wserr.InvalidArgument, "profile", r, "root %q must be one valid path segment: %s", r, wserr.MessageOf(err))
		}
	}
	visible := make(map[string]bool, len(p.VisibleRoots))
	for _, roots := range [][]string{p.VisibleRoots, p.WritableRoots} {
		folded := make(map[string]string, len(roots))
		for _, r := range roots {
			switch twin, ok := folded[strings.ToLower(r)]; {
			case ok && twin == r:
				return p, wserr.New(wserr.InvalidArgument, "profile", r, "root %q is named twice", r)
			case ok:
				return p, wserr.New(wserr.InvalidArgument, "profile", r, "roots %q and %q differ only in case, which a case-insensitive file system (macOS's, Windows's) takes for one directory", twin, r)
			}
			folded[strings.ToLower(r)] = r
		}
	}
	for _, r := range p.VisibleRoots {
		visible[r] = true
	}
	for _, r := range append(slices.Clone(p.VisibleRoots), p.WritableRoots...) {
		for _, res := range ReservedRoots {
			if strings.EqualFold(r, res) {
				return p, wserr.New(wserr.InvalidArgument, "profile", r, "root %q is reserved: the run's inputs and runtime records (%v) are hidden from the model, never visible or writable, nor a root differing from one only in case", r, ReservedRoots)
			}
		}
		if strings.EqualFold(r, HostRoot) {
			return p, wserr.New(wserr.InvalidArgument, "profile", r, "root %q is reserved: host/ holds the run's allowed host paths (allowPaths), in every profile; it is never a stored root, nor is one differing from it only in case", r)
		}
	}
	for _, w := range p.WritableRoots {
		if !visible[w] {
			return p, wserr.New(wserr.InvalidArgument, "profile", w, "writable root %q is not visible", w)
		}
	}
	if p.MaxRunBytes < 0 {
		return p, wserr.New(wserr.InvalidArgument, "profile", "", "maxRunBytes must not be negative")
	}
	if p.MaxCheckpointBytes < 0 {
		return p, wserr.New(wserr.InvalidArgument, "profile", "", "maxCheckpointBytes must not be negative")
	}
	if p.MaxCheckpoints < 0 {
		return p, wserr.New(wserr.InvalidArgument, "profile", "", "maxCheckpoints must not be negative")
	}
	return p.normalizeHost()
}

func (p Profile) autoCheckpoint() bool { return p.AutoCheckpoint == nil || *p.AutoCheckpoint }

func (p Profile) visible(top string) bool  { return slices.Contains(p.VisibleRoots, top) }
func (p Profile) writable(top string) bool { return slices.Contains(p.WritableRoots, top) }
