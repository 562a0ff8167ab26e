package wsstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// ExampleStore_Checkout writes a run's live workspace into a new
// directory on the host, as wsctl checkout does, synced to the disk.
func ExampleStore_Checkout() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wsstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := wsstore.Open(ctx, filepath.Join(dir, "store"), wsstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "chat-42"}})
	if err != nil {
		log.Fatal(err)
	}
	ws := st.Runs.Workspace(run.ID, runs.ModelScope)
	if _, err := ws.Write(ctx, vfs.MustPath("output/main.md"), []byte("The keeper climbs the tower.\n"), vfs.WriteOptions{}); err != nil {
		log.Fatal(err)
	}

	// runs.Live, or a checkpoint's seq. The directory must be new or
	// empty; a failed checkout leaves it as it was.
	out := filepath.Join(dir, "checkout")
	res, err := st.Checkout(ctx, run.ID, runs.Live, out, wsstore.CheckoutOptions{Sync: true})
	if err != nil {
		log.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "output", "main.md"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d files, %d directories: %s", res.Files, res.Dirs, b)

	// Output:
	// 2 files, 5 directories: The keeper climbs the tower.
}
