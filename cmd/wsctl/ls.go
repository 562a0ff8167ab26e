package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

type lsOptions struct {
	globals
	depth    int
	depthSet bool // --depth was given
	all      bool
	at       string
}

func newLsCmd(a *app) *cobra.Command {
	var o lsOptions
	var cmd *cobra.Command
	cmd = &cobra.Command{
		Use:   "ls RUN [PATH]",
		Short: "List a run's workspace files (host view: input/ included)",
		Long: `ls lists the files and directories below PATH (default: the workspace root)
in a run's live workspace, or at a checkpoint with --at (cp_000003 or 3).
It shows the host's view, so input/ and every other root are included; the
profile's visible roots are directories even when they hold no file.

--depth N lists N levels below PATH: 1 (the default, and what 0 means too,
as in batch's list op) the direct entries, 2 their children too, and so
on; -R lists every level.`,
		Args:              rangeArgs(1, 2),
		ValidArgsFunction: a.runArgs(),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			o.depthSet = cmd.Flags().Changed("depth")
			return runLs(ctx, o, args)
		}),
	}
	intVar(cmd.Flags(), &o.depth, "depth", 1, "levels to list below PATH (0 is 1, as in batch list)")
	cmd.Flags().BoolVarP(&o.all, "recursive", "R", false, "list every level below PATH")
	a.atFlag(cmd, &o.at, "list at this checkpoint instead of the live workspace")
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
	if len(args) <= i || args[i] == "/" || vfs.NamesRoot(args[i]) {
		return vfs.Root(), nil
	}
	return parsePathArg("ls", args[i])
}

func runLs(ctx context.Context, o lsOptions, args []string) error {
	if o.depth < 0 {
		return argError("ls", "--depth must not be negative")
	}
	if o.all && o.depthSet {
		return argError("ls", "--recursive lists every level; it does not take --depth")
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
	runID, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	seq, err := at.resolve(ctx, st, runID)
	if err != nil {
		return err
	}
	depth := o.depth
	if o.all {
		depth = allDepth
	}
	out := &pages[vfs.FileInfo]{w: o.out, json: o.json, header: []string{"KIND", "SIZE", "HASH", "RESOURCE", "WRITABLE", "PATH"},
		row: func(fi vfs.FileInfo) []string {
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
			return []string{fi.Kind.String(), humanBytes(fi.Size), hash, string(fi.Resource), w, path}
		}}
	defer out.abort()
	ws := workspaceFor(st.Runs, runID, seq)
	return out.all(func(page vfs.ListPage) ([]vfs.FileInfo, bool, error) {
		return ws.ListPage(ctx, p, depth, page)
	}, func(fi vfs.FileInfo) vfs.Path { return fi.Path })
}
