package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

type pruneOptions struct {
	globals
	dryRun  bool
	chat    string
	chatSet bool // --chat was given: an empty one is refused, not every chat
}

func newPruneCmd(a *app) *cobra.Command {
	var o pruneOptions
	var cmd *cobra.Command
	cmd = &cobra.Command{
		Use:   "prune",
		Short: "Apply the retention policy: delete the runs and checkpoints it names",
		Long: `prune applies the retention policy ("wsctl policy") to every chat, or to
--chat's (chat_…, KIND:ID or KIND/ID, as "wsctl runs --help" says): finished
runs past keepCompletedRuns, keepFailedRuns, maxRunWorkspacesPerChat or
autoPruneAfterDays are deleted, and runs are held to
maxCheckpointBytesPerRun. Active runs and checkpoints a commit refers to
are never deleted; nor is a run with a commit still pending (its sink's
outcome never recorded), which prune lists as kept until "wsctl
resolve-commit" records that outcome. Each deletion is in the deletion log ("wsctl
deletions") with the setting that made it; the space is then reclaimed in
bounded steps, without "wsctl gc" or "wsctl vacuum". Each run's deletion is
a transaction of its own: a prune that fails part way keeps the runs it
deleted, prints them and exits with the error's status.`,
		Args: exactArgs(0),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			o.chatSet = cmd.Flags().Changed("chat")
			return runPrune(ctx, o)
		}),
	}
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "report what would be deleted; delete nothing")
	cmd.Flags().StringVar(&o.chat, "chat", "", "only this `CHAT` (chat_…, KIND:ID or KIND/ID)")
	return cmd
}

func runPrune(ctx context.Context, o pruneOptions) error {
	if o.chatSet && o.chat == "" {
		return argError("prune", "--chat is empty: name a chat, or leave --chat out for every chat")
	}
	chatID, err := chatIDArg("prune", o.chat)
	if err != nil {
		return err
	}
	mode := readWrite
	if o.dryRun {
		mode = readOnly // deletes nothing: opened as gc --dry-run is
	}
	st, err := openStore(ctx, o.globals, mode)
	if err != nil {
		return err
	}
	defer st.Close()
	// A chat that does not exist is store.not_found: nothing to prune is
	// not success.
	rep, err := st.Runs.Prune(ctx, runs.PruneOptions{DryRun: o.dryRun, ChatID: chatID})
	if err != nil && (rep.DryRun || rep.RunCount+rep.CheckpointRuns == 0) {
		return err
	}
	// A pass that failed after some of its deletions committed prints
	// them, then fails with its error.
	if werr := printPrune(o, rep, err != nil); werr != nil || err == nil {
		return werr
	}
	return err
}

// printPrune prints prune's report; stopped says a failure ended the pass
// after the deletions reported.
func printPrune(o pruneOptions, rep runs.PruneReport, stopped bool) error {
	if o.json {
		return writeJSON(o.out, rep)
	}
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	for _, r := range rep.Runs {
		fmt.Fprintf(o.out, "%s run %s (%s, %s) by %s\n", verb, r.RunID, r.ChatID, r.Status, r.Reason)
	}
	for _, c := range rep.Checkpoints {
		fmt.Fprintf(o.out, "%s %d checkpoints of run %s (%d bytes) by maxCheckpointBytesPerRun\n", verb, c.CheckpointCount, c.RunID, c.Bytes)
	}
	for _, h := range rep.Held {
		fmt.Fprintf(o.out, "kept run %s (%s, %s), named by %s, for its pending commits %s: resolve them with \"wsctl resolve-commit\"\n",
			h.RunID, h.ChatID, h.Status, h.Reason, strings.Join(h.PendingCommits, ", "))
	}
	if rep.Truncated {
		fmt.Fprintf(o.out, "listed the first %d of %d runs, %d of %d runs' checkpoints and %d of %d kept runs\n",
			len(rep.Runs), rep.RunCount, len(rep.Checkpoints), rep.CheckpointRuns, len(rep.Held), rep.HeldCount)
	}
	if stopped {
		_, err := fmt.Fprintf(o.out, "%d runs, %d runs' checkpoints; stopped by an error after these: run prune again to go on\n", rep.RunCount, rep.CheckpointRuns)
		return err
	}
	_, err := fmt.Fprintf(o.out, "%d runs, %d runs' checkpoints; %d bytes freed\n", rep.RunCount, rep.CheckpointRuns, rep.BytesFreed)
	return err
}

type rmChatOptions struct {
	globals
	force bool
}

func newRmChatCmd(a *app) *cobra.Command {
	var o rmChatOptions
	cmd := &cobra.Command{
		Use:   "rm-chat CHAT...",
		Short: "Delete chat workspaces with their runs, persist layer and commits",
		Long: `rm-chat deletes the workspace of each chat named, by its workspace id
(chat_…), KIND:STABLE_CHAT_ID (e.g. character:abc123) or
KIND/STABLE_CHAT_ID, with all its runs, journals, checkpoints, commits and
persist/ layer: all of them or none. A chat named by its key that the
store never saw is reported and is no error; a workspace id the store
does not hold is store.not_found (status 3), and nothing is deleted.
While a run of them is active it fails with chat.active_run (status 5)
and changes nothing, unless --force, which cancels those runs first.
Each deletion is in the deletion log; the space is reclaimed right after.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return wserr.New(protocol.CodeInvalidArgument, "rm-chat", "", "name at least one chat by %s", chatRefHelp)
			}
			return nil
		},
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runRmChat(ctx, o, args)
		}),
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "cancel active runs of the chats, then delete")
	return cmd
}

func runRmChat(ctx context.Context, o rmChatOptions, args []string) error {
	refs := make([]chatRef, len(args))
	for i, a := range args {
		var err error
		if refs[i], err = parseChatRef("rm-chat", a, false); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	// Chats are deleted by key: a chat named by its workspace id must
	// exist for its key to be known, and every one is looked up before
	// anything is deleted.
	keys := make([]runs.ChatKey, len(refs))
	for i, r := range refs {
		keys[i] = r.key
		if r.key == (runs.ChatKey{}) {
			c, err := st.Runs.Chat(ctx, r.id) // store.not_found
			if err != nil {
				return err
			}
			keys[i] = runs.ChatKey{Kind: c.Kind, StableChatID: c.StableChatID}
		}
	}
	res, err := st.Runs.DeleteChats(ctx, keys, o.force)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, res)
	}
	for _, c := range res.Chats {
		if !c.Found {
			fmt.Fprintf(o.out, "no workspace for %s:%s\n", c.Chat.Kind, c.Chat.StableChatID)
			continue
		}
		fmt.Fprintf(o.out, "deleted chat %s (%s:%s): %d runs, %d cancelled\n", c.WorkspaceID, c.Chat.Kind, c.Chat.StableChatID, c.RunCount, c.CancelledCount)
	}
	_, err = fmt.Fprintf(o.out, "%d bytes freed\n", res.BytesFreed)
	return err
}

type deletionsOptions struct {
	globals
	after int64
	limit int
}

func newDeletionsCmd(a *app) *cobra.Command {
	var o deletionsOptions
	cmd := &cobra.Command{
		Use:   "deletions",
		Short: "List the store's deletion log",
		Long: `deletions lists every deletion the store made: runs, chats, checkpoints
pruned by a cap and the reclaims after them, with why (the setting or the
request), when, and the bytes freed. The log outlives what it names.`,
		Args: exactArgs(0),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runDeletions(ctx, o)
		}),
	}
	int64Var(cmd.Flags(), &o.after, "after", 0, "only entries after this `ID`")
	intVar(cmd.Flags(), &o.limit, "limit", 0, "at most `N` entries (0: all)")
	return cmd
}

func runDeletions(ctx context.Context, o deletionsOptions) error {
	if o.after < 0 || o.limit < 0 {
		return argError("deletions", "--after and --limit must not be negative")
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	// The log grows with every deletion the store ever made: it is read
	// and printed a page at a time, as ls prints a listing.
	out := &pages[runs.Deletion]{w: o.out, json: o.json, header: []string{"ID", "AT", "KIND", "WORKSPACE", "RUN", "REASON", "BYTES FREED"},
		row: func(d runs.Deletion) []string {
			return []string{fmt.Sprint(d.ID), d.At.Format("2006-01-02T15:04:05Z"), d.Kind, d.ChatID, d.RunID, d.Reason, fmt.Sprint(d.BytesFreed)}
		}}
	defer out.abort()
	after, left := o.after, o.limit
	for {
		n := deletionsPage
		if o.limit > 0 {
			n = min(n, left)
		}
		ds, more, err := st.Runs.Deletions(ctx, after, n)
		if err != nil {
			return err
		}
		if err := out.add(ds); err != nil {
			return err
		}
		left -= len(ds)
		if !more || (o.limit > 0 && left == 0) {
			return out.close()
		}
		after = ds[len(ds)-1].ID
	}
}

// deletionsPage is how many entries of the deletion log deletions reads
// at a time.
var deletionsPage = 1000

type policyOptions struct {
	globals
	chat    string
	chatSet bool // --chat was given: an empty one is refused, not the store's
	set     []string
}

func newPolicyCmd(a *app) *cobra.Command {
	var o policyOptions
	var cmd *cobra.Command
	cmd = &cobra.Command{
		Use:   "policy [--set NAME=VALUE]...",
		Short: "Show or set the retention policy and the store cap",
		Long: `policy prints the retention policy of the store, or of --chat (its
overrides and what applies; chat_…, KIND:ID or KIND/ID, as "wsctl runs
--help" says), and with --set changes it: keepCompletedRuns,
keepFailedRuns, maxRunWorkspacesPerChat, maxCheckpointBytesPerRun,
autoPruneAfterDays, and for the store maxStoreBytes. A value "-" unsets the
setting (a chat then inherits the store's, the store the mobile profile's
defaults under --profile mobile); 0 in maxCheckpointBytesPerRun or
maxStoreBytes is no cap. Setting nothing deletes
nothing: "wsctl prune", or the next run to finish when pruning is
automatic, applies it.`,
		Args: exactArgs(0),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			o.chatSet = cmd.Flags().Changed("chat")
			return runPolicy(ctx, o)
		}),
	}
	cmd.Flags().StringVar(&o.chat, "chat", "", "this `CHAT`'s (chat_…, KIND:ID or KIND/ID; default: the store's)")
	cmd.Flags().StringArrayVar(&o.set, "set", nil, "set `NAME=VALUE` (an integer, or - to unset)")
	return cmd
}

func runPolicy(ctx context.Context, o policyOptions) error {
	if o.chatSet && o.chat == "" {
		return argError("policy", "--chat is empty: name a chat, or leave --chat out for the store's policy")
	}
	chatID, err := chatIDArg("policy", o.chat)
	if err != nil {
		return err
	}
	// Every --set is checked before the store is opened: a bad one is a
	// usage error (exit 2) whatever the store's state, and opens nothing.
	for _, kv := range o.set {
		if _, err := parsePolicySet(&runs.Policy{}, kv); err != nil {
			return err
		}
	}
	mode := readOnly
	if len(o.set) > 0 {
		mode = readWrite
	}
	st, err := openStore(ctx, o.globals, mode)
	if err != nil {
		return err
	}
	defer st.Close()
	scope := chatID
	if scope == "" {
		scope = runs.StoreScope
	}
	p, err := st.Runs.Policy(ctx, scope) // store.not_found for a chat that does not exist
	if err != nil {
		return err
	}
	for _, kv := range o.set {
		if _, err := parsePolicySet(&p, kv); err != nil {
			return err
		}
	}
	if len(o.set) > 0 {
		if err := st.Runs.SetPolicy(ctx, scope, p); err != nil {
			// The values came from the command line.
			return asArgError("policy", err)
		}
	}
	eff, err := st.Runs.EffectivePolicy(ctx, chatID)
	if err != nil {
		return err
	}
	out := map[string]any{"scope": scope, "policy": p, "effective": eff}
	if o.json {
		return writeJSON(o.out, out)
	}
	show := func(name string, v any) { fmt.Fprintf(o.out, "%-26s %v\n", name, v) }
	for _, f := range policyFields(eff) {
		show(f.name, f.val)
	}
	return nil
}

type policyField struct {
	name string
	val  string
}

func policyFields(p runs.Policy) []policyField {
	i := func(v *int) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	}
	i64 := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	}
	return []policyField{{"keepCompletedRuns", i(p.KeepCompletedRuns)}, {"keepFailedRuns", i(p.KeepFailedRuns)},
		{"maxRunWorkspacesPerChat", i(p.MaxRunWorkspacesPerChat)}, {"maxCheckpointBytesPerRun", i64(p.MaxCheckpointBytesPerRun)},
		{"autoPruneAfterDays", i(p.AutoPruneAfterDays)}, {"maxStoreBytes", i64(p.MaxStoreBytes)}}
}

// parsePolicySet applies one --set NAME=VALUE to p and returns NAME.
func parsePolicySet(p *runs.Policy, kv string) (string, error) {
	name, val, ok := strings.Cut(kv, "=")
	if !ok {
		return "", wserr.New(protocol.CodeInvalidArgument, "policy", "", "%q is not NAME=VALUE", kv)
	}
	return name, setPolicyField(p, name, val)
}

func setPolicyField(p *runs.Policy, name, val string) error {
	var n int64
	unset := val == "-"
	if !unset {
		// The whole value, in decimal: Sscan took "1e3" for 1, "8MiB"
		// for 8 and "010" for 8.
		var err error
		if n, err = strconv.ParseInt(val, 10, 64); err != nil {
			return wserr.New(protocol.CodeInvalidArgument, "policy", "", "%s=%q: not a decimal integer in range", name, val)
		}
	}
	bits := 64
	switch name {
	case "keepCompletedRuns", "keepFailedRuns", "maxRunWorkspacesPerChat", "autoPruneAfterDays":
		bits = strconv.IntSize
	}
	if !unset && bits < 64 && (n > math.MaxInt32 || n < math.MinInt32) {
		return wserr.New(protocol.CodeInvalidArgument, "policy", "", "%s=%d: out of range for this build (%d-bit)", name, n, bits)
	}
	ip := func() *int {
		if unset {
			return nil
		}
		v := int(n)
		return &v
	}
	i64 := func() *int64 {
		if unset {
			return nil
		}
		return &n
	}
	switch name {
	case "keepCompletedRuns":
		p.KeepCompletedRuns = ip()
	case "keepFailedRuns":
		p.KeepFailedRuns = ip()
	case "maxRunWorkspacesPerChat":
		p.MaxRunWorkspacesPerChat = ip()
	case "maxCheckpointBytesPerRun":
		p.MaxCheckpointBytesPerRun = i64()
	case "autoPruneAfterDays":
		p.AutoPruneAfterDays = ip()
	case "maxStoreBytes":
		p.MaxStoreBytes = i64()
	default:
		return wserr.New(protocol.CodeInvalidArgument, "policy", "", "unknown setting %q", name)
	}
	return nil
}
