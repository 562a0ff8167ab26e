package protocol_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
)

// commitStatus is the status of run r's last commit.
func commitStatus(t *testing.T, st *wsstore.Store) string {
	cs, err := st.Runs.Commits(context.Background(), "r")
	require.NoError(t, err)
	require.NotEmpty(t, cs)
	return cs[len(cs)-1].Status
}

// TestCommitIsCompletedOnceItsResponseIsWritten: under HandleTo a
// commit's response, which delivers its message, is written before the
// outcome is recorded: when the write goes through the commit is
// completed, and when it fails the commit is failed (the host never had
// the message) and may be made again.
func TestCommitIsCompletedOnceItsResponseIsWritten(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"commit", "commit.rollback"} {
		t.Run(op, func(t *testing.T) {
			_, st := openAutoSession(t)
			s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Host: st.Runs})
			r := s.Handle(ctx, []byte(`{"op":"write","runId":"r","path":"output/main.md","content":"the reply"}`))
			require.True(t, r.OK, "%+v", r.Error)
			req := `{"op":"commit","runId":"r","id":7}`
			if op == "commit.rollback" {
				r := s.Handle(ctx, []byte(req)) // a commit to roll back
				require.True(t, r.OK, "%+v", r.Error)
				req = `{"op":"commit.rollback","runId":"r","id":7,"checkpointId":"cp_000002"}`
			}

			broken := errors.New("broken pipe")
			var statusWhileWriting string
			writes := 0
			resp, sent, err := s.HandleTo(ctx, []byte(req), func(w protocol.Response) error {
				writes++
				assert.True(t, w.OK)
				assert.Equal(t, op, w.Op)
				assert.JSONEq(t, `7`, string(w.ID))
				statusWhileWriting = commitStatus(t, st)
				return broken
			})
			require.True(t, sent, "%+v", resp.Error)
			assert.ErrorIs(t, err, broken)
			assert.Equal(t, 1, writes)
			assert.Equal(t, runs.CommitPending, statusWhileWriting, "the response goes out before the outcome is recorded")
			assert.False(t, resp.OK, "the commit failed")
			assert.Equal(t, runs.CommitFailed, commitStatus(t, st))

			// Made again, its response goes through: completed, and the
			// response written is the one Handle would have returned.
			var got protocol.Response
			resp, sent, err = s.HandleTo(ctx, []byte(req), func(w protocol.Response) error {
				got = w
				return nil
			})
			require.NoError(t, err)
			assert.True(t, sent)
			assert.True(t, resp.OK, "%+v", resp.Error)
			assert.Equal(t, line(t, resp), line(t, got))
			cs, err := st.Runs.Commits(ctx, "r")
			require.NoError(t, err)
			last := cs[len(cs)-1]
			assert.Equal(t, runs.CommitCompleted, last.Status)
			assert.Equal(t, runs.CommitFailed, cs[len(cs)-2].Status)
			assert.Contains(t, line(t, got), `"commitId":"`+last.ID+`"`)
		})
	}
}

// TestHandleToLeavesOtherResponsesToTheTransport: an op that delivers
// nothing returns its response unwritten, an error response too, and a
// commit refused before its sink runs writes nothing.
func TestHandleToLeavesOtherResponsesToTheTransport(t *testing.T) {
	s, st := openAutoSession(t)
	ctx := context.Background()
	for _, c := range []struct {
		req string
		ok  bool
	}{
		{`{"op":"write","path":"output/a.md","content":"a"}`, true},
		{`{"op":"write","path":"../a.md","content":"a"}`, false},
		{`{"op":"commit","path":"output/missing.md"}`, false},
	} {
		resp, sent, err := s.HandleTo(ctx, []byte(c.req), func(protocol.Response) error {
			t.Errorf("%s: written by the session", c.req)
			return nil
		})
		require.NoError(t, err)
		assert.False(t, sent, c.req)
		assert.Equal(t, c.ok, resp.OK, c.req)
	}
	cs, err := st.Runs.Commits(ctx, "r")
	require.NoError(t, err)
	assert.Empty(t, cs)
}

// TestCommitFailingAfterItsResponse: the run is deleted while the
// response is written, so the outcome cannot be recorded: HandleTo says
// the response went out and what came after it.
func TestCommitFailingAfterItsResponse(t *testing.T) {
	s, st := openAutoSession(t)
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/main.md","content":"the reply"}`))
	require.True(t, r.OK, "%+v", r.Error)
	resp, sent, err := s.HandleTo(ctx, []byte(`{"op":"commit"}`), func(protocol.Response) error {
		_, err := st.Runs.CancelAndDeleteRun(ctx, "r")
		return err
	})
	assert.True(t, sent)
	var late *protocol.AfterDeliveryError
	require.ErrorAs(t, err, &late)
	assert.Equal(t, "run.not_found", string(late.Response.Error.Code))
	assert.False(t, resp.OK)
}

// TestCommitFieldsAreNeverEmpty: an empty path or mode is refused, not
// taken as absent.
func TestCommitFieldsAreNeverEmpty(t *testing.T) {
	s, st := openAutoSession(t)
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/main.md","content":"the reply"}`))
	require.True(t, r.OK, "%+v", r.Error)
	for _, req := range []string{`{"op":"commit","path":""}`, `{"op":"commit","mode":""}`} {
		r := s.Handle(ctx, []byte(req))
		require.False(t, r.OK, req)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, req)
	}
	cs, err := st.Runs.Commits(ctx, "r")
	require.NoError(t, err)
	assert.Empty(t, cs)
	r = s.Handle(ctx, []byte(`{"op":"commit","path":"output/main.md","mode":"append"}`))
	require.True(t, r.OK, "%+v", r.Error)
}
