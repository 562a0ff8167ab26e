package journal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

// TestAppendEntriesAsAppend: entries prepared and appended together, two
// to a statement, are the events Append would have recorded one by one:
// the next seqs in order, after the run's own and not another run's, each
// with its prepared time and its exact payload (packed or plain) when read
// back.
func TestAppendEntriesAsAppend(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	appendMany(t, db, j, "run_other", 4)
	first := appendOne(t, db, j, "run_a", journal.RunCreated, nil)
	var got []journal.Event
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		var es []journal.Entry
		for i, payload := range []any{
			journal.FileWritten{Path: "output/a.md", Hash: strings.Repeat("ab", 32), Bytes: 4096, Mode: "replace"},
			map[string]string{"note": "plain <text> & more"},
			journal.FileWritten{Path: "output/b.md", Hash: strings.Repeat("cd", 32), Bytes: 1, Mode: "append"},
		} {
			typ := journal.WorkspaceFileWritten
			if i == 1 {
				typ = journal.ToolCallCompleted
			}
			e, err := j.Prepare(typ, journal.Info, payload)
			require.NoError(t, err)
			es = append(es, e)
		}
		var err error
		got, err = j.AppendEntries(ctx, tx, "run_a", es...)
		return err
	}))
	require.Len(t, got, 3)
	for i, e := range got {
		assert.Equal(t, first.Seq+1+int64(i), e.Seq, "event %d", i)
		assert.True(t, e.At.After(first.At), "event %d is stamped after the one before", i)
	}
	read, err := j.Page(ctx, "run_a", journal.PageQuery{AfterSeq: first.Seq})
	require.NoError(t, err)
	assert.Equal(t, got, read)
	assert.Equal(t, []journal.Type{journal.WorkspaceFileWritten, journal.ToolCallCompleted, journal.WorkspaceFileWritten},
		[]journal.Type{read[0].Type, read[1].Type, read[2].Type})

	_, err = j.Prepare("no_such_type", journal.Info, nil)
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err))
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := j.AppendEntries(ctx, tx, "run_a", journal.Entry{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "an entry Prepare did not make")
		return nil
	}))
	after, err := j.Page(ctx, "run_a", journal.PageQuery{AfterSeq: first.Seq})
	require.NoError(t, err)
	assert.Len(t, after, 3)
}
