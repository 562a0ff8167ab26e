package protocol_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
)

// TestEmptyRootsAnswer: over batch, a fresh run's model listing names its
// visible roots as directories, live and at a checkpoint, a page at a
// time; list, stat and search of an empty root answer, and a path below
// one that holds nothing is still workspace.file_not_found.
func TestEmptyRootsAnswer(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	type entry struct {
		Path     string `json:"path"`
		Kind     string `json:"kind"`
		Size     int64  `json:"size"`
		Hash     string `json:"hash"`
		Resource string `json:"resource"`
		Writable bool   `json:"writable"`
	}
	type page struct {
		Entries []entry `json:"entries"`
		More    bool    `json:"more"`
	}
	roots := []string{"output", "persist", "plan", "scratch", "summaries"}
	empty := func(p string) entry {
		return entry{Path: p, Kind: "dir", Hash: vfs.EmptyTree.String(), Resource: "generated"}
	}
	cp := result[map[string]any](t, s, `{"op":"checkpoint"}`)["checkpointId"].(string)
	for _, at := range []string{"", fmt.Sprintf(`,"at":%q`, cp)} {
		whole := result[page](t, s, `{"op":"list"`+at+`}`)
		want := []entry{}
		for _, r := range roots {
			want = append(want, empty(r))
		}
		assert.Equal(t, page{Entries: want}, whole, "at %q", at)
		for _, limit := range []int{1, 2, 4, 5} {
			var got []string
			after := ""
			for {
				a := result[page](t, s, fmt.Sprintf(`{"op":"list","limit":%d,"after":%q%s}`, limit, after, at))
				for _, e := range a.Entries {
					got = append(got, e.Path)
				}
				if !a.More {
					break
				}
				require.Len(t, a.Entries, limit)
				after = a.Entries[len(a.Entries)-1].Path
			}
			assert.Equal(t, roots, got, "limit %d at %q", limit, at)
		}
		assert.Equal(t, page{Entries: []entry{}}, result[page](t, s, `{"op":"list","path":"output","depth":3`+at+`}`))
		assert.Equal(t, empty("output"), result[entry](t, s, `{"op":"stat","path":"output"`+at+`}`))
		host := result[page](t, s, `{"op":"host.list"`+at+`}`)
		var paths []string
		for _, e := range host.Entries {
			paths = append(paths, e.Path)
		}
		assert.Equal(t, append([]string{"input"}, roots...), paths, "the host's view: input/ and the roots")
	}
	hits := result[map[string]any](t, s, `{"op":"search","query":"dragon","path":"output"}`)
	assert.Equal(t, map[string]any{"hits": []any{}}, hits)

	for _, l := range []string{
		`{"op":"stat","path":"output/nope.md"}`,
		`{"op":"list","path":"output/nope"}`,
		`{"op":"search","query":"dragon","path":"output/nope"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, "workspace.file_not_found", string(r.Error.Code), l)
	}
}
