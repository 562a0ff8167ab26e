package protocol

import (
	"context"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

type pruneRequest struct {
	base
	DryRun      bool    `json:"dryRun"`
	WorkspaceID *string `json:"workspaceId"`
}

type chatDeleteRequest struct {
	base
	Chats []runs.ChatKey `json:"chats"`
	Force bool           `json:"force"`
}

type policyRequest struct {
	base
	WorkspaceID *string      `json:"workspaceId"`
	Policy      *runs.Policy `json:"policy"`
}

func (s *Session) retention() (Retention, error) {
	if s.backend.Retention == nil {
		return nil, wserr.New(wserr.InvalidOptions, "retention", "", "this session has no retention service")
	}
	return s.backend.Retention, nil
}

// workspaceID is a request's optional workspaceId: "" when it is left out
// (null too). An empty one names no chat, and is refused rather than read
// as absent, which means every chat, or the store's own policy.
func workspaceID(id *string) (string, error) {
	if id == nil {
		return "", nil
	}
	if *id == "" {
		return "", invalidRequest("\"workspaceId\" is empty: name a chat workspace (chat_…), or leave it out for the whole store")
	}
	return *id, nil
}

// filter is a listing's optional filter: left out it keeps every entry,
// and given empty it is refused, never taken for left out (a host's unset
// variable would list everything).
func filter(name string, v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	if *v == "" {
		return "", invalidRequest("%q is empty: give one, or leave it out to list every one", name)
	}
	return *v, nil
}

// policyScope is the policy scope a request's workspaceId names: that
// chat's, or the store's when it names none.
func policyScope(workspaceID string) string {
	if workspaceID == "" {
		return runs.StoreScope
	}
	return workspaceID
}

func (s *Session) prune(ctx context.Context, r request) (any, error) {
	var req pruneRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	chatID, err := workspaceID(req.WorkspaceID)
	if err != nil {
		return nil, err
	}
	ret, err := s.retention()
	if err != nil {
		return nil, err
	}
	rep, err := ret.Prune(ctx, runs.PruneOptions{DryRun: req.DryRun, ChatID: chatID})
	return rep, withPartial(rep, !rep.DryRun && rep.RunCount+rep.CheckpointRuns > 0, err)
}

func (s *Session) chatDelete(ctx context.Context, r request) (any, error) {
	var req chatDeleteRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if len(req.Chats) == 0 {
		return nil, invalidRequest("missing \"chats\": name at least one {kind, stableChatId}")
	}
	for i, c := range req.Chats {
		if c.Kind == "" || c.StableChatID == "" {
			return nil, invalidRequest("chats[%d]: missing \"kind\" or \"stableChatId\"", i)
		}
	}
	ret, err := s.retention()
	if err != nil {
		return nil, err
	}
	return ret.DeleteChats(ctx, req.Chats, req.Force)
}

func (s *Session) policySet(ctx context.Context, r request) (any, error) {
	var req policyRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	chatID, err := workspaceID(req.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if req.Policy == nil {
		return nil, invalidRequest("missing \"policy\"")
	}
	ret, err := s.retention()
	if err != nil {
		return nil, err
	}
	scope := policyScope(chatID)
	if err := ret.SetPolicy(ctx, scope, *req.Policy); err != nil {
		return nil, err
	}
	return map[string]any{"scope": scope, "policy": req.Policy}, nil
}
