package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

type catOptions struct {
	globals
	at string
}

func newCatCmd(a *app) *cobra.Command {
	var o catOptions
	cmd := &cobra.Command{
		Use:   "cat RUN PATH",
		Short: "Print a file of a run's workspace",
		Long: `cat writes the bytes of PATH in a run's live workspace, or at a checkpoint
with --at, to standard output unchanged, streamed: a file of any size
costs a chunk of memory. With --json it prints {path, hash, size,
content} (contentBase64 instead of content for files that are not UTF-8
text); a JSON answer carries at most 16 MiB, and a larger file is refused
with workspace.size_limit_exceeded (read it without --json).`,
		Args:              exactArgs(2),
		ValidArgsFunction: a.runArgs(),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runCat(ctx, o, args)
		}),
	}
	a.atFlag(cmd, &o.at, "read at this checkpoint instead of the live workspace")
	return cmd
}

func runCat(ctx context.Context, o catOptions, args []string) error {
	at, err := parseAt(o.at)
	if err != nil {
		return err
	}
	p, err := parsePathArg("cat", args[1])
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
	ws := workspaceFor(st.Runs, runID, seq)
	if vfs.EndsAsDirectory(args[1]) {
		fi, err := ws.StatNoRead(ctx, p)
		if err == nil {
			err = vfs.CheckFileSpelling("cat", args[1], p, fi.Kind)
		}
		if err != nil {
			return err
		}
	}
	if o.json {
		res, err := ws.Read(ctx, p, vfs.ReadOptions{})
		if err != nil {
			return err
		}
		return writeJSON(o.out, protocol.NewFileContent(p, res.Info.Hash, res.Content))
	}
	rc, _, err := ws.Open(ctx, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	// Standard output redirected to a file may meet a full disk.
	_, err = io.Copy(wserr.FSWriter("cat", "-", o.out), rc)
	return err
}
