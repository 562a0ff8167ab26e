package wsstore_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestGCBesideADeletionKeepsItsCandidates: a gc whose mark read the store
// before a deletion committed keeps what the deleted chat held (its mark
// saw it reachable), so it leaves the candidates the deletion recorded
// queued, and the deletion's own reclaim, after that gc, frees the chat.
func TestGCBesideADeletionKeepsItsCandidates(t *testing.T) {
	for name, gc := range map[string]func(e *retEnv) error{
		"GC": func(e *retEnv) error {
			_, err := e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1})
			return err
		},
		"CollectSteps": func(e *retEnv) error {
			_, err := e.s.CollectSteps(e.ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: -1}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var hook func(q string)
			opts := wsstore.Options{}
			opts.Index.Trace = func(q string) {
				mu.Lock()
				h := hook
				mu.Unlock()
				if h != nil {
					h(q)
				}
			}
			opts.CAS.InlineDeltas = true // nothing queued for the background re-encoder
			e := newRetEnv(t, opts)
			e.t = t
			e.chatRun("chat-x", "run_x1")
			e.chatRun("chat-x", "run_x2")

			recorded, marked, gcDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var onRecord, onMark, onReclaim sync.Once
			mu.Lock()
			hook = func(q string) {
				switch {
				case strings.Contains(q, "INSERT INTO gc_candidates"):
					// The deletion has recorded its candidates and not
					// yet committed: the gc marks now.
					onRecord.Do(func() {
						close(recorded)
						<-marked
					})
				case strings.Contains(q, "SELECT chat_id, id, root, persist_base, records FROM runs"):
					// The mark has read the actors' roots and counted
					// the checkpoints: its snapshot is taken.
					onMark.Do(func() { close(marked) })
				case strings.Contains(q, "tree_refs_backfill"):
					// The deletion's reclaim waits for the gc to end.
					onReclaim.Do(func() { <-gcDone })
				}
			}
			mu.Unlock()
			var wg sync.WaitGroup
			wg.Go(func() {
				_, err := e.s.Runs.DeleteChats(e.ctx, chatX, false)
				assert.NoError(t, err)
			})
			<-recorded
			require.NoError(t, gc(e))
			close(gcDone)
			wg.Wait()
			mu.Lock()
			hook = nil
			mu.Unlock()
			for _, id := range []string{"run_x1", "run_x2"} {
				assert.False(t, e.has(cas.Sum([]byte(answerOf(id)))), "%s's answer goes with the chat", id)
			}
			storetest.RequireSound(t, e.s)
		})
	}
}
