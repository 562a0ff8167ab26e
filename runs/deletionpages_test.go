package runs_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
)

// TestDeletionPagesEndAtMaxBytes: a page of the deletion log ends once
// its entries' details reach about runs.MaxDeletionPageBytes, whatever
// limit asks for, with more set; paging on from its last entry gives every
// entry once; an entry larger than the bound comes alone.
func TestDeletionPagesEndAtMaxBytes(t *testing.T) {
	e := newLifecycleEnv(t)
	detail := `{"runs":["` + strings.Repeat("r", 600<<10) + `"]}`
	huge := `{"runs":["` + strings.Repeat("h", runs.MaxDeletionPageBytes+1) + `"]}`
	require.NoError(t, e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		for i := range 21 {
			d := detail
			if i == 10 {
				d = huge
			}
			if _, err := tx.ExecContext(e.ctx, `INSERT INTO deletions (at, kind, chat_id, run_id, reason, detail, bytes_freed)
				VALUES (?, 'chat', 'chat_x', '', 'requested', ?, 0)`, i, d); err != nil {
				return err
			}
		}
		return nil
	}))
	var ids []int64
	var sizes []int
	after := int64(0)
	for {
		page, more, err := e.svc.Deletions(e.ctx, after, runs.MaxDeletionPage)
		require.NoError(t, err)
		require.NotEmpty(t, page)
		bytes := 0
		for _, d := range page {
			ids = append(ids, d.ID)
			bytes += len(d.Detail)
		}
		sizes = append(sizes, bytes)
		if len(page) > 1 {
			assert.LessOrEqual(t, bytes, runs.MaxDeletionPageBytes, "a page of %d entries", len(page))
		}
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	t.Logf("page sizes: %v", sizes)
	require.Len(t, ids, 21, "every entry once")
	for i := 1; i < len(ids); i++ {
		assert.Less(t, ids[i-1], ids[i])
	}
	assert.Contains(t, sizes, len(huge), "the entry past the bound comes alone")
	assert.Greater(t, len(sizes), 21*len(detail)/runs.MaxDeletionPageBytes, "pages end at the bound")
}
