package wsstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Example_errors shows how a host tells an error to hand back to the model
// (a workspace.* code: the run goes on) from one of its own.
func Example_errors() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wsstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := wsstore.Open(ctx, dir, wsstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "chat-42"}})
	if err != nil {
		log.Fatal(err)
	}
	ws := st.Runs.Workspace(run.ID, runs.ModelScope)

	_, err = ws.Write(ctx, vfs.MustPath("input/prompt.json"), []byte("{}"), vfs.WriteOptions{})
	code := wserr.CodeOf(err)
	fmt.Println(code, "model-correctable:", code.ModelCorrectable())

	_, err = st.Runs.Checkpoint(ctx, "run_missing", "x")
	code = wserr.CodeOf(err)
	fmt.Println(code, "model-correctable:", code.ModelCorrectable())
	fmt.Println(errors.Is(err, &wserr.Error{Code: wserr.RunNotFound}))

	// Output:
	// workspace.path_not_visible model-correctable: true
	// run.not_found model-correctable: false
	// true
}
