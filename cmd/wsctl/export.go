package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/wserr"
)

type exportOptions struct {
	globals
	scope archive.Scope
}

func newExportCmd(a *app) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export [--run R | --chat C | --actor A | --all] [--skip-workspace] FILE|-",
		Short: "Write runs, chats, actor spaces or the whole store to one archive file",
		Long: `export writes an archive (docs/archive.md) of the runs (--run, with
their chat workspace), chat workspaces (--chat, with all their runs; by
workspace id, chat_…, or as KIND:STABLE_CHAT_ID or KIND/STABLE_CHAT_ID), actor
spaces (--actor) or the whole store (--all) to FILE, or to standard output
with "-". The flags repeat and combine. An archive holds the rows, every
checkpoint and journal event, and exactly the files and trees they reach;
a run's scratch/ is never exported. --skip-workspace leaves actor spaces
out, and is refused where it would leave nothing to export.

FILE is written beside itself and renamed into place once complete, so a
failed export leaves no partial archive; a symbolic link is followed (the
file it leads to is replaced, the link stays); a named pipe or a device is
written into, as standard output is (the summary goes to standard error
when FILE is standard output by another name, /dev/stdout); the store's
own database files are refused. "wsctl import" reads it.`,
		Args: exactArgs(1),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runExport(ctx, o, args)
		}),
	}
	cmd.Flags().StringArrayVar(&o.scope.Runs, "run", nil, "export this run (repeatable)")
	cmd.Flags().StringArrayVar(&o.scope.Chats, "chat", nil, "export this chat workspace and its runs: chat_…, KIND:ID or KIND/ID (repeatable)")
	cmd.Flags().StringArrayVar(&o.scope.Actors, "actor", nil, "export this actor space (repeatable)")
	cmd.Flags().BoolVar(&o.scope.All, "all", false, "export the whole store")
	cmd.Flags().BoolVar(&o.scope.SkipWorkspace, "skip-workspace", false, "leave actor spaces out")
	return cmd
}

func runExport(ctx context.Context, o exportOptions, args []string) error {
	defer streaming()()
	if slices.Contains(o.scope.Chats, "") {
		return argError("export", "--chat is empty: name a chat by %s", chatRefHelp)
	}
	for i, s := range o.scope.Chats {
		var err error
		if o.scope.Chats[i], err = chatIDArg("export", s); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	for i, ref := range o.scope.Runs {
		if o.scope.Runs[i], err = resolveRun(ctx, st, ref); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(args[0]); args[0] != "-" && err == nil && fi.IsDir() {
		return argError("export", "%s is a directory: name the archive file to write", args[0])
	}
	bar := newProgress(o.globals)
	opt := archive.Options{Progress: func(p archive.Progress) { bar.update(p.Phase, int(p.Done), int(p.Total)) }}
	var sum archive.Summary
	report := o.out
	if args[0] == "-" {
		// The archive is standard output: the summary goes to standard
		// error, so the two never mix.
		report = o.errOut
		sum, err = st.Archive.Export(ctx, wserr.FSWriter("export", "-", o.out), o.scope, opt)
	} else {
		if namesOutput(args[0], o.out) {
			// FILE is standard output by another name (/dev/stdout):
			// the summary goes to standard error, as for "-".
			report = o.errOut
		}
		sum, err = st.ExportFile(ctx, args[0], o.scope, opt)
	}
	bar.done()
	if err != nil {
		if wserr.CodeOf(err) == wserr.SizeLimitExceeded {
			// A row past what an archive holds is the store's, not the
			// command line's.
			return err
		}
		// What export refuses (nothing selected, a FILE it cannot create)
		// came from the command line.
		return asArgError("export", err)
	}
	return writeArchiveSummary(report, o.json, "exported", sum)
}

// namesOutput reports whether path, its links followed, is the file out
// writes to, when out is a file.
func namesOutput(path string, out io.Writer) bool {
	f, ok := out.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	ofi, err := f.Stat()
	if err != nil {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, ofi)
}

// writeArchiveSummary prints an export's or an import's summary: --json,
// or one line of counts.
func writeArchiveSummary(w io.Writer, asJSON bool, verb string, sum archive.Summary) error {
	if asJSON {
		return writeJSON(w, sum)
	}
	_, err := fmt.Fprintf(w, "%s %d chats, %d runs, %d actors, %d events; %d objects (%d blobs, %d trees), %d bytes in %d archive bytes, %.1fs\n",
		verb, sum.Chats, sum.Runs, sum.Actors, sum.Events, sum.Objects, sum.Blobs, sum.Trees, sum.Bytes, sum.ArchiveBytes, sum.Seconds)
	return err
}
