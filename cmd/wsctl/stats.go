package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func newStatsCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "stats",
		Short: "Count the store's rows and bytes",
		Long: `stats counts chats, runs, checkpoints, events and stored objects, and
compares bytes: logical (each distinct content once), referenced (as the
workspaces see them, shared content counted each time), stored (after
compression and deltas) and on disk.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runStats(ctx, g, args)
		}),
	}
}

func runStats(ctx context.Context, g globals, _ []string) error {
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.out, s)
	}
	var codecs []string
	for _, k := range slices.Sorted(maps.Keys(s.ByCodec)) {
		codecs = append(codecs, fmt.Sprintf("%s %d", k, s.ByCodec[k]))
	}
	t := newTable(g.out)
	t.row("store", g.storeDir)
	t.row("chats", fmt.Sprint(s.Chats))
	t.row("runs", fmt.Sprint(s.Runs))
	t.row("checkpoints", fmt.Sprint(s.Checkpoints))
	t.row("events", fmt.Sprint(s.Events))
	t.row("blobs", fmt.Sprintf("%d (%s)", s.Blobs, strings.Join(codecs, ", ")))
	t.row("chunks", fmt.Sprint(s.Chunks))
	t.row("trees", fmt.Sprintf("%d (%s stored)", s.Trees, humanBytes(s.TreeStoredBytes)))
	// Each ratio sits on the line of the two figures it divides.
	t.row("referenced", humanBytes(s.ReferencedBytes)+"  as the workspaces see them, shared content counted each time")
	t.row("logical", fmt.Sprintf("%s  each content once (dedup %s: %s referenced / %s)",
		humanBytes(s.BlobLogicalBytes), ratio(s.DedupRatio), humanBytes(s.ReferencedBytes), humanBytes(s.BlobLogicalBytes)))
	t.row("contents", fmt.Sprintf("%s  stored for the %s logical (compression and deltas %s: %s / %s)",
		humanBytes(s.ContentStoredBytes), humanBytes(s.BlobLogicalBytes), ratio(s.CompressionRatio), humanBytes(s.BlobLogicalBytes), humanBytes(s.ContentStoredBytes)))
	t.row("stored", fmt.Sprintf("%s  in rows: %s contents + %s trees", humanBytes(s.StoredBytes), humanBytes(s.ContentStoredBytes), humanBytes(s.TreeStoredBytes)))
	t.row("in use", humanBytes(s.UsedBytes)+"  the database's pages in use, which the store cap (maxStoreBytes) measures")
	t.row("on disk", humanBytes(s.FileBytes)+"  database and write-ahead log")
	return t.flush()
}

// ratio renders a ratio as stats prints it: "3.0x", "-" when there is
// nothing to divide.
func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fx", r)
}
