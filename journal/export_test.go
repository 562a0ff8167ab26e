package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

func TestExport(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	// More than two export pages, and a payload that HTML escaping would
	// mangle.
	const n = 1234
	appendMany(t, db, j, "run_a", n)
	appendOne(t, db, j, "run_a", journal.WorkspaceFileWritten, journal.FileWritten{Path: "output/<a&b>.md", Mode: "create"})
	appendOne(t, db, j, "run_a", journal.RunFinished, nil)
	appendMany(t, db, j, "run_b", 3)

	t.Run("OKJSONLinesEqualToPages", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, j.Export(ctx, "run_a", &buf))
		want := all(t, j, "run_a")
		require.Len(t, want, n+2)

		var got []journal.Event
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			line := sc.Bytes()
			require.True(t, json.Valid(line), "line %d is not JSON: %s", len(got)+1, line)
			require.NotContains(t, string(line), "\n")
			var e journal.Event
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&e))
			got = append(got, e)
		}
		require.NoError(t, sc.Err())
		assert.Equal(t, want, got)
	})

	t.Run("OKReadableLine", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, j.Export(ctx, "run_a", &buf))
		lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
		require.Len(t, lines, n+2)
		assert.Contains(t, string(lines[n]), `"path":"output/<a&b>.md"`)
		assert.Contains(t, string(lines[n+1]), `"type":"run_finished"`)
		assert.Contains(t, string(lines[n+1]), `"payload":{}`)
	})

	t.Run("OKUnknownRunWritesNothing", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, j.Export(ctx, "run_nobody", &buf))
		assert.Zero(t, buf.Len())
	})

	t.Run("ErrWriterFails", func(t *testing.T) {
		errDisk := errors.New("disk full")
		err := j.Export(ctx, "run_a", failingWriter{errDisk})
		assert.ErrorIs(t, err, errDisk)
	})

	t.Run("ErrEmptyRunID", func(t *testing.T) {
		err := j.Export(ctx, "", &bytes.Buffer{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	})
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
