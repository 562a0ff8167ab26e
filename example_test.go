package wsstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log"
	"os"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// Example is the embedding path: open a store, run an agent's edits in a
// workspace, checkpoint, roll back, diff, commit the result into the
// host's chat, finish, and read a checkpoint as an io/fs.FS.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wsstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Open creates dir/wsstore.db if needed and applies the migrations.
	st, err := wsstore.Open(ctx, dir, wsstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// A run belongs to a chat, keyed by the host's stable chat id (never a
	// file or display name); its inputs are materialized, read-only,
	// under input/.
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{
		Chat:   runs.ChatKey{Kind: "character", StableChatID: "chat-42"},
		RunID:  "run_example",
		Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{"messages":[]}`)},
	})
	if err != nil {
		log.Fatal(err)
	}

	// The agent's view: the profile's visible and writable roots apply.
	// Each change takes a checkpoint of its own.
	ws := st.Runs.Workspace(run.ID, runs.ModelScope)
	main := vfs.MustPath("output/main.md")
	if _, err := ws.Write(ctx, main, []byte("The keeper climbs the tower.\n"), vfs.WriteOptions{}); err != nil {
		log.Fatal(err)
	}
	cp, err := st.Runs.Checkpoint(ctx, run.ID, "draft") // one row
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ws.Patch(ctx, main, "climbs the tower", "climbs the tower in the storm", vfs.PatchOptions{}); err != nil {
		log.Fatal(err)
	}

	// Checkpoint against the live workspace (runs.Live), as unified diffs.
	diffs, err := st.Runs.Diff(ctx, run.ID, cp.Seq, runs.Live, runs.DiffOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range diffs {
		fmt.Print(d.Unified)
	}

	// Back to the draft: one pointer swap, whatever the workspace's size.
	if _, err := st.Runs.Rollback(ctx, run.ID, cp.Seq, runs.RollbackOptions{}); err != nil {
		log.Fatal(err)
	}

	// Commit assembles the run's artifacts (here the default: the body is
	// output/main.md) and hands the message to the host's sink, which
	// saves it in the chat and returns a receipt. The store never writes
	// chat files itself.
	sink := runs.SinkFunc(func(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		fmt.Printf("sink: %s message %q\n", req.Mode, req.Message.Body)
		return json.RawMessage(`{"saved":true}`), nil
	})
	rec, err := st.Runs.Commit(ctx, run.ID, sink, runs.CommitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("commit:", rec.Status)

	// Finish promotes persist/ to the chat and completes the run.
	res, err := st.Runs.Finish(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("run:", res.Run.Status)

	// Any checkpoint's tree reads as an io/fs.FS.
	fsys := st.Trees.FS(ctx, cp.Root)
	b, err := fs.ReadFile(fsys, "output/main.md")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("at %s: %s", cp.ID, b)

	// Output:
	// --- a/output/main.md
	// +++ b/output/main.md
	// @@ -1 +1 @@
	// -The keeper climbs the tower.
	// +The keeper climbs the tower in the storm.
	// sink: replace message "The keeper climbs the tower.\n"
	// commit: completed
	// run: completed
	// at cp_000003: The keeper climbs the tower.
}
