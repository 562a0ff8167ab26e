package protocol

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/wserr"
)

// TestStatusTablesListEachCodeOnce: no code sits in two rows of a table,
// and every code the exit table names has an HTTP status of its own (a
// new code is placed in both tables, not left to the defaults).
func TestStatusTablesListEachCodeOnce(t *testing.T) {
	for name, table := range map[string][]Status{"exit": ExitStatuses, "http": HTTPStatuses} {
		seen := map[wserr.Code]int{}
		for _, row := range table {
			for _, c := range row.Codes {
				_, dup := seen[c]
				assert.False(t, dup, "%s table: %s listed twice", name, c)
				seen[c] = row.Status
			}
		}
	}
	listed := map[wserr.Code]bool{}
	for _, row := range HTTPStatuses {
		for _, c := range row.Codes {
			listed[c] = true
		}
	}
	for _, row := range ExitStatuses {
		for _, c := range row.Codes {
			assert.True(t, listed[c], "%s has no HTTP status", c)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		code wserr.Code
		want int
	}{
		{"", http.StatusOK},
		{CodeInvalidJSON, http.StatusBadRequest},
		{CodeInvalidRequest, http.StatusBadRequest},
		{CodeUnknownOp, http.StatusBadRequest},
		{wserr.InvalidArgument, http.StatusBadRequest},
		{wserr.RunNotFound, http.StatusNotFound},
		{wserr.FileNotFound, http.StatusNotFound},
		{wserr.CheckpointNotFound, http.StatusNotFound},
		{wserr.InvalidPath, http.StatusUnprocessableEntity},
		{wserr.PatchOldStringNotUnique, http.StatusUnprocessableEntity},
		{wserr.InvalidManifest, http.StatusUnprocessableEntity},
		{wserr.WriteStaleFile, http.StatusConflict},
		{wserr.InvalidState, http.StatusConflict},
		{wserr.RunExists, http.StatusConflict},
		{CodeLineTooLong, http.StatusRequestEntityTooLarge},
		{wserr.ReadOnly, http.StatusForbidden},
		{wserr.Busy, http.StatusServiceUnavailable},
		{CodeInterrupted, http.StatusServiceUnavailable},
		{wserr.SinkFailed, http.StatusBadGateway},
		{wserr.Internal, http.StatusInternalServerError},
		{wserr.Corrupt, http.StatusInternalServerError},
		{wserr.JournalFailed, http.StatusInternalServerError},
		{wserr.NotAStore, http.StatusInternalServerError},
		{wserr.DiskFull, http.StatusInsufficientStorage},
		{"something.new", http.StatusInternalServerError},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, HTTPStatus(tt.code), "%s", tt.code)
	}
}

func TestExitStatus(t *testing.T) {
	assert.Equal(t, 0, ExitStatus(""))
	assert.Equal(t, 4, ExitStatus(wserr.WriteStaleFile), "model-correctable, by prefix")
	assert.Equal(t, 3, ExitStatus(wserr.FileNotFound), "an exact code before a prefix")
	assert.Equal(t, 130, ExitStatus(CodeInterrupted))
	assert.Equal(t, 130, ExitStatus(CodeStopped))
	assert.Equal(t, 6, ExitStatus(wserr.NotAStore))
	assert.Equal(t, 8, ExitStatus(wserr.DiskFull))
	assert.Equal(t, 1, ExitStatus("something.new"))
}
