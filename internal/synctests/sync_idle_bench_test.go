package synctests_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
)

// BenchmarkSyncIdle measures a sync with nothing to send or take in, over
// stores of 200 and 2,000 runs: what a device pays to sync often.
func BenchmarkSyncIdle(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			b.Setenv("AWS_ACCESS_KEY_ID", "test")
			b.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			b.Setenv("AWS_REGION", "us-east-1")
			srv := s3fake.New("wsstore")
			defer srv.Close()
			ctx := context.Background()
			st, err := wsstore.Open(ctx, b.TempDir(), wsstore.Options{Blobs: "s3://wsstore/idle?endpoint=" + srv.URL,
				Remote: remote.Options{MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for i := range n {
				_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprintf("c%d", i%50)},
					Inputs: map[string][]byte{"prompt_snapshot.json": fmt.Appendf(nil, `{"run":%d}`, i)}})
				if err != nil {
					b.Fatal(err)
				}
			}
			if _, err := st.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				rep, err := st.Sync(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(rep.Sent) > 0 {
					b.Fatalf("an idle sync sent %v", rep.Sent)
				}
			}
		})
	}
}
