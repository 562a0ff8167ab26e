package protocol

import (
	"context"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// hostPathResolver is the optional ability of a RunService to map an
// absolute host path to the workspace path a run reaches it by;
// *runs.Service has it.
type hostPathResolver interface {
	HostPath(ctx context.Context, runID, abs string) (vfs.Path, error)
}

// hostPathOps serve a host that speaks in host paths (seed 004).
var hostPathOps = []op{
	{
		name: "run.hostpath", access: reads, request: []any{hostPathRequest{}}, handle: (*Session).runHostPath,
		help: `  run.hostpath {hostPath}                   -> {path}   the workspace path (host/NAME/…)
              by which the run reaches an absolute host path in its
              profile's allowPaths; workspace.path_not_allowed for the
              system's temporary directory or a path outside them`,
	},
}

func init() {
	ops = append(ops, hostPathOps...)
}

type hostPathRequest struct {
	base
	HostPath *string `json:"hostPath"`
}

func (s *Session) runHostPath(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[hostPathRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.HostPath == nil {
		return nil, invalidRequest("missing \"hostPath\"")
	}
	res, ok := s.backend.Runs.(hostPathResolver)
	if !ok {
		return nil, wserr.New(wserr.InvalidArgument, "run.hostpath", "", "this store does not resolve host paths")
	}
	p, err := res.HostPath(ctx, runID, *req.HostPath)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": p.String()}, nil
}
