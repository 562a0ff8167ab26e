package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
)

// summarize renders an event's payload as a short phrase for timelines;
// unknown shapes fall back to compact JSON.
func summarize(e journal.Event) string {
	var p map[string]any
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return ellipsize(string(e.Payload), 60)
	}
	str := func(k string) string {
		if v, ok := p[k].(string); ok {
			return v
		}
		return ""
	}
	num := func(k string) int64 {
		if v, ok := p[k].(float64); ok {
			return int64(v)
		}
		return 0
	}
	var s string
	switch e.Type {
	case journal.RunCreated:
		s = fmt.Sprintf("chat %s, profile %s, %d inputs", str("workspaceId"), str("profileId"), num("inputs"))
	case journal.StatusChanged:
		s = str("from") + " -> " + str("to")
		if r := str("reason"); r != "" {
			s += " (" + r + ")"
		}
	case journal.RunCompleted, journal.RunFailed, journal.RunCancelled, journal.RunFinished:
		s = str("reason")
	case journal.CheckpointCreated:
		s = str("checkpointId") + " " + str("reason")
		// After a rollback the parent is not the checkpoint before: say
		// where history forked.
		if par := str("parent"); par != "" && par != checkpoint.ID(num("seq")-1) {
			s += ", from " + par
		}
	case journal.WorkspaceFileWritten:
		s = fmt.Sprintf("%s, %s", str("path"), humanBytes(num("bytes")))
		if m := str("mode"); m != "" && m != "replace" {
			s += ", " + m
		}
	case journal.WorkspacePatchApplied:
		n := num("replacements")
		s = fmt.Sprintf("%s, %d replacement%s", str("path"), n, plural(n))
	case journal.WorkspaceFileDeleted:
		s = str("path")
	case journal.WorkspaceRolledBack:
		s = "to " + str("checkpointId")
	case journal.CheckpointsPruned:
		var ids []string
		if cs, ok := p["checkpointIds"].([]any); ok {
			for _, c := range cs {
				if id, ok := c.(string); ok {
					ids = append(ids, id)
				}
			}
		}
		// The event names the first ids of a large prune and counts all.
		names := strings.Join(ids, ", ")
		if more := num("checkpointCount") - int64(len(ids)); more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		if capBytes := num("maxCheckpointBytes"); capBytes > 0 {
			s = fmt.Sprintf("%s (keeps at most %s, freed %s)", names, humanBytes(capBytes), humanBytes(num("freedBytes")))
		} else {
			s = fmt.Sprintf("%s (keeps at most %d)", names, num("maxCheckpoints"))
		}
	case journal.ScratchCollected:
		n, c := num("files"), num("checkpoints")
		s = fmt.Sprintf("scratch/: %d file%s, %s; %d checkpoint%s rewritten", n, plural(n), humanBytes(num("bytes")), c, plural(c))
	case journal.ManifestSet:
		n := num("artifacts")
		s = fmt.Sprintf("%d artifact%s", n, plural(n))
	case journal.ArtifactAssembled:
		var ids []string
		if as, ok := p["artifacts"].([]any); ok {
			for _, a := range as {
				if m, ok := a.(map[string]any); ok {
					if id, ok := m["id"].(string); ok {
						ids = append(ids, id)
					}
				}
			}
		}
		s = fmt.Sprintf("%s from %s: %s", str("artifactSetId"), str("checkpointId"), strings.Join(ids, ", "))
	case journal.ChatCommitRequested:
		s = fmt.Sprintf("%s, %v", str("commitId"), p["mode"])
	case journal.ChatCommitCompleted, journal.CommitRolledBack:
		s = str("commitId")
		if p["resolved"] == true {
			s += " (resolved)"
		}
	case journal.ChatCommitFailed:
		s = str("commitId")
		if p["resolved"] == true {
			s += " (resolved)"
		}
		if e := str("error"); e != "" {
			s += ": " + e
		}
	case journal.ContextAssembled:
		var names []string
		if ss, ok := p["sources"].([]any); ok {
			for _, src := range ss {
				if m, ok := src.(map[string]any); ok {
					if n, ok := m["name"].(string); ok {
						names = append(names, n)
					}
				}
			}
		}
		s = fmt.Sprintf("%d source%s", len(names), plural(int64(len(names))))
		if len(names) > 0 {
			s += ": " + strings.Join(names, ", ")
		}
		if n := num("messages"); n > 0 {
			s += fmt.Sprintf(", %d message%s", n, plural(n))
		}
	case journal.ModelRequestCreated:
		s = fmt.Sprintf("round %d", num("round"))
		if m := str("model"); m != "" {
			s += ", " + m
		}
		if n := num("messages"); n > 0 {
			s += fmt.Sprintf(", %d message%s", n, plural(n))
		}
	case journal.ModelCompleted:
		s = fmt.Sprintf("round %d", num("round"))
		if r := str("finishReason"); r != "" {
			s += ", " + r
		}
		if ids, ok := p["toolCallIds"].([]any); ok && len(ids) > 0 {
			s += fmt.Sprintf(", %d tool call%s", len(ids), plural(int64(len(ids))))
		}
	case journal.ModelResponseStored:
		s = fmt.Sprintf("round %d -> %s, %s", num("round"), str("path"), humanBytes(num("bytes")))
	case journal.ToolCallRequested:
		s = fmt.Sprintf("%s %s", str("toolCallId"), str("name"))
		if r := num("round"); r > 0 {
			s += fmt.Sprintf(" (round %d)", r)
		}
	case journal.ToolCallCompleted:
		s = strings.TrimSpace(fmt.Sprintf("%s %s", str("toolCallId"), str("name"))) + " -> " + str("path")
	case journal.ToolCallFailed:
		s = strings.TrimSpace(fmt.Sprintf("%s %s", str("toolCallId"), str("name"))) + ": " + str("code")
	case journal.PersistentChangesCommitted:
		var n int
		if ps, ok := p["paths"].([]any); ok {
			n = len(ps)
		}
		s = fmt.Sprintf("%d path%s -> persist v%d", n, plural(int64(n)), num("persistVersion"))
	default:
		// A type without a summary of its own shows its payload.
		if len(p) > 0 {
			b, _ := json.Marshal(p)
			s = string(b)
		}
	}
	return ellipsize(s, 72)
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// timeline prints events as "seq  time  type  summary" lines with fixed
// columns, so events printed one at a time (log --follow) line up too.
func timeline(w io.Writer, events []journal.Event) error {
	for _, e := range events {
		if _, err := fmt.Fprintf(w, "%4d  %s  %-23s  %s\n", e.Seq, clock(e.At), e.Type, cell(summarize(e))); err != nil {
			return err
		}
	}
	return nil
}
