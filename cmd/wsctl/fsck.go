package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/wserr"
)

func newFsckCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "fsck",
		Short: "Check the whole store; exit 6 naming each problem found",
		Long: `fsck checks the whole store and names every problem it finds: SQLite's
integrity and foreign-key checks, every stored blob and chunk re-read and
re-hashed, every tree decoded and re-hashed, every reference (run roots,
checkpoints, tree entries, chunk lists, delta bases, events) resolved, and
every size recorded for a blob or chunk (its plain and stored sizes, chunk
offsets, the size a file entry records) compared with its content (problem
"size"), and each actor space's row (its count of versions, its totals of
files, directories and bytes) compared with its journal and its tree
(problem "actor"). It exits 0 when the store is sound and 6 when it found
any problem.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runFsck(ctx, g, args)
		}),
	}
}

func runFsck(ctx context.Context, g globals, _ []string) error {
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	bar := newProgress(g)
	rep, err := st.Fsck(ctx, bar.update)
	bar.done()
	if err != nil {
		return err
	}
	if g.json {
		if err := writeJSON(g.out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.out, "checked %d blobs, %d chunks, %d trees, %d runs, %d checkpoints\n",
			rep.Blobs, rep.Chunks, rep.Trees, rep.Runs, rep.Checkpoints)
		if rep.OK() {
			_, err := fmt.Fprintln(g.out, "ok: no problems found")
			return err
		}
		t := newTable(g.out, "PROBLEM", "REF", "DETAIL")
		for _, p := range rep.Problems {
			ref := p.Ref
			if ref == "" {
				ref = "-"
			}
			t.row(p.Kind, ref, p.Detail)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if rep.OK() {
		return nil
	}
	return wserr.New(wserr.Corrupt, "fsck", "", "%d problem%s found", len(rep.Problems), plural(int64(len(rep.Problems))))
}
