package runs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestNegativePageLimitIsRefused: a Go caller's page with a negative
// Limit is workspace.invalid_argument at every listing and diff that
// takes a vfs.ListPage, as over the protocol, never read as "no limit";
// 0 still asks for every entry.
func TestNegativePageLimitIsRefused(t *testing.T) {
	ctx := context.Background()
	s := storetest.OpenStore(t)
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	for _, name := range []string{"output/a.md", "output/b.md"} {
		_, err = ws.Write(ctx, vfs.MustPath(name), []byte(name), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	_, err = s.Actors.Upload(ctx, "ada", "a.md", strings.NewReader("one"))
	require.NoError(t, err)
	_, err = s.Actors.Upload(ctx, "ada", "b.md", strings.NewReader("two"))
	require.NoError(t, err)
	host, err := vfs.OpenHost(t.TempDir(), true)
	require.NoError(t, err)

	for _, limit := range []int{-1, 0} {
		page := vfs.ListPage{Limit: limit}
		calls := map[string]func() error{
			"Workspace.ListPage": func() error {
				_, _, err := ws.ListPage(ctx, vfs.MustPath("output"), 1, page)
				return err
			},
			"Service.DiffPage": func() error {
				_, _, err := s.Runs.DiffPage(ctx, run.ID, 1, 2, runs.DiffOptions{}, page)
				return err
			},
			"Service.DiffRunsPage": func() error {
				_, _, err := s.Runs.DiffRunsPage(ctx, runs.TreeRef{RunID: run.ID, Seq: 1}, runs.TreeRef{RunID: run.ID, Seq: 2}, runs.DiffOptions{}, page)
				return err
			},
			"Checkpoints.ViewPage": func() error {
				_, _, err := s.Checkpoints.ViewPage(ctx, run.ID, 2, page)
				return err
			},
			"Spaces.ListPage": func() error {
				_, _, err := s.Actors.ListPage(ctx, "ada", "", 1, page)
				return err
			},
			"Spaces.ListAtPage": func() error {
				_, _, err := s.Actors.ListAtPage(ctx, "ada", 2, "", 1, page)
				return err
			},
			"Spaces.DiffPage": func() error {
				_, _, err := s.Actors.DiffPage(ctx, "ada", 1, 2, page)
				return err
			},
			"HostFS.ListPage": func() error {
				_, _, err := host.ListPage(ctx, vfs.Root(), 1, page)
				return err
			},
		}
		for name, call := range calls {
			err := call()
			if limit < 0 {
				assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%s with limit %d: %v", name, limit, err)
			} else {
				assert.NoError(t, err, "%s with limit %d", name, limit)
			}
		}
	}
}
