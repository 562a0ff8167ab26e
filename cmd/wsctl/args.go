package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// allDepth is a List depth that reaches every level of any real tree.
const allDepth = 1 << 30

// exactArgs is cobra.ExactArgs with the usage line in the message.
func exactArgs(n int) cobra.PositionalArgs {
	return rangeArgs(n, n)
}

// rangeArgs is cobra.RangeArgs with the usage line in the message.
func rangeArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageError{fmt.Errorf("usage: %s", cmd.UseLine())}
		}
		return nil
	}
}

// argError is a command-line argument or flag value wsctl cannot use:
// wsctl.invalid_argument, exit status 2. It is never
// workspace.invalid_argument, which tells a host to hand the error to its
// model.
func argError(op, format string, args ...any) error {
	return wserr.New(protocol.CodeInvalidArgument, op, "", format, args...)
}

// asArgError re-codes an error the library gave for a value parsed from
// the command line (a path, a checkpoint id) as argError: the value came
// from whoever typed the command, not from a model.
func asArgError(op string, err error) error {
	var we *wserr.Error
	if err == nil || !errors.As(err, &we) || !strings.HasPrefix(string(we.Code), "workspace.") {
		return err
	}
	msg := we.Msg
	if msg == "" && we.Err != nil {
		msg = we.Err.Error()
	}
	return wserr.New(protocol.CodeInvalidArgument, op, we.Path, "%s", msg)
}

// cliArgError re-codes, as asArgError does, the errors the library gives
// for an actor name or a path that breaks the rules
// (workspace.invalid_actor, workspace.invalid_path) when the name or
// path came from the command line; any other error stays as it is.
func cliArgError(op string, err error) error {
	if wserr.Is(err, wserr.InvalidActor) || wserr.Is(err, wserr.InvalidPath) {
		return asArgError(op, err)
	}
	return err
}

// parsePathArg parses a workspace path given on the command line.
func parsePathArg(op, s string) (vfs.Path, error) {
	p, err := vfs.ParsePath(s)
	return p, asArgError(op, err)
}

// latestRun names the newest run wherever a run is named.
const latestRun = runs.ReservedRunID

// resolveRun turns a run reference into a run id: a run's full id, latest
// (the newest run), or a prefix of exactly one run's id. It fails with
// run.not_found when nothing matches and wsctl.invalid_argument when a
// prefix matches several runs (naming them).
func resolveRun(ctx context.Context, st *wsstore.Store, ref string) (string, error) {
	if ref == "" {
		return "", argError("run", "empty run id")
	}
	if _, err := st.Runs.Run(ctx, ref); err == nil {
		return ref, nil
	} else if !wserr.Is(err, wserr.RunNotFound) {
		return "", err
	}
	if ref == latestRun {
		list, err := st.Runs.Runs(ctx, runs.ListQuery{Limit: 1})
		if err != nil {
			return "", err
		}
		if len(list) == 0 {
			return "", wserr.New(wserr.RunNotFound, "run", "", "latest: the store has no runs")
		}
		return list[0].ID, nil
	}
	shown, n, err := st.Runs.RunIDsWithPrefix(ctx, ref, 5)
	if err != nil {
		return "", err
	}
	switch n {
	case 0:
		return "", wserr.New(wserr.RunNotFound, "run", "", "no run id is or starts with %q", ref)
	case 1:
		return shown[0], nil
	}
	if n > len(shown) {
		shown = append(shown, "…")
	}
	return "", argError("run", "%q is a prefix of %d run ids (%s): give more of the id", ref, n, strings.Join(shown, ", "))
}

// runIDs lists every run id, newest first.
func runIDs(ctx context.Context, st *wsstore.Store) ([]string, error) {
	list, err := st.Runs.Runs(ctx, runs.ListQuery{})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.ID
	}
	return ids, nil
}

// chatRef is a chat named on the command line: its workspace id, with its
// key when named by it, or a bare stableChatId where a command takes one.
type chatRef struct {
	id     string       // chat_ and 16 hex digits; empty for a bare stableChatId
	key    runs.ChatKey // zero when named by its workspace id
	stable string       // a bare stableChatId
}

// chatRefHelp says how a chat may be named, for --help and errors.
const chatRefHelp = "a chat workspace id (chat_ and 16 hex digits), KIND:STABLE_CHAT_ID or KIND/STABLE_CHAT_ID"

// parseChatRef parses a chat named on the command line, trying in turn: a
// chat workspace id (chat_ and 16 lower-case hex digits), KIND:STABLE_CHAT_ID
// split at the first ':', KIND/STABLE_CHAT_ID split at the first '/', and,
// when bare, anything else as a stableChatId. The workspace id of a key is
// derived from it, so nothing is looked up. Anything else fails with
// wsctl.invalid_argument naming the forms.
func parseChatRef(op, s string, bare bool) (chatRef, error) {
	if isChatID(s) {
		return chatRef{id: s}, nil
	}
	for _, sep := range []string{":", "/"} {
		if kind, id, ok := strings.Cut(s, sep); ok {
			if strings.TrimSpace(kind) == "" || strings.TrimSpace(id) == "" {
				break
			}
			k := runs.ChatKey{Kind: kind, StableChatID: id}
			return chatRef{id: runs.ChatWorkspaceID(k), key: k}, nil
		}
	}
	if bare && strings.TrimSpace(s) != "" {
		return chatRef{stable: s}, nil
	}
	return chatRef{}, argError(op, "%q is not a chat: name it by %s", s, chatRefHelp)
}

// chatIDArg is the workspace id of the chat s names (parseChatRef, no
// bare stableChatId), "" when s is empty.
func chatIDArg(op, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	c, err := parseChatRef(op, s, false)
	return c.id, err
}

// isChatID reports whether s is a chat workspace id: chat_ and 16
// lower-case hex digits.
func isChatID(s string) bool {
	h, ok := strings.CutPrefix(s, "chat_")
	return ok && len(h) == 16 && strings.Trim(h, "0123456789abcdef") == ""
}

// cpRef is a parsed checkpoint reference: a sequence number (cp_000003,
// 3), HEAD~back (HEAD is HEAD~0: the checkpoint the run is at), or the live
// workspace.
type cpRef struct {
	seq  int64
	head bool
	back int
	live bool
}

// checkpointRefHelp says what a checkpoint reference may be, for --help.
const checkpointRefHelp = "cp_000003, 3, HEAD (the checkpoint the run is at) or HEAD~N (N parents back; git's ~, ^ and chains such as HEAD~~ too)"

// parseCheckpointRef parses a checkpoint reference given on the command
// line: cp_000003, 3, HEAD or HEAD~N (case-insensitive), and "live" when
// allowLive. It fails with wsctl.invalid_argument.
func parseCheckpointRef(s string, allowLive bool) (cpRef, error) {
	t := strings.TrimSpace(s)
	if allowLive && strings.EqualFold(t, "live") {
		return cpRef{live: true}, nil
	}
	if len(t) >= 4 && strings.EqualFold(t[:4], "HEAD") {
		rest := t[4:]
		if rest == "" {
			return cpRef{head: true}, nil
		}
		if back, ok := parseAncestry(rest); ok {
			return cpRef{head: true, back: back}, nil
		}
		return cpRef{}, argError("checkpoint", "%q is not a checkpoint: use %s", s, checkpointRefHelp)
	}
	seq, err := checkpoint.ParseRef(t)
	if err != nil {
		return cpRef{}, argError("checkpoint", "%q is not a checkpoint: use %s", s, checkpointRefHelp)
	}
	return cpRef{seq: seq}, nil
}

// parseAncestry sums git's ancestry suffixes after HEAD: ~N is N parents
// back, ~ and ^ (or ^1) one, ^0 none, in any sequence (HEAD~~ and HEAD~2^
// are HEAD~2 and HEAD~3). A checkpoint has one parent, so ^2 and beyond
// name nothing.
func parseAncestry(rest string) (int, bool) {
	back := 0
	for rest != "" {
		op := rest[0]
		if op != '~' && op != '^' {
			return 0, false
		}
		rest = rest[1:]
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		n := 1
		if digits > 0 {
			var err error
			if n, err = strconv.Atoi(rest[:digits]); err != nil || (op == '^' && n > 1) {
				return 0, false
			}
			rest = rest[digits:]
		}
		if n > math.MaxInt-back {
			return 0, false
		}
		back += n
	}
	return back, true
}

// parseAt parses an --at flag: "" (and "live") is the live workspace.
func parseAt(s string) (cpRef, error) {
	if s == "" {
		return cpRef{live: true}, nil
	}
	return parseCheckpointRef(s, true)
}

// resolve returns the checkpoint r names in run runID, 0 for the live
// workspace (runs.Live). HEAD~N follows each checkpoint's parent, so after
// a rollback it walks the branch the run is on. It fails with
// checkpoint.not_found when the run has no checkpoint there.
func (r cpRef) resolve(ctx context.Context, st *wsstore.Store, runID string) (int64, error) {
	switch {
	case r.live:
		return runs.Live, nil
	case !r.head:
		return r.seq, nil
	}
	run, err := st.Runs.Run(ctx, runID)
	if err != nil {
		return 0, err
	}
	if run.HeadCheckpoint == 0 {
		return 0, wserr.New(wserr.CheckpointNotFound, "checkpoint", "", "run %s has no checkpoint yet: HEAD names none", runID)
	}
	seq := run.HeadCheckpoint
	if r.back == 0 {
		return seq, nil
	}
	// One row per step back, in one snapshot: the cost is N's, not the
	// run's checkpoints'.
	err = st.DB.View(ctx, func(tx *index.Tx) error {
		for i := 0; i < r.back; i++ {
			c, err := st.Checkpoints.Get(ctx, tx, runID, seq)
			if err != nil {
				return err
			}
			if c.Parent == "" {
				return wserr.New(wserr.CheckpointNotFound, "checkpoint", "", "HEAD~%d: %s is the oldest checkpoint left on run %s's branch, %d back", r.back, checkpoint.ID(seq), runID, i)
			}
			if seq, err = checkpoint.ParseRef(c.Parent); err != nil {
				return err
			}
		}
		return nil
	})
	return seq, err
}

// runStatuses are the values runs --status takes, in lifecycle order.
var runStatuses = []runs.Status{runs.Created, runs.Running, runs.AwaitingApproval, runs.Paused, runs.Completed, runs.Failed, runs.Cancelled}

// completeRuns completes a run argument with the store's run ids (and
// latest), newest first; it offers nothing when the store cannot be
// opened.
func (a *app) completeRuns(cmd *cobra.Command, toComplete string) []cobra.Completion {
	st, ok := a.completionStore(cmd)
	if !ok {
		return nil
	}
	defer st.Close()
	ids, err := runIDs(cmd.Context(), st)
	if err != nil {
		return nil
	}
	out := []cobra.Completion{}
	if strings.HasPrefix(latestRun, toComplete) {
		out = append(out, cobra.CompletionWithDesc(latestRun, "the newest run"))
	}
	for _, id := range ids {
		if strings.HasPrefix(id, toComplete) {
			out = append(out, id)
		}
	}
	return out
}

// completeCheckpoints completes a checkpoint argument of run runRef with
// its checkpoint ids (newest first) and HEAD, and live when allowLive.
func (a *app) completeCheckpoints(cmd *cobra.Command, runRef, toComplete string, allowLive bool) []cobra.Completion {
	st, ok := a.completionStore(cmd)
	if !ok {
		return nil
	}
	defer st.Close()
	runID, err := resolveRun(cmd.Context(), st, runRef)
	if err != nil {
		return nil
	}
	cps, err := st.Checkpoints.List(cmd.Context(), runID)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, c := range []struct{ v, desc string }{{"HEAD", "the checkpoint the run is at"}, {"live", "the live workspace"}} {
		if (c.v != "live" || allowLive) && strings.HasPrefix(c.v, toComplete) {
			out = append(out, cobra.CompletionWithDesc(c.v, c.desc))
		}
	}
	for i := len(cps) - 1; i >= 0; i-- {
		if strings.HasPrefix(cps[i].ID, toComplete) {
			out = append(out, cobra.CompletionWithDesc(cps[i].ID, cps[i].Reason))
		}
	}
	return out
}

// completionStore opens the store the command line names for reading, for
// completion; ok is false when there is none.
func (a *app) completionStore(cmd *cobra.Command) (*wsstore.Store, bool) {
	g, err := a.globals(cmd)
	if err != nil || storeExists(g.storeDir) != nil {
		return nil, false
	}
	g.now = nil
	st, err := openStore(cmd.Context(), g, readOnly)
	if err != nil {
		return nil, false
	}
	return st, true
}

// runArgs completes the first argument with run ids, and the second (when
// cpArg) with the run's checkpoints; other arguments get file completion
// off.
func (a *app) runArgs(cpArgs ...int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return a.completeRuns(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		if slices.Contains(cpArgs, len(args)) {
			return a.completeCheckpoints(cmd, args[0], toComplete, len(args) > 1), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// atFlag registers --at on cmd (a checkpoint of the run named by the first
// argument) with completion of that run's checkpoints.
func (a *app) atFlag(cmd *cobra.Command, target *string, usage string) {
	cmd.Flags().StringVar(target, "at", "", usage+" ("+checkpointRefHelp+")")
	refuseEmpty(cmd, "at")
	_ = cmd.RegisterFlagCompletionFunc("at", func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.completeCheckpoints(cmd, args[0], toComplete, true), cobra.ShellCompDirectiveNoFileComp
	})
}

// statusList is runStatuses for a message: "created, running, …".
func statusList() string {
	s := make([]string, len(runStatuses))
	for i, st := range runStatuses {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// refuseEmpty makes cmd refuse, before it opens anything, each flag of
// names given as "" (a script's unset variable): read as left out, it
// would list more than was asked for, or read the live workspace instead
// of a checkpoint. A later call adds to the flags an earlier one named.
func refuseEmpty(cmd *cobra.Command, names ...string) {
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(c, args); err != nil {
				return err
			}
		}
		for _, n := range names {
			if f := c.Flags().Lookup(n); f != nil && f.Changed && f.Value.String() == "" {
				return argError(c.Name(), "--%s is empty: give a value, or leave --%s out", n, n)
			}
		}
		return nil
	}
}
