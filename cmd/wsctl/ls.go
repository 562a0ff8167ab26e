package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

type lsOptions struct {
	globals
	depth int
	at    string
}

func newLsCmd(a *app) *cobra.Command {
	var o lsOptions
	cmd := &cobra.Command{
		Use:   "ls RUN [PATH]",
		Short: "List a run's workspace files (host view: input/ included)",
		Long: `ls lists the files and directories below PATH (default: the workspace root)
in a run's live workspace, or at a checkpoint with --at (cp_000003 or 3).
It shows the host's view, so input/ and every other root are included.`,
		Args: rangeArgs(1, 2),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runLs(ctx, o, args)
		}),
	}
	cmd.Flags().IntVar(&o.depth, "depth", 1, "levels to list below PATH (0: all)")
	cmd.Flags().StringVar(&o.at, "at", "", "list at this checkpoint instead of the live workspace")
	return cmd
}

// workspaceFor returns the host view of a run, live or at a checkpoint.
func workspaceFor(svc *runs.Service, runID string, at int64) *runs.Workspace {
	if at == 0 {
		return svc.Workspace(runID, runs.HostScope)
	}
	return svc.WorkspaceAt(runID, at, runs.HostScope)
}

// parseOptionalPath parses args[i] as a workspace path, the root if absent.
func parseOptionalPath(args []string, i int) (vfs.Path, error) {
	if len(args) <= i || args[i] == "" || args[i] == "." || args[i] == "/" {
		return vfs.Root(), nil
	}
	return vfs.ParsePath(args[i])
}

func runLs(ctx context.Context, o lsOptions, args []string) error {
	if o.depth < 0 {
		return wserr.New(wserr.InvalidArgument, "ls", "", "--depth must not be negative")
	}
	at, err := parseAt(o.at)
	if err != nil {
		return err
	}
	p, err := parseOptionalPath(args, 1)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	depth := o.depth
	if depth == 0 {
		depth = allDepth
	}
	infos, err := workspaceFor(st.Runs, args[0], at).List(ctx, p, depth)
	if err != nil {
		return err
	}
	if infos == nil {
		infos = []vfs.FileInfo{}
	}
	if o.json {
		return writeJSON(o.out, infos)
	}
	t := newTable(o.out, "KIND", "SIZE", "HASH", "RESOURCE", "WRITABLE", "PATH")
	for _, fi := range infos {
		hash, path, w := "-", fi.Path.String(), "no"
		if !fi.Hash.IsZero() {
			hash = fi.Hash.Short()
		}
		if fi.Kind == vfs.KindDir {
			path += "/"
		}
		if fi.Writable {
			w = "yes"
		}
		t.row(fi.Kind.String(), humanBytes(fi.Size), hash, string(fi.Resource), w, path)
	}
	return t.flush()
}
