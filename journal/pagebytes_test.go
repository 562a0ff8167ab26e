package journal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
)

// TestPageHoldsAFewLargeEvents: a page ends once its payloads reach
// MaxPageBytes, so a page of large events (tool results holding whole
// files) holds a few of them: 40 events of 2 MiB page with the heap
// growing by a few of them, not by the 80 MiB of a page of all 40
// (86–90 MiB when the page held them). Pages each after the one before,
// forward or back, still give every event once, and HasEvents says
// whether one follows a page.
func TestPageHoldsAFewLargeEvents(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	big := strings.Repeat("a line of a file a tool read back to the model\n", (2<<20)/48)
	var want []int64
	for i := range 40 {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			e, err := j.Append(ctx, tx, "r1", journal.ToolCallCompleted, journal.Info, map[string]any{"i": i, "output": big})
			want = append(want, e.Seq)
			return err
		}))
		want = append(want, seqs(appendMany(t, db, j, "r1", 3))...)
	}

	var page []journal.Event
	grew := storetest.HeapGrowth(func() {
		var err error
		page, err = j.Page(ctx, "r1", journal.PageQuery{Limit: journal.MaxLimit})
		require.NoError(t, err)
	})
	t.Logf("a page of 2 MiB events: %d events, heap grew %d MiB", len(page), grew>>20)
	assert.Less(t, grew, uint64(24<<20), "a few large events, not all 40")
	require.NotEmpty(t, page)
	assert.Less(t, len(page), 40, "the page ends at MaxPageBytes")

	// Forward, each page after the one before.
	assert.Equal(t, want, seqs(all(t, j, "r1")))
	// Back, each page before the one after.
	var back []int64
	for before := int64(len(want) + 1); ; {
		page, err := j.Page(ctx, "r1", journal.PageQuery{BeforeSeq: before, Limit: journal.MaxLimit})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		back = append(seqs(page), back...)
		before = page[0].Seq
	}
	assert.Equal(t, want, back)

	more, err := j.HasEvents(ctx, "r1", page[len(page)-1].Seq, 0)
	require.NoError(t, err)
	assert.True(t, more, "a page cut short has events after it")
	last := int64(len(want))
	more, err = j.HasEvents(ctx, "r1", last, 0)
	require.NoError(t, err)
	assert.False(t, more, "none after the last")
	more, err = j.HasEvents(ctx, "r1", 5, 6)
	require.NoError(t, err)
	assert.False(t, more, "none between 5 and 6")
	more, err = j.HasEvents(ctx, "r1", 5, 7)
	require.NoError(t, err)
	assert.True(t, more, "6 lies between 5 and 7")
}
