package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// cli runs wsctl in-process on a store in a temporary directory.
type cli struct {
	t     *testing.T
	store string
	env   map[string]string
	term  bool // pretend the output is a terminal
	// skipFsck: the test broke the store on purpose.
	skipFsck bool
}

// newCLI returns a cli on a fresh store directory (not yet created). When
// the test ends, fsck must find the store sound, unless the test broke it
// on purpose (skipFsck).
func newCLI(t *testing.T) *cli {
	t.Helper()
	c := &cli{t: t, store: filepath.Join(t.TempDir(), "store"), env: map[string]string{}}
	t.Cleanup(func() {
		if c.skipFsck || storeExists(c.store) != nil {
			return
		}
		st, err := wsstore.Open(context.Background(), c.store, wsstore.Options{})
		require.NoError(t, err)
		defer st.Close()
		rep, err := st.Fsck(context.Background(), nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems, "fsck after the test")
	})
	return c
}

func (c *cli) app() *app {
	a := newApp()
	a.getenv = func(k string) string { return c.env[k] }
	a.isTerminal = func(io.Writer) bool { return c.term }
	a.followPoll = 5 * time.Millisecond
	return a
}

// run executes wsctl --store <store> args with stdin and returns stdout,
// stderr and the exit status.
func (c *cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	return c.runCtx(context.Background(), strings.NewReader(stdin), args...)
}

func (c *cli) runCtx(ctx context.Context, stdin io.Reader, args ...string) (string, string, int) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code := execute(ctx, c.app(), append([]string{"--store", c.store}, args...), stdin, &out, &errOut)
	return out.String(), errOut.String(), code
}

// ok runs args and requires exit status 0; it returns stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	require.Equal(c.t, 0, code, "wsctl %v: stderr %s", args, errOut)
	return out
}

// fails runs args and requires exit status want; it returns stderr.
func (c *cli) fails(want int, args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	require.Equal(c.t, want, code, "wsctl %v: stdout %s stderr %s", args, out, errOut)
	return errOut
}

// jsonOut runs args with --json and decodes stdout into v.
func (c *cli) jsonOut(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "--json")...)
	require.NoError(c.t, json.Unmarshal([]byte(out), v), out)
}

// open opens the cli's store through the library, for seeding and checks.
func (c *cli) open() *wsstore.Store {
	c.t.Helper()
	st, err := wsstore.Open(context.Background(), c.store, wsstore.Options{})
	require.NoError(c.t, err)
	c.t.Cleanup(func() { st.Close() })
	return st
}

// seedRun creates a running run with a few files and checkpoints:
// cp_000001 after_init, cp_000002 output/a.md "one", cp_000003
// output/a.md "one\ntwo", cp_000004 scratch/b.bin (binary).
func (c *cli) seedRun(st *wsstore.Store, runID string) runs.Run {
	c.t.Helper()
	ctx := context.Background()
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{
		Chat:   runs.ChatKey{Kind: "character", StableChatID: "chat-" + runID},
		RunID:  runID,
		Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{"messages":[]}`)},
	})
	require.NoError(c.t, err)
	ws := st.Runs.Workspace(runID, runs.ModelScope)
	for _, w := range []struct{ path, content string }{
		{"output/a.md", "one\n"},
		{"output/a.md", "one\ntwo\n"},
		{"scratch/b.bin", "\x00\x01\x02binary"},
	} {
		_, err := ws.Write(ctx, vfs.MustPath(w.path), []byte(w.content), vfs.WriteOptions{})
		require.NoError(c.t, err)
	}
	return run
}

// randomLetters is n bytes of lowercase letters drawn from a generator
// seeded with seed1 and seed2.
func randomLetters(seed1, seed2 uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed1, seed2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return b
}
