package protocol

import (
	"context"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/wserr"
)

// Archives is what the export and import ops ask of the store: archives
// as files on the host's file system; *wsstore.Store implements it.
type Archives interface {
	ExportFile(ctx context.Context, path string, scope archive.Scope, opt archive.Options) (archive.Summary, error)
	ImportFile(ctx context.Context, path string, opt archive.Options) (archive.Summary, error)
}

type exportRequest struct {
	base
	Path          string   `json:"path"`
	Runs          []string `json:"runs"`
	Chats         []string `json:"chats"`
	Actors        []string `json:"actors"`
	All           bool     `json:"all"`
	SkipWorkspace bool     `json:"skipWorkspace"`
}

type importRequest struct {
	base
	Path string `json:"path"`
}

func (s *Session) archives() (Archives, error) {
	if s.backend.Archives == nil {
		return nil, wserr.New(wserr.InvalidOptions, "archive", "", "this session has no archive service")
	}
	return s.backend.Archives, nil
}

func (s *Session) export(ctx context.Context, r request) (any, error) {
	var req exportRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.Path == "" {
		return nil, invalidRequest("missing \"path\": the archive file to write on the host")
	}
	a, err := s.archives()
	if err != nil {
		return nil, err
	}
	return a.ExportFile(ctx, req.Path, archive.Scope{Runs: req.Runs, Chats: req.Chats, Actors: req.Actors,
		All: req.All, SkipWorkspace: req.SkipWorkspace}, archive.Options{})
}

func (s *Session) importArchive(ctx context.Context, r request) (any, error) {
	var req importRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.Path == "" {
		return nil, invalidRequest("missing \"path\": the archive file to read on the host")
	}
	a, err := s.archives()
	if err != nil {
		return nil, err
	}
	return a.ImportFile(ctx, req.Path, archive.Options{})
}
