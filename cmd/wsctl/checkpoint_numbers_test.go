package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCheckpointNumbersBelowOneAreRefusedAlike: 0 and negative checkpoint
// numbers are a caller's mistake, refused the same way by every command
// and op that takes a checkpoint (never checkpoint.not_found, never a
// lookup), whether given as a number, a string or a cp_ id.
func TestCheckpointNumbersBelowOneAreRefusedAlike(t *testing.T) {
	c := newCLI(t)
	_, errOut, code := c.run(`{"op":"run.create","chat":{"kind":"character","stableChatId":"n"},"runId":"r"}`+"\n"+
		`{"op":"write","path":"output/a.md","content":"x\n"}`+"\n", "batch")
	require.Equal(t, 0, code, errOut)

	var lines []string
	for _, n := range []string{"0", "-1", "-9223372036854775808", `"-1"`, `"0"`, `"cp_-00001"`, `"cp_000000"`} {
		lines = append(lines,
			fmt.Sprintf(`{"op":"rollback","runId":"r","checkpointId":%s}`, n),
			fmt.Sprintf(`{"op":"read","runId":"r","path":"output/a.md","at":%s}`, n),
			fmt.Sprintf(`{"op":"list","runId":"r","at":%s}`, n),
			fmt.Sprintf(`{"op":"diff","runId":"r","from":%s}`, n),
			fmt.Sprintf(`{"op":"diff","runId":"r","from":1,"to":%s}`, n))
		if !strings.HasPrefix(n, `"`) {
			lines = append(lines, fmt.Sprintf(`{"op":"rollback","runId":"r","checkpointSeq":%s}`, n))
		}
	}
	out, errOut, code := c.run(strings.Join(lines, "\n")+"\n", "batch")
	require.Equal(t, 0, code, errOut)
	answers := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, answers, len(lines))
	for i, a := range answers {
		var resp struct {
			OK    bool `json:"ok"`
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(a), &resp))
		assert.False(t, resp.OK, lines[i])
		assert.Equal(t, "batch.invalid_request", resp.Error.Code, "%s: %s", lines[i], a)
		assert.Contains(t, resp.Error.Message, "checkpoint", lines[i])
	}

	for _, n := range []string{"0", "-1", "cp_-00001", "cp_000000"} {
		for _, args := range [][]string{
			{"cat", "r", "output/a.md", "--at", n},
			{"ls", "r", "--at", n},
			{"checkout", "r", t.TempDir() + "/co", "--at", n},
			{"diff", "r", "--", n},
			{"diff", "r", "1", "--", n},
		} {
			errOut := c.fails(2, args...)
			assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		}
	}

	// The Go API refuses them as well, with a model-correctable code.
	st := c.open()
	ctx := context.Background()
	for _, n := range []int64{0, -1} {
		_, err := st.Runs.Rollback(ctx, "r", n, runs.RollbackOptions{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
		_, err = st.Checkpoints.View(ctx, "r", n)
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	}
}
