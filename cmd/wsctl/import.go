package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/wserr"
)

type importOptions struct {
	globals
	in io.Reader
}

func newImportCmd(a *app) *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import FILE|-",
		Short: "Add what an archive holds to the store, verified before anything is visible",
		Long: `import reads an archive that "wsctl export" wrote, from FILE or from
standard input with "-", into the store, creating the store if needed
(and removing it again if the import then fails).
Every byte is verified against its address and every reference checked
before any row becomes visible: a truncated or tampered archive fails
with archive.corrupt (exit status 6), one of another format version with
archive.unsupported_version (7), and no row is written: the store reads
as it did. File contents stored before the damage showed are left
unreferenced, and "wsctl gc" collects them once older than its grace.

Importing is idempotent: what the store holds already is kept. A run or
actor space the store holds with other content, or a chat whose persist
layer differs, is left as it is and reported as a conflict (exit status 5,
after the rest is imported). An archive whose new files would take the
store past its size cap is refused before anything is written, with
workspace.size_limit_exceeded (exit status 4), the code of every write
the cap refuses.`,
		Args: exactArgs(1),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runImport(ctx, o, args)
		}),
	}
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { o.in = cmd.InOrStdin() }
	return cmd
}

func runImport(ctx context.Context, o importOptions, args []string) error {
	defer streaming()()
	in := o.in
	if args[0] != "-" {
		if wsstore.IsStoreFile(o.storeDir, args[0]) {
			// Never an archive; refused before anything is opened.
			return argError("import", "%s is the store's own database file, not an archive", args[0])
		}
		f, err := wsstore.OpenArchiveFile(args[0])
		if err != nil {
			// A directory named as the archive came from the command
			// line, as export's does.
			return asArgError("import", err)
		}
		defer f.Close()
		in = f
	}
	st, failed, err := openCreating(ctx, o.globals)
	if err != nil {
		return err
	}
	defer st.Close()
	bar := newProgress(o.globals)
	opt := archive.Options{Progress: func(p archive.Progress) { bar.update(p.Phase, int(p.Done), int(p.Total)) }}
	sum, err := st.Archive.Import(ctx, in, opt)
	bar.done()
	if err != nil {
		// A store this import made and could not fill: none is better
		// than an empty one in its place.
		failed()
		return err
	}
	if err := writeArchiveSummary(o.out, o.json, "imported", sum); err != nil {
		return err
	}
	if !o.json {
		// The counts above are what the archive held; this is what it did.
		if _, err := fmt.Fprintf(o.out, "added %d, unchanged %d, conflicts %d\n", sum.AddedCount, sum.UnchangedCount, sum.ConflictCount); err != nil {
			return err
		}
	}
	if sum.ConflictCount > 0 {
		if !o.json {
			for _, c := range sum.Conflicts {
				fmt.Fprintf(o.errOut, "conflict: %s %s: %s\n", c.Kind, c.ID, c.Reason)
			}
			if more := sum.ConflictCount - len(sum.Conflicts); more > 0 {
				fmt.Fprintf(o.errOut, "conflict: and %d more\n", more)
			}
		}
		return wserr.New(wserr.Conflict, "import", "", "%d objects conflict with the store and were left as they are", sum.ConflictCount)
	}
	return nil
}
