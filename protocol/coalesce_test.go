package protocol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// openAutoSession is a session on a run whose profile takes automatic
// checkpoints, with the store to count them in; it serves the host's run
// ops too.
func openAutoSession(t *testing.T) (*protocol.Session, *wsstore.Store) {
	st, err := wsstore.Open(context.Background(), t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Host: st.Runs})
	r := s.Handle(context.Background(), []byte(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`))
	require.True(t, r.OK, "%+v", r.Error)
	return s, st
}

func checkpointsTaken(t *testing.T, st *wsstore.Store) int {
	cps, err := st.Checkpoints.List(context.Background(), "r")
	require.NoError(t, err)
	return len(cps)
}

// TestOneRequestOneCheckpoint: an apply request that changes many files
// takes one automatic checkpoint, not one per file.
func TestOneRequestOneCheckpoint(t *testing.T) {
	s, st := openAutoSession(t)
	ctx := context.Background()
	var edits []string
	for i := range 300 {
		edits = append(edits, fmt.Sprintf(`{"path":"output/src/d%02d/f%03d.md","content":"file %d\n"}`, i%12, i, i))
	}
	before := checkpointsTaken(t, st)
	r := s.Handle(ctx, []byte(`{"op":"apply","edits":[`+strings.Join(edits, ",")+`]}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Equal(t, 1, checkpointsTaken(t, st)-before)

	r = s.Handle(ctx, []byte(`{"op":"write","path":"output/one.md","content":"x\n"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Equal(t, 2, checkpointsTaken(t, st)-before, "a single write takes its own")
}

// TestDiffMaxBytes: the diff and runs.diff ops' maxBytes cuts the text at a hunk and
// says what it left out.
func TestDiffMaxBytes(t *testing.T) {
	s, _ := openAutoSession(t)
	ctx := context.Background()
	var a, b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&a, "line %d\\n", i)
		if i%10 == 0 {
			fmt.Fprintf(&b, "changed %d\\n", i)
		} else {
			fmt.Fprintf(&b, "line %d\\n", i)
		}
	}
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/big.md","content":"`+a.String()+`"}`))
	require.True(t, r.OK, "%+v", r.Error)
	require.Contains(t, line(t, r), `"checkpointId":"cp_`)
	cp := "1"
	r = s.Handle(ctx, []byte(`{"op":"write","path":"output/big.md","content":"`+b.String()+`"}`))
	require.True(t, r.OK, "%+v", r.Error)

	for _, op := range []string{"diff", "runs.diff"} {
		r = s.Handle(ctx, []byte(`{"op":"`+op+`","from":`+cp+`,"maxBytes":400}`))
		require.True(t, r.OK, "%s: %+v", op, r.Error)
		out := line(t, r)
		assert.Contains(t, out, `"truncated":true`, op)
		assert.Contains(t, out, `"omittedHunks":`, op)

		r = s.Handle(ctx, []byte(`{"op":"`+op+`","from":`+cp+`,"maxBytes":-1}`))
		require.False(t, r.OK, op)
		assert.Equal(t, "workspace.invalid_argument", string(r.Error.Code), op)

		// A session whose backend sets no MaxDiffBytes (wsctl batch)
		// takes any cap.
		r = s.Handle(ctx, []byte(`{"op":"`+op+`","from":`+cp+`,"maxBytes":1099511627776}`))
		assert.True(t, r.OK, "%s: %+v", op, r.Error)
	}
}

// TestEmptyRunIDIsRefused: a runId given as "" (a host's unset variable)
// is refused, never taken for the session's run; left out, it is. So is
// an empty listing filter, never taken for no filter.
func TestEmptyRunIDIsRefused(t *testing.T) {
	s, st := openAutoSession(t)
	ctx := context.Background()
	for _, line := range []string{
		`{"op":"write","runId":"","path":"output/a.md","content":"x"}`,
		`{"op":"checkpoint","runId":""}`,
		`{"op":"runs.diff","fromRunId":"","toRunId":"r"}`,
		`{"op":"runs.list","status":""}`,
		`{"op":"chats.list","stableChatId":""}`,
	} {
		r := s.Handle(ctx, []byte(line))
		require.False(t, r.OK, line)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, line)
		assert.Contains(t, r.Error.Message, "is empty", line)
	}
	assert.Zero(t, checkpointsTaken(t, st)-1, "nothing was written")
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/a.md","content":"x"}`))
	require.True(t, r.OK, "%+v", r.Error)
}

// TestApplyMarksRemovedFiles: apply's answer marks the files its edits
// removed, and only those.
func TestApplyMarksRemovedFiles(t *testing.T) {
	s, _ := openAutoSession(t)
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/old.md","content":"old"}`))
	require.True(t, r.OK, "%+v", r.Error)
	r = s.Handle(ctx, []byte(`{"op":"apply","edits":[{"path":"output/new.md","content":"new"},{"path":"output/old.md","remove":true}]}`))
	require.True(t, r.OK, "%+v", r.Error)
	var a struct {
		Result struct {
			Files []map[string]any `json:"files"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(line(t, r)), &a))
	require.Len(t, a.Result.Files, 2)
	assert.Equal(t, "output/new.md", a.Result.Files[0]["path"])
	assert.NotContains(t, a.Result.Files[0], "removed")
	assert.Equal(t, "output/old.md", a.Result.Files[1]["path"])
	assert.Equal(t, true, a.Result.Files[1]["removed"])
	assert.Equal(t, float64(3), a.Result.Files[1]["size"], "the size it had")
}

// TestRunCreateTakesAManifest: run.create takes the run's manifest, held
// to manifest.set's rules; without one, a profile that cannot write the
// default manifest's output/main.md is refused (manifest.invalid) and
// nothing is created.
func TestRunCreateTakesAManifest(t *testing.T) {
	st, err := wsstore.Open(context.Background(), t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal})
	ctx := context.Background()
	const notes = `"profile":{"visibleRoots":["notes"]}`
	r := s.Handle(ctx, []byte(`{"op":"run.create","runId":"r0","chat":{"kind":"k","stableChatId":"s"},`+notes+`}`))
	require.False(t, r.OK)
	assert.Equal(t, "manifest.invalid", string(r.Error.Code))
	_, err = st.Runs.Run(ctx, "r0")
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "nothing created: %v", err)

	r = s.Handle(ctx, []byte(`{"op":"run.create","runId":"r1","chat":{"kind":"k","stableChatId":"s"},`+notes+`,
		"manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","path":"notes/main.md","target":"message_body","required":true}]}}`))
	require.True(t, r.OK, "%+v", r.Error)
	m, err := st.Runs.Manifest(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, "notes/main.md", m.Artifacts[0].Path)

	r = s.Handle(ctx, []byte(`{"op":"run.create","runId":"r2","chat":{"kind":"k","stableChatId":"t"},"manifest":{"workspaceVersion":2}}`))
	require.False(t, r.OK)
	assert.Equal(t, "manifest.invalid", string(r.Error.Code))
}
