package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// StoreScope is the scope of the store-wide policy in SetPolicy and
// Policy; any other scope is a chat workspace id.
const StoreScope = "*"

// Policy is a retention policy and the store's caps. Every field is
// optional: a chat's policy overrides the store's field by field, and a
// field neither sets is off (nothing is deleted for it), so the default
// keeps everything, as a conservative store should. Counts are per chat
// workspace; a run that is still active is never deleted, nor a
// checkpoint a commit refers to.
type Policy struct {
	// KeepCompletedRuns keeps the newest N completed runs of a chat and
	// deletes the older ones.
	KeepCompletedRuns *int `json:"keepCompletedRuns,omitempty"`
	// KeepFailedRuns keeps the newest N failed or cancelled runs of a
	// chat and deletes the older ones.
	KeepFailedRuns *int `json:"keepFailedRuns,omitempty"`
	// MaxRunWorkspacesPerChat keeps at most N runs in a chat, counting
	// active ones, by deleting its oldest finished runs.
	MaxRunWorkspacesPerChat *int `json:"maxRunWorkspacesPerChat,omitempty"`
	// MaxCheckpointBytesPerRun caps the bytes a run's checkpoints keep
	// beyond its live tree (checkpoint.Store.Retained): past it the oldest
	// go, in the transaction of the checkpoint that crossed it. A run's
	// Profile.MaxCheckpointBytes overrides it.
	MaxCheckpointBytesPerRun *int64 `json:"maxCheckpointBytesPerRun,omitempty"`
	// AutoPruneAfterDays deletes runs that finished more than N days ago.
	AutoPruneAfterDays *int `json:"autoPruneAfterDays,omitempty"`
	// MaxStoreBytes caps the store's stored bytes (store scope only;
	// Options.MaxStoreBytes, when set, wins).
	MaxStoreBytes *int64 `json:"maxStoreBytes,omitempty"`
}

// over returns p with every field o sets taken from o.
func (p Policy) over(o Policy) Policy {
	pick := func(a, b *int) *int {
		if b != nil {
			return b
		}
		return a
	}
	pick64 := func(a, b *int64) *int64 {
		if b != nil {
			return b
		}
		return a
	}
	return Policy{
		KeepCompletedRuns:        pick(p.KeepCompletedRuns, o.KeepCompletedRuns),
		KeepFailedRuns:           pick(p.KeepFailedRuns, o.KeepFailedRuns),
		MaxRunWorkspacesPerChat:  pick(p.MaxRunWorkspacesPerChat, o.MaxRunWorkspacesPerChat),
		MaxCheckpointBytesPerRun: pick64(p.MaxCheckpointBytesPerRun, o.MaxCheckpointBytesPerRun),
		AutoPruneAfterDays:       pick(p.AutoPruneAfterDays, o.AutoPruneAfterDays),
		MaxStoreBytes:            pick64(p.MaxStoreBytes, o.MaxStoreBytes),
	}
}

func (p Policy) validate(scope string) error {
	for name, v := range map[string]*int{"keepCompletedRuns": p.KeepCompletedRuns, "keepFailedRuns": p.KeepFailedRuns,
		"maxRunWorkspacesPerChat": p.MaxRunWorkspacesPerChat, "autoPruneAfterDays": p.AutoPruneAfterDays} {
		if v != nil && *v < 0 {
			return wserr.New(wserr.InvalidArgument, "policy", "", "%s must not be negative", name)
		}
	}
	if p.AutoPruneAfterDays != nil && *p.AutoPruneAfterDays == 0 {
		return wserr.New(wserr.InvalidArgument, "policy", "", "autoPruneAfterDays must be at least 1")
	}
	for name, v := range map[string]*int64{"maxCheckpointBytesPerRun": p.MaxCheckpointBytesPerRun, "maxStoreBytes": p.MaxStoreBytes} {
		if v != nil && *v < 0 {
			return wserr.New(wserr.InvalidArgument, "policy", "", "%s must not be negative", name)
		}
	}
	if p.MaxStoreBytes != nil && scope != StoreScope {
		return wserr.New(wserr.InvalidArgument, "policy", "", "maxStoreBytes is a store setting, not a chat's")
	}
	return nil
}

// MobilePolicy is the store-wide policy a store opened with the mobile
// profile (Options.Mobile) uses for every field its own policy leaves
// unset: bounded, and still keeping recent failures to debug.
func MobilePolicy() Policy {
	i := func(n int) *int { return &n }
	b := int64(8 << 20)
	return Policy{KeepCompletedRuns: i(20), KeepFailedRuns: i(5), MaxRunWorkspacesPerChat: i(30),
		MaxCheckpointBytesPerRun: &b, AutoPruneAfterDays: i(30)}
}

func readPolicy(ctx context.Context, tx *index.Tx, scope string) (Policy, bool, error) {
	var raw string
	err := tx.GetContext(ctx, &raw, `SELECT policy FROM policies WHERE scope = ?`, scope)
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, false, nil
	}
	if err != nil {
		return Policy{}, false, index.Translate(err)
	}
	p, err := parsePolicy(scope, raw)
	return p, err == nil, err
}

// parsePolicy decodes the policy row of scope.
func parsePolicy(scope, raw string) (Policy, error) {
	var p Policy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return Policy{}, wserr.New(wserr.Corrupt, "policy", "", "policy %s is unreadable: %v", scope, err)
	}
	return p, nil
}

// storePolicy returns the store-wide policy, read in tx (or, nil, in a
// read transaction of its own), under the mobile defaults when the store
// has the mobile profile. It is read each time, never kept: another
// process may set it.
func (s *Service) storePolicy(ctx context.Context, tx *index.Tx) (Policy, error) {
	var p Policy
	var err error
	if tx != nil {
		p, _, err = readPolicy(ctx, tx, StoreScope)
	} else {
		err = s.db.View(ctx, func(tx *index.Tx) error {
			p, _, err = readPolicy(ctx, tx, StoreScope)
			return err
		})
	}
	if err != nil {
		return Policy{}, err
	}
	return s.overBase(p), nil
}

// storePolicyOf is storePolicy from the row caps carries, read with the
// run (findRunCaps); in tx when caps has none.
func (s *Service) storePolicyOf(ctx context.Context, tx *index.Tx, caps *runCaps) (Policy, error) {
	if caps == nil || caps.storePolicy == nil {
		return s.storePolicy(ctx, tx)
	}
	if !caps.storePolicy.Valid {
		return s.overBase(Policy{}), nil
	}
	p, err := parsePolicy(StoreScope, caps.storePolicy.String)
	if err != nil {
		return Policy{}, err
	}
	return s.overBase(p), nil
}

// overBase lays p over the store's defaults: the mobile policy, or none.
func (s *Service) overBase(p Policy) Policy {
	base := Policy{}
	if s.mobile {
		base = MobilePolicy()
	}
	return base.over(p)
}

// SetPolicy replaces the policy of scope: StoreScope for the store-wide
// default, or a chat workspace id for that chat's overrides (nil fields
// inherit the store's). It does not prune: Prune, or the next automatic
// pass, applies it. It fails with workspace.invalid_argument for a
// negative setting or a store-only field on a chat, and store.not_found
// for a chat that does not exist.
func (s *Service) SetPolicy(ctx context.Context, scope string, p Policy) error {
	if err := p.validate(scope); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("set policy: %w", err)
	}
	err = s.update(ctx, func(tx *index.Tx) error {
		if scope != StoreScope {
			if _, err := findChat(ctx, tx, scope); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO policies (scope, policy, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at`,
			scope, string(b), s.now().UnixNano())
		return index.Translate(err)
	})
	return err
}

// Policy returns the policy set for scope (StoreScope or a chat id) as
// stored, without inheritance; the zero Policy when none is set. A chat
// that does not exist is store.not_found.
func (s *Service) Policy(ctx context.Context, scope string) (Policy, error) {
	var p Policy
	err := s.db.View(ctx, func(tx *index.Tx) error {
		if scope != StoreScope {
			if _, err := findChat(ctx, tx, scope); err != nil {
				return err // store.not_found, as SetPolicy
			}
		}
		var err error
		p, _, err = readPolicy(ctx, tx, scope)
		return err
	})
	return p, err
}

// EffectivePolicy returns the policy that applies to chat id: the store's
// (with the mobile defaults under it) overridden by the chat's own, and
// the cap Options.MaxStoreBytes sets, which wins over the store's. An
// empty id gives the store's; a chat that does not exist is
// store.not_found.
func (s *Service) EffectivePolicy(ctx context.Context, chatID string) (Policy, error) {
	var p Policy
	err := s.db.View(ctx, func(tx *index.Tx) error {
		if chatID != "" {
			if _, err := findChat(ctx, tx, chatID); err != nil {
				return err // store.not_found
			}
		}
		var err error
		p, err = s.effectivePolicy(ctx, tx, chatID)
		return err
	})
	if err == nil && s.maxStore > 0 {
		limit := s.maxStore
		p.MaxStoreBytes = &limit
	}
	return p, err
}

func (s *Service) effectivePolicy(ctx context.Context, tx *index.Tx, chatID string) (Policy, error) {
	base, err := s.storePolicy(ctx, tx)
	if err != nil {
		return Policy{}, err
	}
	if chatID == "" {
		return base, nil
	}
	own, _, err := readPolicy(ctx, tx, chatID)
	if err != nil {
		return Policy{}, err
	}
	return base.over(own), nil
}

// capsPolicy is effectivePolicy for the chat of caps, from the chat's
// policy row caps carries when its caller read it with the run.
func (s *Service) capsPolicy(ctx context.Context, tx *index.Tx, caps runCaps) (Policy, error) {
	if caps.chatPolicy == nil || caps.chatID == "" {
		return s.effectivePolicy(ctx, tx, caps.chatID)
	}
	base, err := s.storePolicyOf(ctx, tx, &caps)
	if err != nil || !caps.chatPolicy.Valid {
		return base, err
	}
	own, err := parsePolicy(caps.chatID, caps.chatPolicy.String)
	if err != nil {
		return Policy{}, err
	}
	return base.over(own), nil
}

// maxStoreBytes is the store cap in force: Options.MaxStoreBytes, else
// the store setting, read in tx (or in a read transaction of its own),
// from caps when the caller read it with the run; 0: none. An unreadable
// setting is an error, never taken for no cap.
func (s *Service) maxStoreBytes(ctx context.Context, tx *index.Tx, caps *runCaps) (int64, error) {
	if s.maxStore > 0 {
		return s.maxStore, nil
	}
	p, err := s.storePolicyOf(ctx, tx, caps)
	if err != nil || p.MaxStoreBytes == nil {
		return 0, err
	}
	return *p.MaxStoreBytes, nil
}

// autoPrune reports whether a run reaching a final status prunes its chat.
func (s *Service) autoPrune(ctx context.Context) (bool, error) {
	if s.autoPruneOpt != nil {
		return *s.autoPruneOpt, nil
	}
	if s.mobile {
		return true, nil
	}
	limit, err := s.maxStoreBytes(ctx, nil, nil)
	return limit > 0, err
}
