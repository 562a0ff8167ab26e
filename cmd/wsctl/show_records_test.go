package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShowNamesTheLatestRecordsOfALongRun: show's last tool call and last
// model round are the newest in the journal, also when the run has more
// events than a page holds and older ones of each kind.
func TestShowNamesTheLatestRecordsOfALongRun(t *testing.T) {
	c := newCLI(t)
	lines := []string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"c1"},"runId":"long"}`,
		`{"op":"tool.call","toolCallId":"early","name":"t","args":{}}`,
		`{"op":"model.request","round":1}`,
	}
	for i := range 300 { // a write and its checkpoint each: past 500 events
		lines = append(lines, fmt.Sprintf(`{"op":"write","path":"output/%d.md","content":"%d"}`, i%5, i))
	}
	lines = append(lines, `{"op":"tool.call","toolCallId":"late","name":"t","args":{}}`, `{"op":"model.request","round":7}`)
	out, errOut, code := c.run(strings.Join(lines, "\n")+"\n", "batch")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, `"ok":false`)

	var show struct {
		LastToolCall   struct{ Payload struct{ ToolCallID string } }
		LastModelRound struct{ Payload struct{ Round int } }
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("show", "long", "--json")), &show))
	assert.Equal(t, "late", show.LastToolCall.Payload.ToolCallID)
	assert.Equal(t, 7, show.LastModelRound.Payload.Round)
}
