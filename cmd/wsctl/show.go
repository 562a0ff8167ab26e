package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

func newShowCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:               "show RUN",
		Short:             "Show a run: status, chat, profile, manifest, checkpoints, commits",
		Args:              exactArgs(1),
		ValidArgsFunction: a.runArgs(),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runShow(ctx, g, args)
		}),
	}
}

// runDetails is show's --json output.
type runDetails struct {
	Run         runs.Run            `json:"run"`
	Manifest    runs.Manifest       `json:"manifest"`
	Checkpoints int                 `json:"checkpoints"`
	Events      int64               `json:"events"`
	Files       int                 `json:"files"`
	Bytes       int64               `json:"bytes"`
	Commits     []runs.CommitRecord `json:"commits"`
	// LastToolCall and LastModelRound are the latest tool call and model
	// round events the host recorded (tool_call_*, model_*), if any.
	LastToolCall   *journal.Event `json:"lastToolCall,omitempty"`
	LastModelRound *journal.Event `json:"lastModelRound,omitempty"`
}

// eachCommit calls fn with each commit of run id in order, reading them a
// page at a time.
func eachCommit(ctx context.Context, svc *runs.Service, id string, fn func(runs.CommitRecord) error) error {
	var q runs.CommitQuery
	for {
		page, more, err := svc.CommitsPage(ctx, id, q)
		if err != nil {
			return err
		}
		for _, c := range page {
			if err := fn(c); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		q.AfterSeq = page[len(page)-1].Seq
	}
}

// writeDetailsJSON writes d as writeJSON would, its commits taken from
// each as they are written: the messages of one page are held at a time,
// not every one. When each fails, the document is still ended, its
// commits cut short, so that what it wrote is one JSON document.
func writeDetailsJSON(w io.Writer, d runDetails, each func(func(runs.CommitRecord) error) error) error {
	d.Commits = nil
	var buf bytes.Buffer
	if err := writeJSON(&buf, d); err != nil {
		return err
	}
	// Only the top level is indented by two spaces.
	const slot = "\n  \"commits\": null"
	head, tail, ok := strings.Cut(buf.String(), slot)
	if !ok {
		return errors.New("show: the run's details have no commits field")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(head + "\n  \"commits\": [")
	n := 0
	err := each(func(c runs.CommitRecord) error {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("    ", "  ")
		if err := enc.Encode(c); err != nil {
			return err
		}
		if n > 0 {
			bw.WriteString(",")
		}
		n++
		bw.WriteString("\n    ")
		_, err := bw.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
		return err
	})
	if n > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]" + tail)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// lastRecords finds, paging the journal back from its end, the latest
// tool call event and the latest model round event of run id.
func lastRecords(ctx context.Context, j *journal.Journal, id string, d *runDetails) error {
	// A BeforeSeq of 0 is no bound, which pages from the start: the
	// newest page is the one before Last()+1.
	last, err := j.Last(ctx, nil, id)
	if err != nil {
		return err
	}
	before := last + 1
	for d.LastToolCall == nil || d.LastModelRound == nil {
		evs, err := j.Page(ctx, id, journal.PageQuery{BeforeSeq: before, Limit: journal.MaxLimit})
		if err != nil || len(evs) == 0 {
			return err
		}
		for i := len(evs) - 1; i >= 0; i-- {
			e := evs[i]
			switch e.Type {
			case journal.ToolCallRequested, journal.ToolCallCompleted, journal.ToolCallFailed:
				if d.LastToolCall == nil {
					d.LastToolCall = &e
				}
			case journal.ModelRequestCreated, journal.ModelCompleted, journal.ModelResponseStored:
				if d.LastModelRound == nil {
					d.LastModelRound = &e
				}
			}
		}
		if before = evs[0].Seq; before <= 1 {
			return nil
		}
	}
	return nil
}

func runShow(ctx context.Context, g globals, args []string) error {
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	var d runDetails
	if d.Run, err = st.Runs.Run(ctx, id); err != nil {
		return err
	}
	if d.Manifest, err = st.Runs.Manifest(ctx, id); err != nil {
		return err
	}
	n, err := st.Checkpoints.Count(ctx, nil, id)
	if err != nil {
		return err
	}
	d.Checkpoints = int(n)
	if d.Events, err = st.Journal.Last(ctx, nil, id); err != nil {
		return err
	}
	files, err := st.Runs.Workspace(id, runs.HostScope).List(ctx, vfs.Root(), allDepth)
	if err != nil {
		return err
	}
	if err := lastRecords(ctx, st.Journal, id, &d); err != nil {
		return err
	}
	for _, f := range files {
		switch f.Path.Top() {
		case runs.ToolArgsRoot, runs.ToolResultsRoot, runs.ModelResponsesRoot:
			continue // the host's records, beside the workspace
		}
		if f.Kind == vfs.KindFile {
			d.Files++
			d.Bytes += f.Size
		}
	}
	commits := func(fn func(runs.CommitRecord) error) error { return eachCommit(ctx, st.Runs, id, fn) }
	if g.json {
		return writeDetailsJSON(g.out, d, commits)
	}
	// The text names each commit, not its message: one page of messages
	// is held at a time.
	if err := commits(func(c runs.CommitRecord) error {
		c.Message = runs.Message{}
		d.Commits = append(d.Commits, c)
		return nil
	}); err != nil {
		return err
	}
	r := d.Run
	t := newTable(g.out)
	t.row("run", r.ID)
	t.row("status", string(r.Status))
	t.row("chat", fmt.Sprintf("%s (%s/%s)", r.ChatID, r.Kind, r.StableChatID))
	if ref := string(r.ChatRef); ref != "" && ref != "{}" {
		t.row("chat ref", ref)
	}
	prof := fmt.Sprintf("%s (visible: %s; writable: %s", r.Profile.ID,
		strings.Join(r.Profile.VisibleRoots, ", "), strings.Join(r.Profile.WritableRoots, ", "))
	if n := r.Profile.MaxCheckpoints; n > 0 {
		prof += fmt.Sprintf("; keeps at most %d checkpoint%s", n, plural(int64(n)))
	}
	t.row("profile", prof+")")
	primary := fmt.Sprintf("%s (%s)", r.PrimaryRoot.Path, r.PrimaryRoot.Source)
	if r.PrimaryRoot.HostPath != "" {
		primary = fmt.Sprintf("%s = %s (%s)", r.PrimaryRoot.Path, r.PrimaryRoot.HostPath, r.PrimaryRoot.Source)
	}
	t.row("primary", primary)
	t.row("created", stamp(r.CreatedAt))
	t.row("updated", stamp(r.UpdatedAt))
	if r.FinishedAt != nil {
		t.row("finished", stamp(*r.FinishedAt))
	}
	t.row("workspace", fmt.Sprintf("root %s, %d files, %s", r.Root.Short(), d.Files, humanBytes(d.Bytes)))
	head := "none"
	if r.HeadCheckpoint > 0 {
		head = checkpoint.ID(r.HeadCheckpoint)
	}
	t.row("checkpoints", fmt.Sprintf("%d, head %s", d.Checkpoints, head))
	t.row("events", fmt.Sprint(d.Events))
	for _, last := range []struct {
		label string
		e     *journal.Event
	}{{"last tool call", d.LastToolCall}, {"last model round", d.LastModelRound}} {
		if last.e != nil {
			t.row(last.label, fmt.Sprintf("%s (seq %d): %s", last.e.Type, last.e.Seq, summarize(*last.e)))
		}
	}
	for i, a := range d.Manifest.Artifacts {
		label := ""
		if i == 0 {
			label = "artifacts"
		}
		target := string(a.Target.Kind)
		if a.Target.Key != "" {
			target += ":" + a.Target.Key
		}
		req := ""
		if a.Required {
			req = ", required"
		}
		t.row(label, fmt.Sprintf("%s %s -> %s%s", a.ID, a.Path, target, req))
	}
	if len(d.Commits) == 0 {
		t.row("commits", "none")
	}
	for i, c := range d.Commits {
		label := ""
		if i == 0 {
			label = "commits"
		}
		t.row(label, fmt.Sprintf("%s %s %s %s from %s", c.ID, c.Kind, c.Mode, c.Status, c.CheckpointID))
	}
	return t.flush()
}
