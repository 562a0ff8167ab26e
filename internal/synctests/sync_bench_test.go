package synctests_test

import (
	"context"
	"testing"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// BenchmarkCheckpointSync measures what each durability mode costs: a
// manual checkpoint (its row and event, one commit) and a small write with
// its automatic checkpoint, with synchronous=NORMAL and =FULL, on the
// disk under the test's temporary directory.
func BenchmarkCheckpointSync(b *testing.B) {
	for _, mode := range []index.Synchronous{index.SyncNormal, index.SyncFull} {
		open := func(b *testing.B) (*wsstore.Store, *runs.Workspace) {
			s, err := wsstore.Open(context.Background(), b.TempDir(), wsstore.Options{Index: index.Options{Synchronous: mode}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			if _, err := s.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "bench"}, RunID: "r"}); err != nil {
				b.Fatal(err)
			}
			return s, s.Runs.Workspace("r", runs.HostScope)
		}
		b.Run("Checkpoint/"+string(mode), func(b *testing.B) {
			s, _ := open(b)
			for b.Loop() {
				if _, err := s.Runs.Checkpoint(context.Background(), "r", "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Write/"+string(mode), func(b *testing.B) {
			_, ws := open(b)
			p := vfs.MustPath("output/a.md")
			content := []byte("# Draft\n\nversion 0000000\n")
			i := 0
			for b.Loop() {
				i++
				content[len(content)-2] = byte('0' + i%10)
				content[len(content)-3] = byte('0' + i/10%10)
				if _, err := ws.Write(context.Background(), p, content, vfs.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
