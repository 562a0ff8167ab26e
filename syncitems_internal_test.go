package wsstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
)

// lowItemSpill makes item lists spill past n items of a kind.
func lowItemSpill(t *testing.T, n int) {
	old := itemSpillAfter
	itemSpillAfter = n
	t.Cleanup(func() { itemSpillAfter = old })
}

// TestItemListSpillsInNameOrder: an item list past its page gives back
// every item pushed, whole, in name order, from disk.
func TestItemListSpillsInNameOrder(t *testing.T) {
	lowItemSpill(t, 1)
	l := newItemList(context.Background())
	defer l.Close()
	in := []listedItem{
		{remote.Item{Kind: "run", ID: "r1", Parent: "c1", Seq: 3, FP: cas.Sum([]byte("1")), Last: cas.Sum([]byte("l")), Sent: true}, true},
		{remote.Item{Kind: "chat", ID: "c1", FP: cas.Sum([]byte("c"))}, false},
		{remote.Item{Kind: "run", ID: "r2", Parent: "c1", First: cas.Sum([]byte("f"))}, false},
		{remote.Item{Kind: "actor", ID: "a1", Seq: 7}, true},
		{remote.Item{Kind: "run", ID: "r3", Parent: "c2"}, true},
		{remote.Item{Kind: "chat", ID: "c2"}, true},
	}
	for _, it := range in {
		require.NoError(t, l.push(it.Item, it.New))
	}
	assert.Error(t, l.push(remote.Item{Kind: "other", ID: "x"}, true))
	assert.EqualValues(t, 6, l.len())
	var got []listedItem
	require.NoError(t, l.each(func(it remote.Item, isNew bool) error {
		got = append(got, listedItem{it, isNew})
		return nil
	}))
	assert.Equal(t, []listedItem{in[3], in[1], in[5], in[0], in[2], in[4]}, got)
}

// failingList fails its reads from the nth of all on.
type failingList struct {
	byteList
	reads *int
	n     int
}

func (l failingList) At(i int64) ([]byte, error) {
	if *l.reads++; *l.reads >= l.n {
		return nil, errors.New("injected read failure")
	}
	return l.byteList.At(i)
}

// opener returns what opens a new store, closed when t ends, whose remote
// tier is the s3fake server at url, retrying little.
func opener(t *testing.T, url string) func() *Store {
	return func() *Store {
		st, err := Open(context.Background(), t.TempDir(), Options{Blobs: "s3://wsstore/team?endpoint=" + url,
			Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
}

// TestSyncItemListFailing: a sync whose list of the items it carries
// fails, at each of its reads in turn (while it exports them, looks for
// runs created again, reports and records them), records none of them as
// synced: the next sync sends them, and another device takes in every
// run.
func TestSyncItemListFailing(t *testing.T) {
	s3fake.TestEnv(t)
	ctx := context.Background()
	chat := "chat " + runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "c"})
	done := false
	for n := 1; !done; n++ {
		t.Run(fmt.Sprintf("Read%d", n), func(t *testing.T) {
			srv := s3fake.New("wsstore")
			t.Cleanup(srv.Close)
			open := opener(t, srv.URL)
			create := func(st *Store, ids ...string) {
				for _, id := range ids {
					_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id})
					require.NoError(t, err)
				}
			}
			a := open()
			create(a, "r-0")
			_, err := a.Sync(ctx)
			require.NoError(t, err)

			lowItemSpill(t, 1)
			create(a, "r-1", "r-2", "r-3")
			reads := 0
			old := newByteList
			newByteList = func(sp *index.Spill) byteList { return failingList{old(sp), &reads, n} }
			_, err = a.Sync(ctx)
			newByteList = old
			if done = err == nil; done {
				require.Greater(t, n, 20, "the sync reads its items")
				return
			}
			require.ErrorContains(t, err, "injected read failure")

			rep, err := a.Sync(ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{chat, "run r-1", "run r-2", "run r-3"}, rep.Sent, "sent again")
			b := open()
			got, err := b.Sync(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{chat, "run r-0", "run r-1", "run r-2", "run r-3"}, got.Added)
		})
	}
}

// TestSyncTakeInListFailing: a sync whose list of what another device's
// segment brought fails, at each of its reads in turn (while it reports
// them, looks up their tombstones, reads their states and records them
// as synced), records nothing of the segment as taken in: the next sync
// takes it in again, and no run is lost on any device.
func TestSyncTakeInListFailing(t *testing.T) {
	s3fake.TestEnv(t)
	ctx := context.Background()
	ids := []string{"r-0", "r-1", "r-2", "r-3"}
	done := false
	for n := 1; !done; n++ {
		t.Run(fmt.Sprintf("Read%d", n), func(t *testing.T) {
			srv := s3fake.New("wsstore")
			t.Cleanup(srv.Close)
			open := opener(t, srv.URL)
			runIDs := func(st *Store) []string {
				rs, err := st.Runs.Runs(ctx, runs.ListQuery{})
				require.NoError(t, err)
				var out []string
				for _, r := range rs {
					out = append(out, r.ID)
				}
				return out
			}
			a := open()
			for _, id := range ids {
				_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id})
				require.NoError(t, err)
			}
			sent, err := a.Sync(ctx)
			require.NoError(t, err)

			lowItemSpill(t, 1)
			b := open()
			reads := 0
			old := newBroughtBytes
			newBroughtBytes = func(sp *index.Spill) byteList { return failingList{old(sp), &reads, n} }
			rep, err := b.Sync(ctx)
			newBroughtBytes = old
			if done = err == nil; done {
				require.Greater(t, n, 15, "the sync reads what the segment brought")
				require.Less(t, reads, n, "a sync that succeeds met no failed read")
				assert.Equal(t, 5, rep.AddedCount, "the chat and its runs")
				return
			}
			require.ErrorContains(t, err, "injected read failure")
			applied, err := b.Remote.Applied(ctx, b.DB)
			require.NoError(t, err)
			assert.Empty(t, applied[sent.Device], "the segment is not recorded as taken in")

			rep, err = b.Sync(ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{sent.Published}, rep.TookIn, "taken in again")
			assert.ElementsMatch(t, ids, runIDs(b))
			_, err = a.Sync(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, ids, runIDs(a))
			c := open()
			_, err = c.Sync(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, ids, runIDs(c))
		})
	}
}
