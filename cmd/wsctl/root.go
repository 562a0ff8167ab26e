package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// app is what every command of one invocation shares: the global flags and
// the hooks tests replace (environment, terminal detection, clock).
type app struct {
	storeFlag string // --store, "" = default
	jsonFlag  bool   // --json
	maxStore  int64  // --max-store-bytes, 0 = the store setting
	syncMode  string // --synchronous: normal or full
	profile   string // --profile, "" or "mobile"
	blobs     string // --blobs, "" = blobs in the database

	getenv     func(string) string
	goos       string
	isTerminal func(w io.Writer) bool
	now        func() time.Time
	// readBuildInfo is debug.ReadBuildInfo: what version reports.
	readBuildInfo func() (*debug.BuildInfo, bool)
	// followPoll is how often log --follow polls; tests shorten it.
	followPoll time.Duration

	// started is set once a command's own code runs: errors before that
	// (unknown commands, bad flags, wrong argument counts) are usage errors.
	started bool
}

func newApp() *app {
	return &app{getenv: os.Getenv, goos: runtime.GOOS, isTerminal: fileIsTerminal, now: time.Now, readBuildInfo: debug.ReadBuildInfo}
}

// fileIsTerminal reports whether w is a terminal, the test for drawing
// progress bars on stderr: redirected diagnostics stay quiet.
func fileIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// globals are the resolved global options handed to every runX.
type globals struct {
	storeDir string
	json     bool
	out      io.Writer // command output: cmd.OutOrStdout()
	errOut   io.Writer // diagnostics: cmd.ErrOrStderr()
	progress bool      // errOut is a terminal: draw progress on it
	now      func() time.Time
	maxStore int64
	profile  string
	sync     index.Synchronous
	blobs    string
	// busyTimeout is how long one write waits for another process's
	// lock; 0 is the store's default.
	busyTimeout time.Duration
}

// runWith builds a command's RunE: it resolves the global flags into *g,
// then calls run.
func (a *app) runWith(g *globals, run func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		v, err := a.globals(cmd)
		if err != nil {
			return err
		}
		*g = v
		return run(cmd.Context(), args)
	}
}

// globals resolves the global flags for cmd.
func (a *app) globals(cmd *cobra.Command) (globals, error) {
	if err := a.checkStoreFlag(cmd); err != nil {
		return globals{}, err
	}
	dir := a.storeFlag
	if dir == "" {
		var err error
		if dir, err = defaultStoreDir(a.getenv, a.goos); err != nil {
			return globals{}, err
		}
	}
	sync := index.Synchronous(strings.ToUpper(a.syncMode))
	if sync != index.SyncNormal && sync != index.SyncFull {
		return globals{}, wserr.New(wserr.InvalidOptions, "open", "", "--synchronous must be normal or full, not %q", a.syncMode)
	}
	errOut := cmd.ErrOrStderr()
	return globals{storeDir: dir, json: a.jsonFlag, out: cmd.OutOrStdout(), errOut: errOut,
		progress: a.isTerminal(errOut), now: a.now, maxStore: a.maxStore, profile: a.profile,
		sync: sync, blobs: a.blobs}, nil
}

// checkStoreFlag refuses a --store given as "" (a script's unset
// variable): read as --store left out, it would name the default store.
func (a *app) checkStoreFlag(cmd *cobra.Command) error {
	if f := cmd.Flag("store"); f != nil && f.Changed && a.storeFlag == "" {
		return argError("store", "--store is empty: name the store's directory, or leave --store out for the default store")
	}
	return nil
}

// defaultStoreDir is $WSSTORE_DIR, else a "wsstore" folder in the user's
// data directory: $XDG_DATA_HOME or ~/.local/share on Linux and other
// Unixes, ~/Library/Application Support on macOS, %LocalAppData% on
// Windows.
func defaultStoreDir(getenv func(string) string, goos string) (string, error) {
	if d := getenv("WSSTORE_DIR"); d != "" {
		return d, nil
	}
	noHome := argError("store", "cannot find the user's data directory: set WSSTORE_DIR or pass --store")
	switch goos {
	case "windows":
		base := getenv("LocalAppData")
		if base == "" {
			return "", noHome
		}
		return filepath.Join(base, "wsstore"), nil
	case "darwin", "ios":
		home := getenv("HOME")
		if home == "" {
			return "", noHome
		}
		return filepath.Join(home, "Library", "Application Support", "wsstore"), nil
	default:
		// The XDG spec says a relative XDG_DATA_HOME is invalid and must
		// be ignored.
		if x := getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
			return filepath.Join(x, "wsstore"), nil
		}
		home := getenv("HOME")
		if home == "" {
			return "", noHome
		}
		return filepath.Join(home, ".local", "share", "wsstore"), nil
	}
}

const rootLong = `wsctl inspects and maintains a wsstore store: the embedded storage engine
for AI-agent workspaces (runs, checkpoints, journal, content-addressed files).

Start with "wsctl demo": it records a short agent session in a temporary
store, prints its timeline and removes the store (--store DIR keeps it).
"wsctl init" creates an empty store.

Runs are named by their id, a unique prefix of one, or "latest" (the newest
run); checkpoints by cp_000003, 3, HEAD (the one the run is at) or HEAD~N.

The store is --store DIR, else $WSSTORE_DIR, else a "wsstore" folder in the
user's data directory ($XDG_DATA_HOME or ~/.local/share on Linux,
~/Library/Application Support on macOS, %LocalAppData% on Windows).
Query and maintenance commands need an existing store; init, demo, batch,
serve, import, token create, actor upload, and sync and pull given --blobs
create it where there is none (and remove it again if they then fail,
unless a sync or pull registered it as a device on the object store: run
it again there).

Every listing prints an aligned table, or JSON with --json. Long commands
(gc, fsck, checkout, vacuum) draw a progress bar on standard error when it
is a terminal, never on standard output, which holds only the result.

`

// newRootCmd builds the wsctl command tree over a.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "wsctl",
		Short:         "Inspect, maintain and drive a wsstore store",
		Long:          strings.TrimRight(rootLong, "\n"),
		Version:       currentBuild(a.readBuildInfo).String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			return nil
		},
	}
	// The root's help lists the commands and flags, then the exit statuses.
	root.SetHelpTemplate(rootHelpTemplate)
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&a.storeFlag, "store", "", "`DIR` of the store (default $WSSTORE_DIR, else <user data dir>/wsstore)")
	root.PersistentFlags().BoolVar(&a.jsonFlag, "json", false, "print JSON instead of text")
	root.PersistentFlags().StringVar(&a.syncMode, "synchronous", "normal", "durability of each commit: \"normal\" (a power loss may lose the last commits, never consistency) or \"full\" (every acknowledged change survives a power loss; each commit waits for the disk)")
	int64Var(root.PersistentFlags(), &a.maxStore, "max-store-bytes", 0, "cap the store's stored `BYTES` for this command (0: the store setting, see \"wsctl policy\")")
	root.PersistentFlags().StringVar(&a.profile, "profile", "", "store profile: \"mobile\" prunes by the mobile retention defaults after every run")
	root.PersistentFlags().StringVar(&a.blobs, "blobs", "", "keep blobs on an S3-compatible object store: `URL` s3://bucket/prefix?endpoint=…&region=… (the store records it, so later commands need no --blobs; another bucket or prefix is refused)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{wserr.Wrap(protocol.CodeInvalidArgument, subcommandName(a, cmd), "", err)}
	})
	root.AddCommand(
		newInitCmd(a), newDemoCmd(a), newVersionCmd(a),
		newRunsCmd(a), newChatsCmd(a), newShowCmd(a), newLsCmd(a), newCatCmd(a), newCheckpointsCmd(a),
		newDiffCmd(a), newLogCmd(a), newStatsCmd(a), newDUCmd(a), newCheckoutCmd(a), newSQLCmd(a),
		newRmCmd(a), newRmChatCmd(a), newPruneCmd(a), newResolveCommitCmd(a), newDeletionsCmd(a), newPolicyCmd(a), newGCCmd(a), newVacuumCmd(a), newFsckCmd(a),
		newBatchCmd(a), newActorCmd(a), newExportCmd(a), newImportCmd(a), newServeCmd(a), newTokenCmd(a),
		newPushCmd(a), newPullCmd(a), newReplicateCmd(a), newRestoreCmd(a), newSyncCmd(a), newReclaimRemoteCmd(a),
	)
	for _, c := range root.Commands() {
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			refuseBareGroup(c)
		}
	}
	return root
}

// refuseBareGroup makes a command that only groups others ("actor",
// "token") refuse to run without one of them, or with a name that is none,
// as the root refuses an unknown command (exit status 2), instead of
// printing its help and succeeding.
func refuseBareGroup(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		names := strings.Join(subcommandNames(cmd), ", ")
		if len(args) == 0 {
			return usageError{wserr.New(protocol.CodeInvalidArgument, cmd.Name(), "", "a command is needed: one of %s", names)}
		}
		return usageError{wserr.New(protocol.CodeInvalidArgument, cmd.Name(), "", "unknown command %q: one of %s", args[0], names)}
	}
}

// subcommandNames lists the commands c groups.
func subcommandNames(c *cobra.Command) []string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return names
}

// initCompletionCmd adds cobra's completion command to root, whose output
// must be set already (the command keeps the writer it finds), with a
// usage error (exit 2) for a shell it has no script for or none named,
// where cobra prints its help and succeeds.
func initCompletionCmd(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = func(cmd *cobra.Command, args []string) error {
				return usageError{wserr.New(protocol.CodeInvalidArgument, "completion", "", "name a shell: bash, zsh, fish or powershell")}
			}
			c.RunE = c.Args
		}
	}
}

// initHelpCmd adds cobra's help command to root with a usage error (exit
// 2) for a topic that names no command, as "wsctl NAME" has, where cobra
// prints the usage and succeeds.
func initHelpCmd(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() != "help" || c.Run == nil {
			continue
		}
		show := c.Run
		c.Run = nil
		c.RunE = func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if target == nil || err != nil || (len(rest) > 0 && target.HasSubCommands()) {
				return usageError{wserr.New(protocol.CodeInvalidArgument, "help", "", "no help topic %q: \"wsctl help\" lists the commands", strings.Join(args, " "))}
			}
			show(cmd, args)
			return nil
		}
	}
}

// rootHelpTemplate is cobra's help template, with the exit statuses after
// the usage on the root command only.
var rootHelpTemplate = `{{with (or .Long .Short)}}{{. | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}{{if not .HasParent}}
` + exitStatusHelp() + "\n{{end}}"

// usageError marks a command-line mistake: exit status 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// subcommandName is commandName for a command below the root, "" for the
// root (whose errors already print after "wsctl: ").
func subcommandName(a *app, cmd *cobra.Command) string {
	if cmd == nil || !cmd.HasParent() {
		return ""
	}
	return a.commandName(cmd)
}

// commandName names cmd for an error ("wsctl" when none ran).
func (a *app) commandName(cmd *cobra.Command) string {
	if cmd == nil {
		return "wsctl"
	}
	return cmd.Name()
}

// codeStopped is the error of a command (other than batch, whose requests
// answer batch.interrupted) that SIGINT or SIGTERM stopped.
const codeStopped = protocol.CodeStopped

// execute runs wsctl with args and returns the exit status.
func execute(ctx context.Context, a *app, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	initCompletionCmd(root)
	initHelpCmd(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if !a.started {
		// cobra refused the command line (an unknown command, a wrong
		// number of arguments) before any command ran.
		if wserr.CodeOf(err) == wserr.Internal {
			err = wserr.Wrap(protocol.CodeInvalidArgument, subcommandName(a, cmd), "", err)
		}
		err = usageError{err}
	}
	if _, gone := errors.AsType[hostGoneError](err); gone {
		return exitCode(err) // no one is left to read a message
	}
	var ue usageError
	if ctx.Err() != nil && !errors.As(err, &ue) && !wserr.Is(err, codeInterrupted) && !wserr.Is(err, codeStopped) {
		// SIGINT or SIGTERM stopped the command midway, and whatever it
		// failed with then (a cancelled read, a statement closed under
		// it) comes from that; what it had committed stays. A command
		// that says itself what the interrupt left keeps its words.
		err = wserr.New(codeStopped, a.commandName(cmd), "", "interrupted")
	}
	if _, coded := errors.AsType[*wserr.Error](err); !coded && !errors.As(err, &ue) {
		// A failure no part coded (an I/O error SQLite reports, say)
		// prints with the code its exit status stands for, as every
		// error does.
		err = &wserr.Error{Code: wserr.CodeOf(err), Err: err}
	}
	fmt.Fprintf(stderr, "wsctl: %v\n", err)
	if errors.As(err, &ue) && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exitCode(err)
}
