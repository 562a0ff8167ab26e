package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

func newDemoCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "demo",
		Short: "Record a short agent session in a temporary store and print its timeline",
		Long: `demo plays a short agent session. Without --store it runs in a new
temporary store that it removes when it ends, so it never touches the
default store; with --store DIR it records the run in DIR (creating the
store if needed), where it stays for "wsctl runs", "show", "log" and the
rest, until "wsctl rm RUN" (or removing DIR).

The session: it creates a run (with a fresh id, so it can run again and again)
in the chat "demo-chat" with input/prompt_snapshot.json, writes
output/main.md and output/status.md, patches main.md, writes
scratch/notes.md (every change takes a checkpoint), rolls back to an
earlier checkpoint and writes again, sets a manifest with two artifacts,
commits through a chat sink that prints the message, and finishes the run.
Then it prints the run's timeline (its journal) and the final diff.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.checkStoreFlag(cmd); err != nil {
				return err
			}
			temp := a.storeFlag == ""
			if temp {
				dir, err := os.MkdirTemp("", "wsctl-demo-")
				if err != nil {
					return fmt.Errorf("demo: %w", err)
				}
				defer os.RemoveAll(dir)
				// A reader that goes away (wsctl demo | head -1) would
				// otherwise end the process by SIGPIPE before the
				// temporary store is removed; noticed, a write to it
				// fails instead, and demo ends quietly, with status 0.
				pipe := make(chan os.Signal, 1)
				signal.Notify(pipe, syscall.SIGPIPE)
				defer signal.Stop(pipe)
				a.storeFlag = filepath.Join(dir, "store")
				defer func() { a.storeFlag = "" }()
			}
			var err error
			if g, err = a.globals(cmd); err != nil {
				return err
			}
			err = runDemo(cmd.Context(), g, temp)
			if temp && pipeClosed(err) {
				return nil // the reader went away: nothing more to show
			}
			return err
		},
	}
}

// demoChat is the chat every demo run belongs to, so repeated demos show
// several runs sharing one chat workspace.
var demoChat = runs.ChatKey{Kind: "character", StableChatID: "demo-chat"}

const demoPrompt = `{
  "chatCompletionPayload": {
    "messages": [
      {"role": "system", "content": "You are a storyteller."},
      {"role": "user", "content": "Write one line about a lighthouse keeper at dusk."}
    ]
  }
}
`

// demoResult is demo's --json output.
type demoResult struct {
	RunID       string                `json:"runId"`
	WorkspaceID string                `json:"workspaceId"`
	Store       string                `json:"store"`
	Commit      runs.CommitRecord     `json:"commit"`
	Events      []journal.Event       `json:"events"`
	Diff        []checkpoint.FileDiff `json:"diff"`
}

// runDemo plays the session in g.storeDir; temp says the store is a
// temporary one that goes when demo ends.
func runDemo(ctx context.Context, g globals, temp bool) error {
	st, err := openStore(ctx, g, create)
	if err != nil {
		return err
	}
	defer st.Close()
	svc := st.Runs

	var suffix [4]byte
	_, _ = rand.Read(suffix[:]) // crypto/rand.Read never fails
	runID := "demo_" + g.now().UTC().Format("20060102T150405") + "_" + hex.EncodeToString(suffix[:])
	run, err := svc.CreateRun(ctx, runs.CreateRequest{
		Chat:    demoChat,
		ChatRef: json.RawMessage(`{"kind":"character","characterId":"keeper","fileName":"Keeper - 2026-01-01.jsonl"}`),
		RunID:   runID,
		Inputs:  map[string][]byte{"prompt_snapshot.json": []byte(demoPrompt)},
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if !g.json {
		if temp {
			fmt.Fprintf(g.out, "wsctl demo: one agent run in a temporary store (%s), removed when demo ends\n", g.storeDir)
		} else {
			fmt.Fprintf(g.out, "wsctl demo: one agent run recorded in %s\n", g.storeDir)
		}
		fmt.Fprintf(g.out, "run %s in chat %s (%s/%s)\n", run.ID, run.ChatID, demoChat.Kind, demoChat.StableChatID)
	}

	ws := svc.Workspace(run.ID, runs.ModelScope)
	write := func(path, content string) error {
		_, err := ws.Write(ctx, vfs.MustPath(path), []byte(content), vfs.WriteOptions{})
		return err
	}
	var afterStatus int64 // the checkpoint taken after status.md is written
	steps := []func() error{
		func() error { return write("output/main.md", "The keeper climbs the tower.\n") },
		func() error {
			if err := write("output/status.md", "night 1 | lamp lit\n"); err != nil {
				return err
			}
			r, err := svc.Run(ctx, run.ID)
			afterStatus = r.HeadCheckpoint
			return err
		},
		func() error {
			_, err := ws.Patch(ctx, vfs.MustPath("output/main.md"), "climbs the tower", "climbs the tower as the storm breaks", vfs.PatchOptions{})
			return err
		},
		func() error { return write("scratch/notes.md", "idea: the storm wrecks the lamp?\n") },
		// The writer changes course: back to the checkpoint taken after
		// status.md, before the patch and the notes.
		func() error {
			_, err := svc.Rollback(ctx, run.ID, afterStatus, runs.RollbackOptions{})
			return err
		},
		func() error { return write("output/main.md", "The keeper lit the lamp at dusk.\n") },
		func() error {
			return svc.SetManifest(ctx, run.ID, runs.Manifest{
				WorkspaceVersion: 1,
				Artifacts: []runs.Artifact{
					{ID: "main", Path: "output/main.md", Kind: "body", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true, AssemblyOrder: 10},
					{ID: "status", Path: "output/status.md", Kind: "status", Target: runs.Target{Kind: runs.TargetMessageExtra, Key: "status_bar"}, AssemblyOrder: 20},
				},
				CommitPolicy: runs.CommitPolicy{DefaultTarget: runs.TargetMessageBody},
			})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}

	// The sink stands in for the host's chat: it prints what it receives.
	sink := runs.SinkFunc(func(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		if !g.json {
			fmt.Fprintf(g.out, "chat sink <- %s (%s): mes %q\n", req.CommitID, req.Mode, req.Message.Body)
			for k, v := range req.Message.Extra {
				fmt.Fprintf(g.out, "  extra.%s %q\n", k, v)
			}
		}
		return json.RawMessage(`{"savedBy":"wsctl demo"}`), nil
	})
	rec, err := svc.Commit(ctx, run.ID, sink, runs.CommitOptions{})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if _, err := svc.Finish(ctx, run.ID); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	events, err := allEvents(ctx, st.Journal, run.ID, 0)
	if err != nil {
		return err
	}
	diff, err := svc.Diff(ctx, run.ID, 1, runs.Live, runs.DiffOptions{})
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.out, demoResult{RunID: run.ID, WorkspaceID: run.ChatID, Store: g.storeDir, Commit: rec, Events: events, Diff: diff})
	}
	fmt.Fprintf(g.out, "\ntimeline (wsctl log %s):\n", run.ID)
	if err := timeline(g.out, events); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "\nfinal diff, %s -> end of run (wsctl diff %s 1):\n", checkpoint.ID(1), run.ID)
	if err := writeUnified(g.out, diff); err != nil {
		return err
	}
	if temp {
		_, err = fmt.Fprint(g.out, "\nnot kept (a temporary store): \"wsctl demo --store ./demo-store\" keeps the run for \"wsctl --store ./demo-store runs\", show latest, cat latest output/main.md; \"rm -r ./demo-store\" removes it\n")
		return err
	}
	q := shellQuote(g.storeDir)
	_, err = fmt.Fprintf(g.out, "\nnext: wsctl --store %s runs | show %s | cat latest output/main.md; the run stays there until \"wsctl --store %s rm %s\"\n",
		q, run.ID, q, run.ID)
	return err
}

// allEvents returns every event of the run after afterSeq, paging through
// the journal.
func allEvents(ctx context.Context, j *journal.Journal, runID string, afterSeq int64) ([]journal.Event, error) {
	var out []journal.Event
	for {
		page, err := j.Page(ctx, runID, journal.PageQuery{AfterSeq: afterSeq, Limit: journal.MaxLimit})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) == 0 { // a page may end short at journal.MaxPageBytes
			return out, nil
		}
		afterSeq = page[len(page)-1].Seq
	}
}
