package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

type actorOptions struct {
	globals
	depth    int
	keep     int
	grace    string
	graceSet bool // --grace was given: an empty one is refused, not the default
	in       io.Reader
}

// newActorCmd builds "wsctl actor", seed 004's Workspace API on the
// command line: one subcommand per operation of actors.Spaces.
func newActorCmd(a *app) *cobra.Command {
	var o actorOptions
	cmd := &cobra.Command{
		Use:   "actor",
		Short: "List, upload, download and delete the files of an actor's artifact space",
		Long: `actor works on per-actor artifact spaces (seed 004's workspace/{actor}/):
a versioned tree per actor, stored in the same content store as runs, with
a journal of its own. Uploads and downloads stream, whatever the size.

  wsctl actor ls ACTOR [PATH] [--depth N] [--json]
  wsctl actor upload ACTOR PATH [FILE|-]     reads FILE, or stdin
  wsctl actor download ACTOR PATH [FILE|-]   writes stdout, or FILE (never the store's own files)
  wsctl actor rm ACTOR PATH
  wsctl actor rm-prefix ACTOR PREFIX         "temp/" removes temp/; "temp" also temp.md
  wsctl actor stats ACTOR [--json]
  wsctl actor gc [ACTOR] [--keep N] [--grace D]

Actor names are one path segment (no '/', no '..'), and paths follow the
workspace path rules; a name or path that breaks them is refused with
wsctl.invalid_argument, status 2.`,
	}
	sub := func(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, o actorOptions, args []string) error) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: args}
		c.RunE = a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			o.in = c.InOrStdin()
			o.graceSet = c.Flags().Changed("grace")
			err := run(ctx, o, args)
			if len(args) > 0 {
				// The actor, and the path after it, came from the
				// command line; "actor gc" alone walks stored actors.
				err = cliArgError("actor "+c.Name(), err)
			}
			return err
		})
		return c
	}
	ls := sub("ls ACTOR [PATH]", "List an actor's files", rangeArgs(1, 2), runActorLs)
	intVar(ls.Flags(), &o.depth, "depth", 1, "levels to list below PATH")
	gc := sub("gc [ACTOR]", "Prune old versions of actor spaces, then free what no root holds", rangeArgs(0, 1), runActorGC)
	intVar(gc.Flags(), &o.keep, "keep", 1, "newest versions of each space to keep")
	gc.Flags().StringVar(&o.grace, "grace", "", "keep unreachable rows younger than this (default 15m; 0: none)")
	cmd.AddCommand(ls,
		sub("upload ACTOR PATH [FILE|-]", "Upload FILE (or stdin) as PATH", rangeArgs(2, 3), runActorUpload),
		sub("download ACTOR PATH [FILE|-]", "Download PATH to stdout (or FILE)", rangeArgs(2, 3), runActorDownload),
		sub("rm ACTOR PATH", "Delete a file or directory", exactArgs(2), runActorRm),
		sub("rm-prefix ACTOR PREFIX", "Delete everything whose path starts with PREFIX", exactArgs(2), runActorRmPrefix),
		sub("stats ACTOR", "Count an actor's files and bytes", exactArgs(1), runActorStats),
		gc)
	return cmd
}

func runActorLs(ctx context.Context, o actorOptions, args []string) error {
	if o.depth < 0 {
		return argError("actor ls", "--depth must not be negative")
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	path := ""
	if len(args) > 1 {
		path = args[1]
	}
	out := &pages[vfs.Listed]{w: o.out, json: o.json, header: []string{"KIND", "SIZE", "PATH"},
		row: func(l vfs.Listed) []string {
			name := l.Path.String()
			if l.Kind == vfs.KindDir {
				name += "/"
			}
			return []string{l.Kind.String(), humanBytes(l.Size), name}
		}}
	defer out.abort()
	return out.all(func(page vfs.ListPage) ([]vfs.Listed, bool, error) {
		return st.Actors.ListPage(ctx, args[0], path, o.depth, page)
	}, func(l vfs.Listed) vfs.Path { return l.Path })
}

func runActorUpload(ctx context.Context, o actorOptions, args []string) error {
	defer streaming()()
	in := o.in
	if len(args) > 2 && args[2] != "-" {
		f, err := os.Open(args[2])
		if err != nil {
			return wserr.Wrap(protocol.CodeInvalidArgument, "actor upload", "", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return argError("actor upload", "%s is a directory: name the file to upload", args[2])
		}
		in = f
	}
	// Refused before a store is made where there is none.
	if _, err := actors.ParseActor(args[0]); err != nil {
		return err
	}
	if _, err := vfs.ParsePath(args[1]); err != nil {
		return err
	}
	st, failed, err := openCreating(ctx, o.globals)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := st.Actors.UploadWith(ctx, args[0], args[1], in, actors.ChangeOptions{Size: knownSize(in)})
	if err != nil {
		failed()
		return err
	}
	return printChange(o, c)
}

// knownSize returns the bytes left to read of in when it is a regular
// file (FILE, or stdin redirected from one), else 0 (not known). Under a
// store cap an upload of known size takes its room before it is read, so
// one that does not fit is refused without storing any of it.
func knownSize(in io.Reader) int64 {
	f, ok := in.(*os.File)
	if !ok {
		return 0
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return max(fi.Size()-off, 0)
}

func runActorDownload(ctx context.Context, o actorOptions, args []string) (err error) {
	defer streaming()()
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	rc, _, err := st.Actors.Download(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	defer rc.Close()
	if len(args) < 3 || args[2] == "-" {
		// Standard output redirected to a file may meet a full disk.
		_, err = io.Copy(wserr.FSWriter("actor download", "-", o.out), rc)
		return err
	}
	// Written beside FILE and renamed over it once whole, so a failed
	// download leaves FILE as it was; what FILE cannot be came from the
	// command line.
	return asArgError("actor download", st.WriteFile("actor download", args[2], func(w io.Writer) error {
		_, err := io.Copy(w, rc)
		return err
	}))
}

func runActorRm(ctx context.Context, o actorOptions, args []string) error {
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := st.Actors.Delete(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	return printChange(o, c)
}

func runActorRmPrefix(ctx context.Context, o actorOptions, args []string) error {
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := st.Actors.DeleteByPrefix(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	return printChange(o, c)
}

// printChange reports one recorded change of an actor's space.
func printChange(o actorOptions, c actors.Change) error {
	if o.json {
		return writeJSON(o.out, c)
	}
	if c.Seq == 0 {
		_, err := fmt.Fprintf(o.out, "%s %s: nothing changed\n", c.Op, c.Path)
		return err
	}
	_, err := fmt.Fprintf(o.out, "%s %s: %d files, %s (change %d)\n", c.Op, c.Path, c.Files, humanBytes(c.Bytes), c.Seq)
	return err
}

func runActorStats(ctx context.Context, o actorOptions, args []string) error {
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Actors.Stats(ctx, args[0])
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, s)
	}
	t := newTable(o.out, "ACTOR", "FILES", "DIRS", "BYTES", "CHANGES", "VERSIONS")
	t.row(s.Actor, strconv.FormatInt(s.Files, 10), strconv.FormatInt(s.Dirs, 10), humanBytes(s.Bytes),
		strconv.FormatInt(s.Seq, 10), strconv.FormatInt(s.Versions, 10))
	return t.flush()
}

// actorGCResult is "actor gc"'s --json output.
type actorGCResult struct {
	Pruned actors.GCReport  `json:"pruned"`
	GC     wsstore.GCReport `json:"gc"`
}

func runActorGC(ctx context.Context, o actorOptions, args []string) error {
	opt := actors.GCOptions{KeepVersions: o.keep}
	if len(args) > 0 {
		if args[0] == "" {
			// Not every actor: that is "actor gc" with no ACTOR.
			return wserr.New(protocol.CodeInvalidArgument, "actor gc", "", "actor name is empty: name an actor, or none for every actor")
		}
		opt.Actor = args[0]
	}
	if o.keep < 1 {
		return wserr.New(protocol.CodeInvalidArgument, "actor gc", "", "--keep %d: keep at least the live version", o.keep)
	}
	gc := wsstore.GCOptions{Now: o.now}
	if o.graceSet {
		d, err := time.ParseDuration(o.grace)
		if err != nil || d < 0 {
			return wserr.New(protocol.CodeInvalidArgument, "actor gc", "", "--grace %q is not a duration such as 15m or 0", o.grace)
		}
		gc.Grace = d
		if d == 0 {
			gc.Grace = -1
		}
	}
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	pruned, rep, err := st.ActorGC(ctx, opt, gc)
	if err != nil && pruned.Actors == 0 && rep.Freed == (wsstore.ObjectCounts{}) {
		return err
	}
	// A gc that failed after some pages of spaces were pruned (or its
	// collection deleted rows) prints what was done, then fails with its
	// error.
	var werr error
	if o.json {
		werr = writeJSON(o.out, actorGCResult{Pruned: pruned, GC: rep})
	} else {
		_, werr = fmt.Fprintf(o.out, "pruned %d versions of %d actors; freed %d blobs, %d chunks, %d trees (%s)\n",
			pruned.Pruned, pruned.Actors, rep.Freed.Blobs, rep.Freed.Chunks, rep.Freed.Trees, humanBytes(rep.FreedBytes))
		if werr == nil && err != nil {
			_, werr = fmt.Fprintln(o.out, "stopped by an error after the above: run actor gc again to go on")
		}
	}
	if werr != nil || err == nil {
		return werr
	}
	return err
}
