package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// Export writes runID's journal to w as events.jsonl: one JSON Event per
// line, in ascending seq order. It reads in pages of MaxLimit events, so
// memory stays bounded whatever the journal's length, and it stops at the
// run's last event as of the start of the export, so a run that is still
// appending yields a consistent prefix rather than a moving target. A run
// without events writes nothing. An empty runID fails with
// workspace.invalid_argument, a stored payload that does not decode with
// store.corrupt (as in Page); a write error on w is returned wrapped.
func (j *Journal) Export(ctx context.Context, runID string, w io.Writer) error {
	last, err := j.Last(ctx, nil, runID)
	if err != nil {
		return fmt.Errorf("journal export: %w", err)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	// Payloads and paths are shown to people; keep "<" and "&" readable.
	enc.SetEscapeHTML(false)
	for after := int64(0); after < last; {
		// AfterSeq alone, not a BeforeSeq bound: with AfterSeq 0 a
		// BeforeSeq would select the page just before it, not the first.
		page, err := j.Page(ctx, runID, PageQuery{AfterSeq: after, Limit: MaxLimit})
		if err != nil {
			return fmt.Errorf("journal export: %w", err)
		}
		if len(page) == 0 {
			// The run was deleted while we read it.
			break
		}
		for _, e := range page {
			if e.Seq > last {
				break
			}
			if err := enc.Encode(e); err != nil {
				return fmt.Errorf("journal export %s: write: %w", runID, err)
			}
		}
		after = page[len(page)-1].Seq
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("journal export %s: write: %w", runID, err)
	}
	return nil
}
