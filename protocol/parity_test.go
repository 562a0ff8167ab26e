package protocol

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// goOps maps each exported method of the host-facing Go API to the op that
// serves it in batch. A method with "" is intentionally not an op; notOps
// says why.
var goOps = map[string]string{
	// *runs.Service
	"Service.CreateRun":           "run.create",
	"Service.Run":                 "run.show",
	"Service.HostPath":            "run.hostpath",
	"Service.Runs":                "runs.list",
	"Service.RunsPage":            "runs.list",
	"Service.RunIDsWithPrefix":    "",
	"Service.SetStatus":           "run.status",
	"Service.DeleteRun":           "run.delete",
	"Service.CancelAndDeleteRun":  "run.delete",
	"Service.Chat":                "chat.show",
	"Service.ChatsPage":           "chats.list",
	"Service.Checkpoint":          "checkpoint",
	"Service.Rollback":            "rollback",
	"Service.Diff":                "diff",
	"Service.DiffPage":            "diff",
	"Service.DiffFunc":            "",
	"Service.DiffRuns":            "runs.diff",
	"Service.DiffRunsPage":        "runs.diff",
	"Service.Commit":              "commit",
	"Service.RollbackCommit":      "commit.rollback",
	"Service.Commits":             "commits.list",
	"Service.CommitsPage":         "commits.list",
	"Service.ResolveCommit":       "commit.resolve",
	"Service.Finish":              "finish",
	"Service.SetManifest":         "manifest.set",
	"Service.Manifest":            "manifest.get",
	"Service.Materialize":         "materialize",
	"Service.RecordContext":       "context.assembled",
	"Service.RecordModelRequest":  "model.request",
	"Service.RecordModelResponse": "model.response",
	"Service.RecordToolCall":      "tool.call",
	"Service.RecordToolResult":    "tool.result",
	"Service.Prune":               "prune",
	"Service.DeleteChats":         "chat.delete",
	"Service.SetPolicy":           "policy.set",
	"Service.Policy":              "policy.get",
	"Service.EffectivePolicy":     "policy.get",
	"Service.Deletions":           "deletions",
	"Service.Workspace":           "",
	"Service.WorkspaceAt":         "",
	"Service.EachWorkspaceRoot":   "",
	"Service.HasRun":              "",
	"Service.HoldsTree":           "",
	"Service.ExportChat":          "",
	"Service.EachChatRecord":      "",
	"Service.ExportRun":           "",
	"Service.EachRunRecord":       "",
	"Service.EachCommitRow":       "",
	"Service.ImportChat":          "",
	"Service.ImportRun":           "",
	"Service.ImportCommit":        "",
	"Service.MergeRun":            "",
	"Service.MergeCommits":        "",
	"Service.HasCommit":           "",
	"Service.MergePersist":        "",
	"Service.EachCheckpointRef":   "",
	// *runs.Workspace
	"Workspace.Stat":           "stat",
	"Workspace.StatNoRead":     "",
	"Workspace.Read":           "read",
	"Workspace.Open":           "",
	"Workspace.ContentMissing": "",
	"Workspace.List":           "list",
	"Workspace.ListPage":       "list",
	"Workspace.Write":          "write",
	"Workspace.WriteFrom":      "write",
	"Workspace.Patch":          "patch",
	"Workspace.Delete":         "delete",
	"Workspace.Remove":         "delete",
	"Workspace.Search":         "search",
	"Workspace.Apply":          "apply",
	"Workspace.RunID":          "",
	// *wsstore.Store
	"Store.Stats":             "stats",
	"Store.GC":                "gc",
	"Store.CollectSteps":      "gc",
	"Store.Fsck":              "fsck",
	"Store.DU":                "du",
	"Store.DUPage":            "du",
	"Store.Reclaim":           "reclaim",
	"Store.CollectCandidates": "",
	"Store.ActorGC":           "actor.gc",
	"Store.ExportFile":        "export",
	"Store.ImportFile":        "import",
	"Store.Vacuum":            "",
	"Store.VacuumWith":        "",
	"Store.Close":             "",
	"Store.Sync":              "",
	"Store.SyncWith":          "",
	"Store.ReclaimRemote":     "",
	"Store.PullRemote":        "",
	"Store.ResetDevice":       "",
	"Service.StoreRoom":       "",
	"Service.StoreCap":        "",
	"Service.StreamCap":       "",
	"Service.UpdateInRoom":    "",
	"Store.OwnsFile":          "",
	"Store.WriteFile":         "",
	"Store.Checkout":          "",
	// *actors.Spaces
	"Spaces.List":             "actor.ls",
	"Spaces.ListPage":         "actor.ls",
	"Spaces.Stat":             "actor.ls",
	"Spaces.Upload":           "actor.upload",
	"Spaces.UploadWith":       "actor.upload",
	"Spaces.Download":         "actor.download",
	"Spaces.Delete":           "actor.rm",
	"Spaces.DeleteWith":       "actor.rm",
	"Spaces.DeleteByPrefix":   "actor.rm-prefix",
	"Spaces.Stats":            "actor.stats",
	"Spaces.StatsPage":        "actor.stats",
	"Spaces.WorkspacePage":    "actor.ls",
	"Spaces.GC":               "actor.gc",
	"Spaces.Changes":          "actor.changes",
	"Spaces.Diff":             "actor.diff",
	"Spaces.DiffPage":         "actor.diff",
	"Spaces.Actors":           "actors.list",
	"Spaces.ActorsPage":       "actors.list",
	"Spaces.ListAt":           "actor.ls",
	"Spaces.ListAtPage":       "actor.ls",
	"Spaces.ExportSpace":      "",
	"Spaces.EachSpaceRecord":  "",
	"Spaces.EachExportChange": "",
	"Spaces.ImportSpace":      "",
	"Spaces.ImportChange":     "",
	"Spaces.MergeSpace":       "",
	"Spaces.EachActorRoot":    "",
	"Spaces.HoldsTree":        "",
	"Spaces.EachMiscounted":   "",
	"Spaces.EachSpaceTotals":  "",
}

// notOps says why a Go method is not an op of its own.
var notOps = map[string]string{
	"Service.Workspace":         "a view: its methods are the ops (read, write, …; host.read and host.list for the host scope)",
	"Service.DiffFunc":          "a stream of any length, which a batch line cannot carry; diff answers it a page at a time, wsctl diff streams it",
	"Service.WorkspaceAt":       "a view at a checkpoint: read, list and stat take \"at\"",
	"Workspace.StatNoRead":      "stat without a host file's hash, for a download that hashes the file as it opens it (GET /v1/runs/{run}/file); stat is the op",
	"Workspace.Open":            "a stream of any size, which a batch line cannot carry; read takes line ranges, wsctl cat streams",
	"Workspace.ContentMissing":  "explains an error a stream of a listed file met (wsctl checkout); read and the ops that stream answer with it",
	"Service.EachWorkspaceRoot": "maintenance reads roots inside its own transaction; gc, fsck and du are the ops",
	"Service.HasRun":            "maintenance asks it inside its own transaction, of the runs checkpoints and events name; gc, fsck and du are the ops",
	"Service.EachCheckpointRef": "fsck reads it inside its own transaction; fsck is the op",
	"Service.HoldsTree":         "maintenance asks it inside its own transaction; reclaim is the op",
	"Store.CollectCandidates":   "the first half of reclaim, which is the op",
	"Service.ExportChat":        "archive rows, read in the export's own transaction; export is the op",
	"Service.EachChatRecord":    "as ExportChat",
	"Service.ExportRun":         "as ExportChat",
	"Service.EachRunRecord":     "as ExportChat",
	"Service.EachCommitRow":     "as ExportChat",
	"Service.ImportChat":        "archive rows, written in the import's final transaction; import is the op",
	"Service.ImportRun":         "as ImportChat",
	"Service.ImportCommit":      "as ImportChat",
	"Service.MergeRun":          "as ImportChat, for an import in merge mode (sync)",
	"Service.MergeCommits":      "as MergeRun",
	"Service.HasCommit":         "as MergeRun",
	"Service.MergePersist":      "as MergeRun",
	"Service.StoreRoom":         "the cap an import keeps to; stats reports the store's bytes and policy.get its cap",
	"Service.StoreCap":          "the cap actor uploads keep to, read in their own transactions; policy.get reports it",
	"Service.StreamCap":         "the bound streamed writes and actor uploads put on their content; write and actor.upload apply it",
	"Service.UpdateInRoom":      "the transaction actor uploads change a space in, tried again after a reclaim when the cap refuses it; actor.upload uses it",
	"Store.Sync":                "talks to the object store for minutes, outside a host's session: wsctl sync",
	"Store.SyncWith":            "talks to the object store for minutes, outside a host's session: wsctl sync --base",
	"Store.ReclaimRemote":       "removes objects other devices may share, run by hand: wsctl reclaim-remote",
	"Store.PullRemote":          "talks to the object store, outside a host's session: wsctl pull",
	"Store.ResetDevice":         "makes a restored store a device of its own, once, as wsctl restore does",
	"Workspace.RunID":           "an accessor of the view",
	"Service.RunIDsWithPrefix":  "resolves a run a person names by a prefix of its id (wsctl); a host names runs by their ids",
	"Store.Vacuum":              "gives the file's free pages back, maintenance run by hand: wsctl vacuum",
	"Store.VacuumWith":          "Vacuum with its options (--full rebuilds the whole file): wsctl vacuum",
	"Store.Close":               "the session's end closes the store",
	"Store.OwnsFile":            "a check export and the host's own file writes make: export refuses the store's files",
	"Store.WriteFile":           "writes a file of the host's that the host names, as export and wsctl actor download do; a session's ops answer on their own channel",
	"Store.Checkout":            "writes a host directory the host names, as wsctl checkout does; no op writes a host directory (export writes one archive file), and host.read and host.list read a run's files",
	"Spaces.ExportSpace":        "archive rows, read in the export's own transaction; export is the op",
	"Spaces.EachSpaceRecord":    "as ExportSpace",
	"Spaces.EachExportChange":   "as ExportSpace",
	"Spaces.ImportSpace":        "archive rows, written in the import's final transaction; import is the op",
	"Spaces.ImportChange":       "as ImportSpace",
	"Spaces.MergeSpace":         "as ImportSpace, for an import in merge mode (sync)",
	"Spaces.EachActorRoot":      "maintenance reads roots inside its own transaction; gc, fsck and du are the ops",
	"Spaces.HoldsTree":          "maintenance asks it inside its own transaction; reclaim is the op",
	"Spaces.EachMiscounted":     "maintenance checks it inside its own transaction; fsck is the op",
	"Spaces.EachSpaceTotals":    "maintenance checks it inside its own transaction; fsck is the op",
}

// TestOpsCoverGoAPI: every exported method of *runs.Service,
// *runs.Workspace, *wsstore.Store and *actors.Spaces is served by an op, or is listed in
// notOps with the reason, so a new Go operation without an op fails here.
func TestOpsCoverGoAPI(t *testing.T) {
	for _, v := range []any{&runs.Service{}, &runs.Workspace{}, &wsstore.Store{}, &actors.Spaces{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumMethod() {
			name := typ.Elem().Name() + "." + typ.Method(i).Name
			op, ok := goOps[name]
			if !assert.True(t, ok, "%s has no op: add one to the op table, or to goOps and notOps with the reason", name) {
				continue
			}
			if op == "" {
				assert.NotEmpty(t, notOps[name], "%s is not an op: notOps must say why", name)
				continue
			}
			assert.Contains(t, opsByName, op, "%s: op %s is not in the table", name, op)
		}
	}
	for name, why := range notOps {
		assert.Equal(t, "", goOps[name], "%s: in notOps (%s) but mapped to an op", name, why)
	}
}

// TestREADMEListsEveryOp: README's batch section names every op of the
// table with its fields, as the first line of its help gives them.
func TestREADMEListsEveryOp(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Skip("no README next to the module")
	}
	readme := string(b)
	for _, o := range ops {
		assert.Contains(t, readme, "- `"+o.name+"` `", "README lists op %s", o.name)
	}
}

// TestREADMENamesEveryBatchCode: README's Scripting section names every
// code batch adds to the store's, so a host reading it can handle each.
func TestREADMENamesEveryBatchCode(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Skip("no README next to the module")
	}
	readme := string(b)
	start := strings.Index(readme, "## Scripting")
	end := strings.Index(readme, "### Batch ops")
	require.True(t, start >= 0 && end > start, "README has a Scripting section before Batch ops")
	scripting := readme[start:end]
	for _, c := range []wserr.Code{CodeInvalidJSON, CodeUnknownOp, CodeInvalidRequest, CodeLineTooLong, CodeInterrupted} {
		assert.True(t, strings.Contains(scripting, "`"+string(c)+"`"), "README's Scripting section names %s", c)
	}
}
