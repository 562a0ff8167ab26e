package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/vfs"
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
with --at, to standard output unchanged. With --json it prints
{path, hash, size, content} (contentBase64 instead of content for files
that are not UTF-8 text).`,
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
	res, err := workspaceFor(st.Runs, runID, seq).Read(ctx, p, vfs.ReadOptions{})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, protocol.NewFileContent(p, res.Info.Hash, res.Content))
	}
	_, err = o.out.Write(res.Content)
	return err
}
