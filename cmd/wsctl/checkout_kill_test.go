package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
)

// stallAfterFirst reads the first file checkout asks for, then, at the
// second, signals reached and waits until its context ends: the moment a
// checkout killed midway (SIGKILL, a power loss) stops at, its first
// file written and no deferred cleanup to run.
type stallAfterFirst struct {
	blobGetter
	reached chan struct{}
	mu      sync.Mutex
	n       int
}

func (s *stallAfterFirst) Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if n == 2 {
		close(s.reached)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.blobGetter.Get(ctx, h)
}

// TestCheckoutKilledMidwayShowsNoHalfWorkspace: while a checkout has
// written some of its files, DIR shows none of them: a new DIR does not
// exist yet, and an empty DIR holds only the hidden directory the files
// are written into. So a checkout killed then leaves no half workspace
// under DIR's name, and the same checkout run again succeeds.
func TestCheckoutKilledMidwayShowsNoHalfWorkspace(t *testing.T) {
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "co")
			if existing {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			a := c.app()
			stall := &stallAfterFirst{reached: make(chan struct{})}
			a.wrapBlobs = func(g blobGetter) blobGetter {
				stall.blobGetter = g
				return stall
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int)
			var errOut strings.Builder
			go func() {
				done <- execute(ctx, a, []string{"--store", c.store, "checkout", "run_a", dir}, strings.NewReader(""), io.Discard, &errOut)
			}()
			select {
			case <-stall.reached:
			case code := <-done:
				t.Fatalf("checkout ended before its second file: %d %s", code, errOut.String())
			}
			// What a SIGKILL now would leave.
			if existing {
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				require.Len(t, entries, 1, "only the hidden directory the files are written into")
				assert.True(t, strings.HasPrefix(entries[0].Name(), stageMark), entries[0].Name())
			} else {
				assert.NoDirExists(t, dir)
				siblings, err := os.ReadDir(filepath.Dir(dir))
				require.NoError(t, err)
				require.Len(t, siblings, 1)
				assert.True(t, strings.HasPrefix(siblings[0].Name(), ".co"+stageMark), siblings[0].Name())
			}
			cancel()
			assert.Equal(t, 130, <-done, errOut.String())
			// An interrupted checkout removes its hidden directory.
			if existing {
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Empty(t, entries)
			} else {
				siblings, err := os.ReadDir(filepath.Dir(dir))
				require.NoError(t, err)
				assert.Empty(t, siblings)
			}
			out := c.ok("checkout", "run_a", dir)
			assert.Contains(t, out, "checked out 3 files")
			b, err := os.ReadFile(filepath.Join(dir, "output", "a.md"))
			require.NoError(t, err)
			assert.Equal(t, "one\ntwo\n", string(b))
			hidden, err := filepath.Glob(filepath.Join(filepath.Dir(dir), ".*"))
			require.NoError(t, err)
			assert.Empty(t, hidden)
			hidden, err = filepath.Glob(filepath.Join(dir, ".*"))
			require.NoError(t, err)
			assert.Empty(t, hidden)
		})
	}
}

// TestCheckoutClearsStagesKilledCheckoutsLeft: the hidden directory a
// killed checkout left is removed by the next checkout to the same DIR
// once nothing has changed in it for an hour; a younger one (a checkout
// maybe still writing) is left, and inside DIR it keeps DIR from being
// taken as empty.
func TestCheckoutClearsStagesKilledCheckoutsLeft(t *testing.T) {
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	old := time.Now().Add(-2 * time.Hour)
	stage := func(parent, name string, stale bool) string {
		p := filepath.Join(parent, name)
		require.NoError(t, os.MkdirAll(filepath.Join(p, "output"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "output", "half.md"), []byte("x"), 0o644))
		if stale {
			require.NoError(t, os.Chtimes(p, old, old))
		}
		return p
	}

	t.Run("BesideANewDir", func(t *testing.T) {
		parent := t.TempDir()
		staleStage := stage(parent, ".co"+stageMark+"0123456789ab", true)
		youngStage := stage(parent, ".co"+stageMark+"a1b2c3d4e5f6", false)
		other := stage(parent, ".co"+stageMark+"notours", true)
		c.ok("checkout", "run_a", filepath.Join(parent, "co"))
		assert.NoDirExists(t, staleStage)
		assert.DirExists(t, youngStage)
		assert.DirExists(t, other)
		assert.FileExists(t, filepath.Join(parent, "co", "output", "a.md"))
	})
	t.Run("InsideAnEmptyDir", func(t *testing.T) {
		dir := t.TempDir()
		staleStage := stage(dir, stageMark+"0123456789ab", true)
		c.ok("checkout", "run_a", dir)
		assert.NoDirExists(t, staleStage)
		assert.FileExists(t, filepath.Join(dir, "output", "a.md"))
		assert.NoFileExists(t, filepath.Join(dir, "output", "half.md"))
	})
	t.Run("ErrYoungStageInside", func(t *testing.T) {
		dir := t.TempDir()
		youngStage := stage(dir, stageMark+"0123456789ab", false)
		errOut := c.fails(5, "checkout", "run_a", dir)
		assert.Contains(t, errOut, "not empty")
		assert.DirExists(t, youngStage)
		assert.NoDirExists(t, filepath.Join(dir, "output"))
	})
}
