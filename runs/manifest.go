package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TargetKind is where an artifact goes when a run commits.
type TargetKind string

// Artifact targets.
const (
	TargetMessageBody      TargetKind = "message_body"      // the chat message text
	TargetMessageExtra     TargetKind = "message_extra"     // a key of the message's extra data
	TargetCombinedMarkdown TargetKind = "combined_markdown" // merged into the body by the template
	TargetHidden           TargetKind = "hidden"            // kept in the run only
)

// Target is an artifact's destination. In JSON it is a string
// ("message_body", "combined_markdown", "hidden") or {"message_extra": key}.
type Target struct {
	Kind TargetKind
	Key  string // for message_extra
}

// MarshalJSON writes the seed's form.
func (t Target) MarshalJSON() ([]byte, error) {
	if t.Kind == TargetMessageExtra {
		return json.Marshal(map[string]string{string(TargetMessageExtra): t.Key})
	}
	return json.Marshal(string(t.Kind))
}

// UnmarshalJSON reads the seed's form; unknown targets are rejected by
// Manifest.Validate, not here, so the error can name the artifact.
func (t *Target) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Target{Kind: TargetKind(s)}
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 {
		return fmt.Errorf("target must be a string or {\"message_extra\": key}")
	}
	for k, v := range m {
		*t = Target{Kind: TargetKind(k), Key: v}
	}
	return nil
}

// Artifact is one workspace file that takes part in a commit.
type Artifact struct {
	ID            string `json:"id"`
	Path          string `json:"path"`
	Kind          string `json:"kind"`
	Target        Target `json:"target"`
	Required      bool   `json:"required"`
	AssemblyOrder int    `json:"assemblyOrder"`
}

// CommitPolicy says how artifacts become a message.
type CommitPolicy struct {
	DefaultTarget TargetKind `json:"defaultTarget"`
	// CombineTemplate merges artifacts into the body: {{id}} is replaced by
	// artifact id's content ("" when an optional artifact is missing).
	CombineTemplate string `json:"combineTemplate,omitempty"`
	// StoreArtifactsInExtra copies every committed artifact's content into
	// the message's agent metadata.
	StoreArtifactsInExtra bool `json:"storeArtifactsInExtra"`
}

// Manifest is a run's runtime contract: which workspace files a commit
// assembles into a message, and how.
type Manifest struct {
	WorkspaceVersion int          `json:"workspaceVersion"`
	Artifacts        []Artifact   `json:"artifacts"`
	CommitPolicy     CommitPolicy `json:"commitPolicy"`
}

// DefaultManifest commits output/main.md as the message body.
func DefaultManifest() Manifest {
	return Manifest{
		WorkspaceVersion: 1,
		Artifacts:        []Artifact{{ID: "main", Path: "output/main.md", Kind: "body", Target: Target{Kind: TargetMessageBody}, Required: true, AssemblyOrder: 10}},
		CommitPolicy:     CommitPolicy{DefaultTarget: TargetMessageBody},
	}
}

var (
	artifactIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	placeholder       = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
)

func invalidManifest(format string, args ...any) error {
	return wserr.New(wserr.InvalidManifest, "manifest", "", format, args...)
}

// MaxManifestBytes bounds a run's manifest, as JSON: the run's row holds
// it whole, and an archive row holds at most 64 MiB.
const MaxManifestBytes = 1 << 20

// manifestFits refuses a manifest whose JSON, b, is past MaxManifestBytes
// with manifest.invalid.
func manifestFits(b []byte) error {
	if len(b) > MaxManifestBytes {
		return invalidManifest("the manifest is %d bytes as JSON, past the %d a run keeps", len(b), MaxManifestBytes)
	}
	return nil
}

// withDefaults returns m with each artifact that names no target given
// the commit policy's defaultTarget (message_body when that is unset too),
// as the seed's manifest means it; m itself is not changed.
func (m Manifest) withDefaults() Manifest {
	def := m.CommitPolicy.DefaultTarget
	if def == "" {
		def = TargetMessageBody
	}
	untargeted := func(a Artifact) bool { return a.Target == Target{} }
	if !slices.ContainsFunc(m.Artifacts, untargeted) {
		return m
	}
	m.Artifacts = slices.Clone(m.Artifacts)
	for i, a := range m.Artifacts {
		if untargeted(a) {
			m.Artifacts[i].Target = Target{Kind: def}
		}
	}
	return m
}

// Validate fails fast (manifest.invalid) on an unknown target, an invalid
// artifact path (below input/ or a runtime record's root included), a
// duplicate or malformed id, an invalid commit policy (a template that
// names a hidden artifact or leaves out a message_body one), or a
// manifest with no message body. An artifact that names no target takes
// the commit policy's defaultTarget.
func (m Manifest) Validate() error { return m.validate(true) }

// validate is Validate; a manifest stored before the template's rules and
// the runtime records' roots were checked (one an archive carries) is held
// to the rest only (strict false): it still assembles as it did.
func (m Manifest) validate(strict bool) error {
	m = m.withDefaults()
	if m.WorkspaceVersion != 1 {
		return invalidManifest("workspaceVersion must be 1, not %d", m.WorkspaceVersion)
	}
	if len(m.Artifacts) == 0 {
		return invalidManifest("no artifacts")
	}
	ids := map[string]bool{}
	paths := map[string]string{}
	body := false
	for _, a := range m.Artifacts {
		if !artifactIDPattern.MatchString(a.ID) {
			return invalidManifest("artifact id %q must be 1-64 letters, digits, '_', '-' or '.'", a.ID)
		}
		if ids[a.ID] {
			return invalidManifest("artifact id %q appears twice", a.ID)
		}
		ids[a.ID] = true
		p, err := vfs.ParsePath(a.Path)
		if err != nil {
			return invalidManifest("artifact %q: %s", a.ID, wserr.MessageOf(err))
		}
		if p.Top() == InputRoot || strict && slices.Contains(ReservedRoots, p.Top()) || p.Dir().IsRoot() {
			return invalidManifest("artifact %q: path %q must be a file below a workspace root, not below input/ or a runtime record's (%v)", a.ID, a.Path, ReservedRoots)
		}
		if p.Top() == ScratchRoot || p.Top() == HostRoot {
			return invalidManifest("artifact %q: path %q is in %s/, which is never committed", a.ID, a.Path, p.Top())
		}
		if other, ok := paths[p.String()]; ok {
			return invalidManifest("artifacts %q and %q share path %q", other, a.ID, a.Path)
		}
		paths[p.String()] = a.ID
		switch a.Target.Kind {
		case TargetMessageBody, TargetCombinedMarkdown, TargetHidden:
			if a.Target.Key != "" {
				return invalidManifest("artifact %q: target %s takes no key", a.ID, a.Target.Kind)
			}
		case TargetMessageExtra:
			if a.Target.Key == "" {
				return invalidManifest("artifact %q: message_extra needs a key", a.ID)
			}
		default:
			return invalidManifest("artifact %q: unknown target %q", a.ID, a.Target.Kind)
		}
		if a.Target.Kind == TargetMessageBody || a.Target.Kind == TargetCombinedMarkdown {
			body = true
		}
	}
	if !body {
		return invalidManifest("no artifact targets the message body")
	}
	switch m.CommitPolicy.DefaultTarget {
	case "", TargetMessageBody:
	default:
		return invalidManifest("commitPolicy.defaultTarget must be message_body, not %q", m.CommitPolicy.DefaultTarget)
	}
	named := map[string]bool{}
	for _, ph := range placeholder.FindAllStringSubmatch(m.CommitPolicy.CombineTemplate, -1) {
		if !ids[ph[1]] {
			return invalidManifest("commitPolicy.combineTemplate names unknown artifact %q", ph[1])
		}
		named[ph[1]] = true
	}
	for _, a := range m.Artifacts {
		switch {
		case !strict:
		case a.Target.Kind == TargetHidden && named[a.ID]:
			// A hidden artifact stays in the run; it never enters the chat.
			return invalidManifest("commitPolicy.combineTemplate names hidden artifact %q, which never enters the message", a.ID)
		case a.Target.Kind == TargetMessageBody && m.CommitPolicy.CombineTemplate != "" && !named[a.ID],
			a.Target.Kind == TargetCombinedMarkdown && m.CommitPolicy.CombineTemplate != "" && !named[a.ID]:
			// With a template the body is the template: a body artifact
			// it leaves out would be lost.
			return invalidManifest("commitPolicy.combineTemplate leaves out %s artifact %q: name it as {{%s}}", a.Target.Kind, a.ID, a.ID)
		}
	}
	extra := map[string]string{}
	for _, a := range m.Artifacts {
		if a.Target.Kind != TargetMessageExtra || !strict {
			continue
		}
		if other, ok := extra[a.Target.Key]; ok {
			// One key holds one artifact: the second would replace the first.
			return invalidManifest("artifacts %q and %q both target message_extra key %q", other, a.ID, a.Target.Key)
		}
		extra[a.Target.Key] = a.ID
	}
	for _, a := range m.Artifacts {
		if a.Target.Kind == TargetCombinedMarkdown && m.CommitPolicy.CombineTemplate == "" {
			return invalidManifest("artifact %q targets combined_markdown but commitPolicy.combineTemplate is empty", a.ID)
		}
	}
	return nil
}

// sorted returns the artifacts in assembly order (ties by id).
func (m Manifest) sorted() []Artifact {
	out := slices.Clone(m.Artifacts)
	slices.SortStableFunc(out, func(a, b Artifact) int {
		if a.AssemblyOrder != b.AssemblyOrder {
			return a.AssemblyOrder - b.AssemblyOrder
		}
		return cmpString(a.ID, b.ID)
	})
	return out
}

// ParseManifest decodes and validates a stored manifest (one an archive
// carries); unknown fields are rejected so a typo cannot silently drop an
// artifact. A manifest stored before Validate checked the template's
// rules and the runtime records' roots passes without them, as it
// assembles the same; a new manifest is held to Validate.
func ParseManifest(b []byte) (Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, invalidManifest("%v", err)
	}
	m = m.withDefaults()
	if err := m.validate(false); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

func loadManifest(ctx context.Context, tx *index.Tx, runID string) (Manifest, error) {
	var s string
	if err := tx.GetContext(ctx, &s, `SELECT manifest FROM runs WHERE id = ?`, runID); err != nil {
		return Manifest{}, index.Translate(err)
	}
	if s == "" {
		return DefaultManifest(), nil
	}
	var m Manifest
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Manifest{}, wserr.New(wserr.Corrupt, "manifest", "", "run %s has an unreadable manifest: %v", runID, err)
	}
	// A stored manifest another writer wrote (an archive's, a sync's) may
	// leave an artifact's target to the commit policy's default.
	return m.withDefaults(), nil
}

// reachable refuses a manifest whose required artifact lies where the
// run's profile lets no write go: no commit of the run could ever succeed.
func (m Manifest) reachable(prof Profile) error {
	for _, a := range m.Artifacts {
		if !a.Required {
			continue
		}
		p, err := vfs.ParsePath(a.Path)
		if err != nil {
			return invalidManifest("artifact %q: %s", a.ID, wserr.MessageOf(err))
		}
		if !prof.writable(p.Top()) {
			return invalidManifest("artifact %q is required, but %s is not among the roots this run's profile writes (%v): no commit could find it", a.ID, a.Path, prof.WritableRoots)
		}
	}
	return nil
}

// SetManifest validates m and stores it with the run, journaling
// manifest_set. It fails with manifest.invalid and changes nothing then,
// also for a required artifact the run's profile lets no write make, and
// with workspace.size_limit_exceeded when the manifest would take the
// store past its cap (Options.MaxStoreBytes, or the maxStoreBytes
// setting), as a record would.
func (s *Service) SetManifest(ctx context.Context, runID string, m Manifest) error {
	m = m.withDefaults()
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("set manifest: %w", err)
	}
	if err := manifestFits(b); err != nil {
		return err
	}
	return s.UpdateInRoom(ctx, func(tx *index.Tx) error {
		run, caps, err := findRunCaps(ctx, tx, runID) // the store's cap with the run
		if err != nil {
			return err
		}
		if run.Status.Final() {
			return wserr.New(wserr.InvalidState, "set manifest", "", "run %s is %s", runID, run.Status)
		}
		if err := m.reachable(run.Profile); err != nil {
			return err
		}
		// The manifest is kept whole on the run's row, with an event:
		// held to the store's cap as a record is, once written.
		room := s.roomCheck(ctx, tx, "set manifest", &caps)
		room.grow()
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET manifest = ?, updated_at = ? WHERE id = ?`, string(b), s.now().UnixNano(), runID); err != nil {
			return index.Translate(err)
		}
		if _, err = s.journal.Append(ctx, tx, runID, journal.ManifestSet, journal.Info, map[string]any{"artifacts": len(m.Artifacts)}); err != nil {
			return err
		}
		return room.settle(ctx, tx)
	})
}

// Manifest returns the run's manifest (the default one if none was set).
func (s *Service) Manifest(ctx context.Context, runID string) (Manifest, error) {
	var m Manifest
	err := s.db.View(ctx, func(tx *index.Tx) error {
		if _, err := findRun(ctx, tx, runID); err != nil {
			return err
		}
		var err error
		m, err = loadManifest(ctx, tx, runID)
		return err
	})
	return m, err
}
