package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

type logOptions struct {
	globals
	after  int64
	limit  int
	follow bool
	poll   time.Duration
}

func newLogCmd(a *app) *cobra.Command {
	var o logOptions
	cmd := &cobra.Command{
		Use:   "log RUN",
		Short: "Print a run's journal (its timeline)",
		Long: `log prints a run's journal events after --after (an event seq) as
"seq  time  type  summary" lines; --limit N stops after N events.

--follow keeps printing new events as they are committed, until the run
ends (run_completed, run_failed or run_cancelled) or you interrupt it; a
run deleted meanwhile ends it with run.not_found (exit 3).

--json prints JSON lines, one event per line: the events.jsonl format,
which is also what --follow streams.`,
		Args:              exactArgs(1),
		ValidArgsFunction: a.runArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := a.globals(cmd)
			if err != nil {
				return err
			}
			o.globals = g
			o.poll = a.followPoll
			return runLog(cmd.Context(), o, args)
		},
	}
	int64Var(cmd.Flags(), &o.after, "after", 0, "only events after this seq")
	intVar(cmd.Flags(), &o.limit, "limit", 0, "at most this many events (0: all)")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new events until the run ends")
	return cmd
}

// errStopFollow ends a Follow once the run has ended or the limit is hit.
var errStopFollow = errors.New("stop following")

// finalEvent reports whether e says the run has ended.
func finalEvent(e journal.Event) bool {
	switch e.Type {
	case journal.RunCompleted, journal.RunFailed, journal.RunCancelled:
		return true
	}
	return false
}

func runLog(ctx context.Context, o logOptions, args []string) error {
	if o.after < 0 || o.limit < 0 {
		return argError("log", "--after and --limit must not be negative")
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
	run, err := st.Runs.Run(ctx, runID)
	if err != nil {
		return err
	}
	print := eventPrinter(o.out, o.json)
	n := 0
	// The final event is not the last word: the transaction that records
	// it may journal more after it (scratch_collected), so a follow that
	// saw it stops at the next poll that finds nothing new.
	sawFinal := false
	emit := func(e journal.Event) error {
		if err := print(e); err != nil {
			return err
		}
		n++
		if o.limit > 0 && n >= o.limit {
			return errStopFollow
		}
		sawFinal = sawFinal || finalEvent(e)
		return nil
	}
	after := o.after
	for {
		page, err := st.Journal.Page(ctx, runID, journal.PageQuery{AfterSeq: after, Limit: journal.MaxLimit})
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := emit(e); errors.Is(err, errStopFollow) {
				return nil
			} else if err != nil {
				return err
			}
			after = e.Seq
		}
		if len(page) == 0 { // a page may end short at journal.MaxPageBytes
			break
		}
	}
	if !o.follow || run.Status.Final() {
		return nil
	}
	// A follow that printed the final event ends at the first poll that
	// finds nothing new, whatever became of the run since. Before that, a
	// run deleted while followed ends the follow (run.not_found): its
	// journal went with it, so its final event never comes; and a run
	// seen ended without its final event printed gets one more poll.
	ended := false
	alive := func(ctx context.Context) error {
		if sawFinal {
			return errStopFollow // whatever became of the run since
		}
		if readerGone(o.out) {
			return errStopFollow // what reads the output has gone
		}
		run, err := st.Runs.Run(ctx, runID)
		switch {
		case wserr.Is(err, wserr.RunNotFound):
			return wserr.New(wserr.RunNotFound, "log", "", "run %s was deleted while it was followed", runID)
		case err != nil:
			return err
		case run.Status.Final() && ended:
			return errStopFollow
		case run.Status.Final():
			ended = true
		}
		return nil
	}
	err = st.Journal.FollowWhile(ctx, runID, after, o.poll, alive, emit)
	if errors.Is(err, errStopFollow) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// eventPrinter prints events as timeline lines or JSON lines, each
// written as soon as it arrives.
func eventPrinter(w io.Writer, asJSON bool) func(journal.Event) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return func(e journal.Event) error { return enc.Encode(e) }
	}
	return func(e journal.Event) error {
		return timeline(w, []journal.Event{e})
	}
}
