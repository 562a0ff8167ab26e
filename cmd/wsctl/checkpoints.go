package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func newCheckpointsCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "checkpoints RUN",
		Short: "List a run's checkpoints",
		Long: `checkpoints lists a run's checkpoints in order. HEAD marks the checkpoint
the live workspace descends from; PARENT shows where history forked after a
rollback. With --json each checkpoint is its checkpoint.json: the same
fields and the files of its tree, each with hash and bytes.`,
		Args:              exactArgs(1),
		ValidArgsFunction: a.runArgs(),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runCheckpoints(ctx, g, args)
		}),
	}
}

func runCheckpoints(ctx context.Context, g globals, args []string) error {
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	runID, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	run, err := st.Runs.Run(ctx, runID)
	if err != nil {
		return err
	}
	if g.json {
		return writeCheckpointViews(ctx, g.out, st.Checkpoints, st.Trees, run.ID)
	}
	// A page at a time, as ls lists: the columns are aligned within a
	// page, and what is held does not grow with the run's checkpoints.
	out := &pages[checkpoint.Checkpoint]{w: g.out, header: []string{"ID", "HEAD", "PARENT", "REASON", "EVENT", "ROOT", "CREATED"},
		row: func(c checkpoint.Checkpoint) []string {
			head, parent := "", c.Parent
			if c.Seq == run.HeadCheckpoint {
				head = "*"
			}
			if parent == "" {
				parent = "-"
			}
			return []string{c.ID, head, parent, c.Reason, fmt.Sprint(c.EventSeq), c.Root.Short(), stamp(c.CreatedAt)}
		}}
	for after := int64(0); ; {
		page, err := st.Checkpoints.Page(ctx, run.ID, after, vfs.DefaultListLimit)
		if err != nil {
			return err
		}
		if err := out.add(page); err != nil {
			return err
		}
		if len(page) < vfs.DefaultListLimit {
			return out.close()
		}
		after = page[len(page)-1].Seq
	}
}

// checkpointPage is how many checkpoint rows writeCheckpointViews reads at
// a time.
const checkpointPage = 256

// writeCheckpointViews writes the JSON array of the run's checkpoint.json
// views (seed 000 §13: the row's fields and the files of its tree), as
// writeJSON would, one view at a time and each view's files as trees
// walks them: what it holds is one page of rows and one file, however
// many checkpoints and files the run has, and it stops between files when
// ctx ends. A checkpoint pruned meanwhile (an active run's cap) is left
// out. When it fails once a view has begun, the array is ended after the
// views written (the last one's files cut short, as WriteJSONElement
// ends it), so that what it wrote is one JSON document; failing before,
// it writes nothing.
func writeCheckpointViews(ctx context.Context, w io.Writer, cps *checkpoint.Store, trees checkpoint.Walker, runID string) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[")
	n := 0
	err := func() error {
		for after := int64(0); ; {
			page, err := cps.Page(ctx, runID, after, checkpointPage)
			if err != nil {
				return err
			}
			for _, c := range page {
				if err := ctx.Err(); err != nil {
					return err
				}
				cp, err := cps.Get(ctx, nil, runID, c.Seq)
				if wserr.Is(err, wserr.CheckpointNotFound) {
					continue // pruned by the run's cap since its page was read
				}
				if err != nil {
					return err
				}
				if n > 0 {
					bw.WriteString(",")
				}
				n++
				bw.WriteString("\n  ")
				if err := checkpoint.WriteJSONElement(ctx, bw, checkpoint.ViewOf(cp), checkpoint.FilesOf(ctx, trees, nil, cp.Root), "  "); err != nil {
					return err
				}
			}
			if len(page) < checkpointPage {
				return nil
			}
			after = page[len(page)-1].Seq
		}
	}()
	if err != nil && n == 0 {
		return err // nothing went out: "[" is still in bw
	}
	if n > 0 {
		bw.WriteString("\n")
	}
	bw.WriteString("]\n")
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}
