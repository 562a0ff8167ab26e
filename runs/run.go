package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Run is an agent run: one send, regenerate, swipe or continue.
type Run struct {
	ID             string          `json:"runId"`
	ChatID         string          `json:"workspaceId"`
	Kind           string          `json:"kind"`
	StableChatID   string          `json:"stableChatId"`
	ChatRef        json.RawMessage `json:"chatRef"`
	Profile        Profile         `json:"profile"`
	Status         Status          `json:"status"`
	Root           cas.Hash        `json:"root"`
	PersistBase    cas.Hash        `json:"persistBase"`
	PersistVersion int64           `json:"persistVersion"`
	HeadCheckpoint int64           `json:"headCheckpoint"`
	// Records is the tree of what the host recorded (tool-args/,
	// tool-results/, model-responses/); zero until the first record.
	Records    cas.Hash   `json:"records,omitzero"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// PrimaryRoot is the run's active project, resolved from its profile
	// (seed 004's fallback chain; see Profile.Primary).
	PrimaryRoot PrimaryRoot `json:"primaryRoot"`
}

type runRow struct {
	ID             string         `db:"id"`
	ChatID         string         `db:"chat_id"`
	Kind           string         `db:"kind"`
	StableChatID   string         `db:"stable_chat_id"`
	ChatRef        string         `db:"chat_ref"`
	Profile        string         `db:"profile"`
	Status         string         `db:"status"`
	Root           cas.Hash       `db:"root"`
	PersistBase    cas.Hash       `db:"persist_base"`
	PersistVersion int64          `db:"persist_version"`
	HeadCheckpoint int64          `db:"head_checkpoint"`
	Records        cas.Hash       `db:"records"`
	CreatedAt      int64          `db:"created_at"`
	UpdatedAt      int64          `db:"updated_at"`
	FinishedAt     sql.NullInt64  `db:"finished_at"`
	ChatPolicy     sql.NullString `db:"chat_policy"`  // findRunCaps only
	StorePolicy    sql.NullString `db:"store_policy"` // findRunCaps only
}

const runCols = `r.id, r.chat_id, c.kind, c.stable_chat_id, r.chat_ref, r.profile, r.status, r.root,
	r.persist_base, r.persist_version, r.head_checkpoint, r.records, r.created_at, r.updated_at, r.finished_at`

func (r runRow) run() (Run, error) {
	out := Run{ID: r.ID, ChatID: r.ChatID, Kind: r.Kind, StableChatID: r.StableChatID, ChatRef: json.RawMessage(r.ChatRef),
		Status: Status(r.Status), Root: r.Root, PersistBase: r.PersistBase, PersistVersion: r.PersistVersion,
		HeadCheckpoint: r.HeadCheckpoint, Records: r.Records, CreatedAt: time.Unix(0, r.CreatedAt).UTC(), UpdatedAt: time.Unix(0, r.UpdatedAt).UTC()}
	if err := json.Unmarshal([]byte(r.Profile), &out.Profile); err != nil {
		return Run{}, wserr.New(wserr.Corrupt, "run", "", "run %s has an unreadable profile: %v", r.ID, err)
	}
	if r.FinishedAt.Valid {
		t := time.Unix(0, r.FinishedAt.Int64).UTC()
		out.FinishedAt = &t
	}
	// Validated when the run was created; a profile written before
	// primary roots existed falls back like any profile without one.
	out.PrimaryRoot, _ = out.Profile.Primary()
	return out, nil
}

func findRun(ctx context.Context, tx *index.Tx, id string) (Run, error) {
	var r runRow
	err := tx.GetContext(ctx, &r, `SELECT `+runCols+` FROM runs r JOIN chats c ON c.id = r.chat_id WHERE r.id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, wserr.New(wserr.RunNotFound, "run", "", "no run %q", id)
	}
	if err != nil {
		return Run{}, index.Translate(err)
	}
	return r.run()
}

// findRunCaps is findRun for a caller that may take a checkpoint or add
// to the store: the same statement reads the chat's own policy row and
// the store's, which the checkpoint's caps (capBytes) and the store's cap
// need, so neither reads another row for them, and each transaction sees
// the policy as it is, whoever set it.
func findRunCaps(ctx context.Context, tx *index.Tx, id string) (Run, runCaps, error) {
	var r runRow
	err := tx.GetContext(ctx, &r, `SELECT `+runCols+`, p.policy AS chat_policy, sp.policy AS store_policy FROM runs r JOIN chats c ON c.id = r.chat_id
		LEFT JOIN policies p ON p.scope = r.chat_id LEFT JOIN policies sp ON sp.scope = '`+StoreScope+`' WHERE r.id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, runCaps{}, wserr.New(wserr.RunNotFound, "run", "", "no run %q", id)
	}
	if err != nil {
		return Run{}, runCaps{}, index.Translate(err)
	}
	run, err := r.run()
	if err != nil {
		return Run{}, runCaps{}, err
	}
	caps := run.caps()
	caps.chatPolicy, caps.storePolicy = &r.ChatPolicy, &r.StorePolicy
	return run, caps, nil
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ReservedRunID is the one run id CreateRun refuses though it has the
// form of one: wsctl's name for the newest run.
const ReservedRunID = "latest"

// CreateRequest describes a new run.
type CreateRequest struct {
	Chat    ChatKey         `json:"chat"`
	ChatRef json.RawMessage `json:"chatRef,omitempty"` // the host's current reference; may change on rename
	RunID   string          `json:"runId,omitempty"`   // default: generated
	Profile *Profile        `json:"profile,omitempty"` // default: DefaultProfile
	// Inputs are materialized under input/, keyed by path relative to
	// input/ ("prompt_snapshot.json", "world/activated.md"). They are
	// immutable for the rest of the run.
	Inputs map[string][]byte `json:"-"`
	// Materialize names virtual resources ("chat/history.tail.md") whose
	// content is read once, now, and fixed under input/ at the same path
	// ("input/chat/history.tail.md"): the explicit way a virtual resource
	// becomes part of the run's stored, checkpointed inputs.
	Materialize []string `json:"materialize,omitempty"`
	// Manifest is the run's commit contract; default DefaultManifest. It
	// is validated before anything is written.
	Manifest *Manifest `json:"manifest,omitempty"`
}

// PersistSnapshot is the content of input/persist_snapshot.json: the base
// the run's persist/ projection started from.
type PersistSnapshot struct {
	ChatWorkspaceID string   `json:"chatWorkspaceId"`
	PersistRoot     cas.Hash `json:"persistRoot"`
	PersistVersion  int64    `json:"persistVersion"`
}

// addInput adds content b at input/rel to inputs. It fails with
// workspace.invalid_path if input/rel is not a valid path (too long once
// under input/) or is input/persist_snapshot.json, which the store
// writes, and with workspace.invalid_argument if two inputs land on the
// same path (map order would decide which content wins).
func addInput(inputs map[vfs.Path][]byte, rel vfs.Path, b []byte) error {
	p := vfs.MustPath(InputRoot)
	for _, seg := range rel.Segments() {
		var err error
		if p, err = p.Join(seg); err != nil {
			return err
		}
	}
	if p.String() == InputRoot+"/persist_snapshot.json" {
		return wserr.New(wserr.InvalidPath, "create run", p.String(), "input/persist_snapshot.json is written by the store")
	}
	if _, dup := inputs[p]; dup {
		return wserr.New(wserr.InvalidArgument, "create run", p.String(), "input %s is given twice (names that clean to the same path)", p)
	}
	inputs[p] = b
	return nil
}

// CreateRun creates a run in its chat workspace (creating that on first
// use), materializes the inputs under input/, projects the chat's persist/
// layer into the run by sharing its tree (O(1), nothing is copied), records
// that base in input/persist_snapshot.json, and starts the run (status
// running), journaling run_created and status_changed, then checkpoints the
// initial workspace if the profile asks for it. It fails with
// workspace.invalid_argument for a bad request (two input keys naming the
// same path, a run id of another form or ReservedRunID included), workspace.invalid_path for a bad input path,
// manifest.invalid for a manifest (the default one, when none is given)
// whose required artifacts the profile cannot write, and run.exists if
// the id is taken.
func (s *Service) CreateRun(ctx context.Context, req CreateRequest) (Run, error) {
	if err := req.Chat.validate(); err != nil {
		return Run{}, err
	}
	id := req.RunID
	if id == "" {
		id = s.newRunID()
	}
	if !runIDPattern.MatchString(id) {
		return Run{}, wserr.New(wserr.InvalidArgument, "create run", "", "run id %q must be 1-128 letters, digits, '_', '-' or '.'", id)
	}
	if id == ReservedRunID {
		return Run{}, wserr.New(wserr.InvalidArgument, "create run", "", "run id %q is reserved: wsctl names the newest run so", id)
	}
	prof := DefaultProfile()
	if req.Profile != nil {
		prof = *req.Profile
		if err := prof.fits(); err != nil {
			return Run{}, err
		}
	}
	prof, err := prof.normalize()
	if err != nil {
		return Run{}, err
	}
	if err := s.guardStore(prof); err != nil {
		return Run{}, err
	}
	if len(req.ChatRef) > 0 && !json.Valid(req.ChatRef) {
		return Run{}, wserr.New(wserr.InvalidArgument, "create run", "", "chatRef is not valid JSON")
	}
	if len(req.ChatRef) > MaxChatRefBytes {
		return Run{}, wserr.New(wserr.InvalidArgument, "create run", "", "chatRef is %d bytes, past the %d a run keeps: keep the host's reference small (an id, a title)", len(req.ChatRef), MaxChatRefBytes)
	}
	inputs := make(map[vfs.Path][]byte, len(req.Inputs)+len(req.Materialize))
	for name, b := range req.Inputs {
		rel, err := vfs.ParsePath(name)
		if err != nil {
			return Run{}, err
		}
		if err := addInput(inputs, rel, b); err != nil {
			return Run{}, err
		}
	}
	for _, name := range req.Materialize {
		v, err := vfs.ParsePath(name)
		if err != nil {
			return Run{}, err
		}
		if _, _, _, ok := s.virtual.Match(v); !ok {
			return Run{}, wserr.New(wserr.FileNotFound, "create run", v.String(), "no virtual resource is mounted there")
		}
		// Read before the transaction: providers may be slow, and the
		// write lock should not wait on them.
		res, err := s.virtual.Read(ctx, v, vfs.ReadOptions{})
		if err != nil {
			return Run{}, err
		}
		if err := addInput(inputs, v, res.Content); err != nil {
			return Run{}, err
		}
	}
	manJSON := ""
	if req.Manifest != nil {
		man := req.Manifest.withDefaults()
		if err := man.Validate(); err != nil {
			return Run{}, err
		}
		if err := man.reachable(prof); err != nil {
			return Run{}, err
		}
		b, err := json.Marshal(man)
		if err != nil {
			return Run{}, fmt.Errorf("create run: %w", err)
		}
		if err := manifestFits(b); err != nil {
			return Run{}, err
		}
		manJSON = string(b)
	} else if DefaultManifest().reachable(prof) != nil {
		// As manifest.set refuses a manifest no commit could satisfy.
		return Run{}, invalidManifest("the default manifest commits output/main.md, which this run's profile cannot write (writableRoots %v): give the run a manifest whose required artifacts its profile can write", prof.WritableRoots)
	}
	profJSON, err := json.Marshal(prof)
	if err != nil {
		return Run{}, fmt.Errorf("create run: %w", err)
	}

	var run Run
	err = s.UpdateInRoom(ctx, func(tx *index.Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM runs WHERE id = ?`, id); err != nil {
			return index.Translate(err)
		}
		if n > 0 {
			return wserr.New(wserr.RunExists, "create run", "", "run %q already exists", id)
		}
		chat, err := s.ensureChat(ctx, tx, req.Chat, req.ChatRef)
		if err != nil {
			return err
		}
		root, err := s.trees.Put(ctx, tx, nil)
		if err != nil {
			return err
		}
		snap, _ := json.MarshalIndent(PersistSnapshot{ChatWorkspaceID: chat.ID, PersistRoot: chat.PersistRoot, PersistVersion: chat.PersistVersion}, "", "  ")
		inputs[vfs.MustPath(InputRoot+"/persist_snapshot.json")] = snap
		room := s.roomCheck(ctx, tx, "create run", nil) // the inputs together, against the store's cap
		// The inputs go in as one change of the tree: each directory is
		// written once, however many inputs it holds.
		changes := make([]vfs.FileChange, 0, len(inputs))
		for _, p := range slices.SortedFunc(maps.Keys(inputs), vfs.ComparePaths) {
			if err := room.add(p, int64(len(inputs[p]))); err != nil {
				return err
			}
			if n := len(changes); n > 0 && p.HasPrefix(changes[n-1].Path) {
				// In path order (a segment at a time) a file comes just
				// before what lies below it.
				return wserr.New(wserr.NotADirectory, "create run", p.String(), "input %s is a file: nothing lies below it", changes[n-1].Path)
			}
			h, err := s.blobs.PutBytes(ctx, tx, inputs[p])
			if err != nil {
				return err
			}
			changes = append(changes, vfs.FileChange{Path: p, Entry: &vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(inputs[p]))}})
		}
		if root, err = s.trees.SetFiles(ctx, tx, root, changes); err != nil {
			return err
		}
		if chat.PersistRoot != vfs.EmptyTree {
			pe, err := s.trees.Lookup(ctx, tx, chat.PersistRoot, vfs.Root())
			if err != nil {
				return err
			}
			pe.Kind = vfs.KindDir
			if root, err = s.trees.Set(ctx, tx, root, vfs.MustPath(PersistRoot), &pe); err != nil {
				return err
			}
		}
		now := s.now().UnixNano()
		ref := string(req.ChatRef)
		if ref == "" {
			ref = "{}"
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, chat_id, chat_ref, profile, status, root, persist_base,
			persist_version, manifest, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, chat.ID, ref, string(profJSON), string(Created), root, chat.PersistRoot, chat.PersistVersion, manJSON, now, now); err != nil {
			return index.Translate(err)
		}
		if _, err := s.journal.Append(ctx, tx, id, journal.RunCreated, journal.Info, map[string]any{
			"runId": id, "workspaceId": chat.ID, "stableChatId": chat.StableChatID, "kind": chat.Kind,
			"profileId": prof.ID, "root": root.String(), "inputs": len(inputs),
		}); err != nil {
			return err
		}
		if err := s.setStatus(ctx, tx, id, Created, Running, "started"); err != nil {
			return err
		}
		if prof.autoCheckpoint() {
			if _, err := s.checkpointTx(ctx, tx, id, runCaps{chatID: chat.ID, profile: &prof}, root, 0, "after_init"); err != nil {
				return err
			}
		}
		if err := room.settle(ctx, tx); err != nil {
			return err
		}
		run, err = findRun(ctx, tx, id)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return run, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// setFile stores content and sets it at p in root, returning the new root.
func (s *Service) setFile(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, content []byte) (cas.Hash, error) {
	h, err := s.blobs.PutBytes(ctx, tx, content)
	if err != nil {
		return cas.Hash{}, err
	}
	return s.trees.Set(ctx, tx, root, p, &vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(content))})
}

// Run returns the run with the given id. It fails with run.not_found.
func (s *Service) Run(ctx context.Context, id string) (Run, error) {
	var r Run
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		r, err = findRun(ctx, tx, id)
		return err
	})
	return r, err
}

// ListQuery filters Runs.
type ListQuery struct {
	ChatID string // a chat workspace id; empty: all
	Status Status // empty: all
	Limit  int    // 0: no limit
	// After is the id of the last run of the page before: the list goes
	// on from the run after it, in the list's order. Empty: from the
	// newest.
	After string
}

// Runs lists runs, newest first (then by id), at most q.Limit (0: every
// one): it holds every run it returns, so a list of any size is read with
// RunsPage. An unknown status or a negative limit is
// workspace.invalid_argument; an After that names no run (deleted since
// the page before, say) is run.not_found.
func (s *Service) Runs(ctx context.Context, q ListQuery) ([]Run, error) {
	if q.Limit < 0 {
		return nil, wserr.New(wserr.InvalidArgument, "list runs", "", "limit %d is negative (0: no limit)", q.Limit)
	}
	limit := q.Limit
	if limit == 0 {
		limit = -1
	}
	out, _, err := s.listRuns(ctx, q, limit, -1)
	return out, err
}

// The runs a page holds (RunsPage).
const (
	DefaultRunPage = 1000
	MaxRunPage     = 10000
	// MaxRunPageRefBytes bounds the chat references and profiles a page
	// holds: a page ends before the run that would take its chatRefs and
	// profiles past it (a page holds one run at least, whose chatRef is
	// at most MaxChatRefBytes and profile at most MaxProfileBytes).
	MaxRunPageRefBytes = 4 << 20
)

// RunsPage lists runs as Runs does, a page at a time: up to q.Limit runs
// (0: DefaultRunPage), fewer if their chat references and profiles would
// pass MaxRunPageRefBytes; more says whether runs follow the page (ask again
// with After the page's last run). A page reads the runs it returns, from
// where the one before ended. It fails as Runs does, and with
// workspace.invalid_argument for a Limit above MaxRunPage.
func (s *Service) RunsPage(ctx context.Context, q ListQuery) (page []Run, more bool, err error) {
	if q.Limit == 0 {
		q.Limit = DefaultRunPage
	}
	if q.Limit < 1 || q.Limit > MaxRunPage {
		return nil, false, wserr.New(wserr.InvalidArgument, "list runs", "", "limit %d must be in 0..%d (0: %d)", q.Limit, MaxRunPage, DefaultRunPage)
	}
	return s.listRuns(ctx, q, q.Limit, MaxRunPageRefBytes)
}

// listRuns reads q's runs, at most limit (-1: every one), a row at a
// time; with refBytes >= 0 the list ends before the run whose chatRef and
// profile would take the list's past refBytes (one run at least). more says
// whether runs follow.
func (s *Service) listRuns(ctx context.Context, q ListQuery, limit, refBytes int) (out []Run, more bool, err error) {
	if q.Status != "" && !q.Status.Valid() {
		return nil, false, wserr.New(wserr.InvalidArgument, "list runs", "", "unknown status %q", q.Status)
	}
	// Only the filters given go into the query, so a chat's runs come
	// from the runs_chat index (chat_id, created_at), a status's from
	// runs_status and the newest from runs_newest, not from a scan of
	// every run. Given both, the chat's runs are read and their status
	// checked (the unary + keeps SQLite from the status index): a chat
	// holds few runs, a status may hold most of the store's.
	var where []string
	var args []any
	if q.ChatID != "" {
		where, args = append(where, "r.chat_id = ?"), append(args, q.ChatID)
	}
	if q.Status != "" {
		cond := "r.status = ?"
		if q.ChatID != "" {
			cond = "+r.status = ?"
		}
		where, args = append(where, cond), append(args, string(q.Status))
	}
	err = s.db.View(ctx, func(tx *index.Tx) error {
		out, more = nil, false
		if q.After != "" {
			cond, at, found, err := pastRow(ctx, tx, "runs", "r.", q.After)
			if err != nil {
				return err
			}
			if !found {
				// No op of its own: "list runs" is added below.
				return wserr.New(wserr.RunNotFound, "", "", "no run %q to list after: it may have been deleted since; list again from the newest", q.After)
			}
			where, args = append(where, cond), append(args, at...)
		}
		cond := ""
		if len(where) > 0 {
			cond = "WHERE " + strings.Join(where, " AND ")
		}
		// One run past the list says whether more follow; the rows are
		// read one at a time, so a list cut by its references' bytes
		// holds no more than that.
		past := -1 // SQLite's "no limit"
		if limit >= 0 {
			past = limit + 1
		}
		rows, err := tx.QueryxContext(ctx, `SELECT `+runCols+` FROM runs r JOIN chats c ON c.id = r.chat_id
			`+cond+` ORDER BY r.created_at DESC, r.id LIMIT ?`, append(args, past)...)
		if err != nil {
			return err
		}
		more, err = readPage(rows, limit, refBytes, func(r *runRow) int { return len(r.ChatRef) + len(r.Profile) }, func(r *runRow) error {
			run, err := r.run()
			if err != nil {
				return err
			}
			out = append(out, run)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list runs: %w", err)
	}
	if out == nil {
		out = []Run{}
	}
	return out, more, nil
}

// pastRow returns the condition, and its arguments, that keeps a listing
// of table in (created_at DESC, id) order to the rows after row id
// (columns named with prefix, the table's alias and a dot), and whether
// that row exists. The condition's first term bounds the index's range,
// so a page starts where the one before ended, not at the newest row.
func pastRow(ctx context.Context, tx *index.Tx, table, prefix, id string) (cond string, args []any, found bool, err error) {
	var at int64
	err = tx.GetContext(ctx, &at, `SELECT created_at FROM `+table+` WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	cond = prefix + "created_at <= ? AND (" + prefix + "created_at < ? OR " + prefix + "id > ?)"
	return cond, []any{at, at, id}, true, nil
}

// readPage reads rows of R one at a time, handing each to add, until
// limit of them (-1: no limit) or the row whose variable-size fields
// (size: a chat reference, a run's profile) would take theirs past
// refBytes (-1: no bound; one row at least), and says whether a row
// followed them (the query asks one past the page for it). A page cut by
// those bytes holds no more than they.
func readPage[R any](rows *sqlx.Rows, limit, refBytes int, size func(*R) int, add func(*R) error) (more bool, err error) {
	defer rows.Close()
	n, bytes := 0, 0
	for rows.Next() {
		var r R
		if err := rows.StructScan(&r); err != nil {
			return false, err
		}
		ref := size(&r)
		if n == limit || refBytes >= 0 && n > 0 && bytes+ref > refBytes {
			return true, nil
		}
		if err := add(&r); err != nil {
			return false, err
		}
		n, bytes = n+1, bytes+ref
	}
	return false, rows.Err()
}

// RunIDsWithPrefix returns, in id order, the ids of at most limit runs
// whose id starts with prefix, and how many runs' ids do. It reads those
// runs' entries of the id index, not every run: a caller that names a run
// by a prefix of its id pays for the runs it matches. A negative limit is
// workspace.invalid_argument.
func (s *Service) RunIDsWithPrefix(ctx context.Context, prefix string, limit int) (ids []string, n int, err error) {
	if limit < 0 {
		return nil, 0, wserr.New(wserr.InvalidArgument, "runs with prefix", "", "limit %d is negative", limit)
	}
	// A run id is ASCII letters, digits, '_', '.' and '-', all below
	// 0x7f (runIDPattern): every id that starts with prefix sorts from
	// prefix up to prefix+"\x7f".
	err = s.db.View(ctx, func(tx *index.Tx) error {
		ids, n = nil, 0
		rows, err := tx.QueryxContext(ctx, `SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id`, prefix, prefix+"\x7f")
		if err != nil {
			return index.Translate(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return index.Translate(err)
			}
			if n++; len(ids) < limit {
				ids = append(ids, id)
			}
		}
		return index.Translate(rows.Err())
	})
	if err != nil {
		return nil, 0, fmt.Errorf("runs with prefix: %w", err)
	}
	return ids, n, nil
}

// MaxStatusReasonBytes is the longest reason a status change takes: it is
// journaled, and a status change is never refused for the store's cap.
const MaxStatusReasonBytes = 4096

// SetStatus moves a run to status to, journaling status_changed (and
// run_failed or run_cancelled for those final statuses). It fails with
// run.not_found for a run that is not there, run.invalid_transition for a
// move the status machine forbids, and for completed: only Finish
// completes a run; with workspace.invalid_argument for a reason longer
// than MaxStatusReasonBytes.
func (s *Service) SetStatus(ctx context.Context, runID string, to Status, reason string) error {
	if len(reason) > MaxStatusReasonBytes {
		return wserr.New(wserr.InvalidArgument, "set status", "", "reason is %d bytes, longer than %d", len(reason), MaxStatusReasonBytes)
	}
	var chatID string
	var after int64
	if to.Final() {
		after = s.candidatesEnd(ctx)
	}
	err := s.update(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return err // a run that is not there, whatever the status asked
		}
		if to == Completed {
			// Completing promotes persist/ to the chat; a bare status
			// change would drop those changes silently.
			return wserr.New(wserr.InvalidState, "set status", "", "run %s: a run completes through Finish, which promotes its persist/ changes", runID)
		}
		chatID = run.ChatID
		return s.setStatus(ctx, tx, runID, run.Status, to, reason)
	})
	if err == nil && to.Final() {
		s.afterFinal(ctx, runID, chatID, after)
	}
	return err
}

func (s *Service) setStatus(ctx context.Context, tx *index.Tx, runID string, from, to Status, reason string) error {
	if err := checkTransition(runID, from, to); err != nil {
		return err
	}
	now := s.now().UnixNano()
	var finished any
	if to.Final() {
		finished = now
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, updated_at = ?, finished_at = coalesce(?, finished_at) WHERE id = ?`,
		string(to), now, finished, runID); err != nil {
		return index.Translate(err)
	}
	if _, err := s.journal.Append(ctx, tx, runID, journal.StatusChanged, journal.Info,
		journal.StatusChange{From: string(from), To: string(to), Reason: reason}); err != nil {
		return err
	}
	final := map[Status]journal.Type{Completed: journal.RunCompleted, Failed: journal.RunFailed, Cancelled: journal.RunCancelled}
	if t, ok := final[to]; ok {
		level := journal.Info
		if to == Failed {
			level = journal.Error
		}
		if _, err := s.journal.Append(ctx, tx, runID, t, level, map[string]any{"reason": reason}); err != nil {
			return err
		}
		return s.collectScratch(ctx, tx, runID, to)
	}
	return nil
}

// DeleteRun deletes a run with its journal, checkpoints and commits,
// records it in the deletion log and, when automatic pruning is on
// (Options.AutoPrune), reclaims the space (Deps.Reclaim); otherwise its
// blobs and trees wait for gc or Reclaim. A reclaim that fails once the
// deletion has committed (the context ending during it included) does not
// fail the call: it is logged as a reclaim_failed entry and the space
// waits for the next gc. An active run
// (running, awaiting approval, paused) must be cancelled first: deleting
// it fails with run.invalid_transition. A commit whose sink is still
// saving does not hold the deletion up: that commit then records nothing
// and fails with run.not_found.
func (s *Service) DeleteRun(ctx context.Context, runID string) error {
	_, err := s.deleteRun(ctx, runID, false)
	return err
}

// CancelAndDeleteRun cancels the run if it has not finished and deletes
// it, in one transaction: it either disappears or stays as it was. As with
// DeleteRun, a commit still saving does not hold it up. It reports whether
// the run had to be cancelled, and fails with run.not_found.
func (s *Service) CancelAndDeleteRun(ctx context.Context, runID string) (cancelled bool, err error) {
	return s.deleteRun(ctx, runID, true)
}

func (s *Service) deleteRun(ctx context.Context, runID string, cancel bool) (cancelled bool, err error) {
	var logID int64
	var chatID string
	after := s.candidatesEnd(ctx)
	err = s.update(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if !run.Status.Final() {
			if !cancel {
				return wserr.New(wserr.InvalidState, "delete run", "", "run %s is %s: cancel it first", runID, run.Status)
			}
			cancelled = true
		}
		if err := s.deleteRunTx(ctx, tx, runID); err != nil {
			return err
		}
		reason := "requested"
		if cancelled {
			reason = "forced"
		}
		chatID = run.ChatID
		logID, err = s.logDeletion(ctx, tx, DeletedRun, run.ChatID, runID, reason, map[string]any{"status": run.Status}, 0)
		return err
	})
	if err != nil {
		return false, err
	}
	// The deletion has committed: a setting that cannot be read, or a
	// reclaim that fails, leaves the space to the next gc instead of
	// failing the call.
	if auto, perr := s.autoPrune(ctx); perr == nil && auto {
		s.reclaimAfterDeletion(ctx, chatID, runID, after, []int64{logID}, 1)
	}
	return cancelled, nil
}
