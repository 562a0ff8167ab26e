package protocol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
)

// result handles l in s, requires it answered ok, and returns its result
// decoded as T.
func result[T any](t *testing.T, s *protocol.Session, l string) T {
	t.Helper()
	r := s.Handle(context.Background(), []byte(l))
	require.True(t, r.OK, "%s: %+v", l, r.Error)
	var a struct{ Result T }
	require.NoError(t, json.Unmarshal([]byte(line(t, r)), &a))
	return a.Result
}

// TestListPages: list answers a page and whether more remain; asked again
// after the last entry's path, the pages together are the listing. A
// limit out of range or an after that is no path is the host's mistake.
func TestListPages(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	for i := range 7 {
		r := s.Handle(ctx, fmt.Appendf(nil, `{"op":"write","path":"output/f%d.md","content":"x"}`, i))
		require.True(t, r.OK, "%+v", r.Error)
	}
	type answer struct {
		Entries []struct {
			Path string `json:"path"`
		} `json:"entries"`
		More *bool `json:"more"`
	}
	list := func(l string) answer {
		a := result[answer](t, s, l)
		require.NotNil(t, a.More, "more is always answered")
		return a
	}
	whole := list(`{"op":"list","path":"output"}`)
	assert.Len(t, whole.Entries, 7)
	assert.False(t, *whole.More)
	var got []string
	after := ""
	for {
		a := list(fmt.Sprintf(`{"op":"host.list","path":"output","limit":3,"after":%q}`, after))
		require.LessOrEqual(t, len(a.Entries), 3)
		for _, e := range a.Entries {
			got = append(got, e.Path)
		}
		if !*a.More {
			break
		}
		after = a.Entries[len(a.Entries)-1].Path
	}
	assert.Equal(t, []string{"output/f0.md", "output/f1.md", "output/f2.md", "output/f3.md", "output/f4.md", "output/f5.md", "output/f6.md"}, got)

	for _, l := range []string{
		`{"op":"list","limit":-1}`,
		`{"op":"list","limit":100001}`,
		`{"op":"host.list","after":"../x"}`,
		`{"op":"list","after":"/abs"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, "%s: %s", l, r.Error.Message)
	}
}

// TestRootSpellings: where an op takes the root (list, host.list, stat,
// search, actor.ls), "./" and "./." name it as "" and "." do, as
// "./output" names output; ".." stays refused. So do they as a listing's
// after, where the root is no cursor.
func TestRootSpellings(t *testing.T) {
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	ctx := context.Background()
	for _, l := range []string{
		`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`,
		`{"op":"write","path":"output/a.md","content":"needle"}`,
		`{"op":"actor.upload","actor":"alice","path":"r/a.md","content":"x"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
	}
	for _, op := range []string{
		`{"op":"list","depth":2%s}`, `{"op":"host.list"%s}`, `{"op":"stat"%s}`,
		`{"op":"search","query":"needle"%s}`, `{"op":"actor.ls","actor":"alice"%s}`,
	} {
		want := line(t, s.Handle(ctx, fmt.Appendf(nil, op, `,"path":""`)))
		require.Contains(t, want, `"ok":true`)
		for _, root := range []string{".", "./", "./.", ".//"} {
			l := fmt.Sprintf(op, fmt.Sprintf(`,"path":%q`, root))
			assert.Equal(t, want, line(t, s.Handle(ctx, []byte(l))), l)
		}
		r := s.Handle(ctx, fmt.Appendf(nil, op, `,"path":"./.."`))
		require.False(t, r.OK, op)
		assert.Equal(t, "workspace.invalid_path", string(r.Error.Code), op)
	}
	// A cursor at the root is no cursor, however it is spelled.
	for _, op := range []string{
		`{"op":"list","depth":2%s}`, `{"op":"host.list"%s}`,
		`{"op":"actor.ls","actor":"alice"%s}`, `{"op":"actor.ls","depth":2%s}`,
	} {
		want := line(t, s.Handle(ctx, fmt.Appendf(nil, op, `,"after":""`)))
		require.Contains(t, want, `"ok":true`)
		for _, root := range []string{".", "./", "./.", ".//"} {
			l := fmt.Sprintf(op, fmt.Sprintf(`,"after":%q`, root))
			assert.Equal(t, want, line(t, s.Handle(ctx, []byte(l))), l)
		}
	}
}

// TestEventsMore: events says whether events remain after its page
// (below beforeSeq, which alone scrolls back from the newest).
func TestEventsMore(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	for i := range 3 {
		r := s.Handle(ctx, fmt.Appendf(nil, `{"op":"write","path":"output/e%d.md","content":"x"}`, i))
		require.True(t, r.OK, "%+v", r.Error)
	}
	page := func(l string) (seqs []int64, more bool) {
		a := result[struct {
			Events []struct {
				Seq int64 `json:"seq"`
			} `json:"events"`
			More *bool `json:"more"`
		}](t, s, l)
		require.NotNil(t, a.More)
		for _, e := range a.Events {
			seqs = append(seqs, e.Seq)
		}
		return seqs, *a.More
	}
	all, more := page(`{"op":"events"}`)
	require.Greater(t, len(all), 2)
	assert.False(t, more)
	first, more := page(`{"op":"events","limit":2}`)
	assert.Equal(t, all[:2], first)
	assert.True(t, more)
	last, more := page(fmt.Sprintf(`{"op":"events","limit":%d,"afterSeq":%d}`, len(all)-2, first[1]))
	assert.Equal(t, all[2:], last)
	assert.False(t, more, "a full page that is the last")

	// Scrolling back: beforeSeq alone gives the newest page below it.
	n := len(all)
	newest, more := page(fmt.Sprintf(`{"op":"events","limit":2,"beforeSeq":%d}`, all[n-1]+1))
	assert.Equal(t, all[n-2:], newest)
	assert.False(t, more)
	older, more := page(fmt.Sprintf(`{"op":"events","limit":2,"beforeSeq":%d}`, newest[0]))
	assert.Equal(t, all[n-4:n-2], older)
	assert.False(t, more, "nothing follows it below beforeSeq")
	between, more := page(fmt.Sprintf(`{"op":"events","limit":1,"afterSeq":%d,"beforeSeq":%d}`, all[0], all[3]))
	assert.Equal(t, all[1:2], between)
	assert.True(t, more, "all[2] follows, below beforeSeq")
	r := s.Handle(ctx, []byte(`{"op":"events","beforeSeq":-1}`))
	require.False(t, r.OK)
	assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code)
}

// openCheckpointSession opens a store in a temporary directory and a
// session over it that serves checkpoint views, with a run, r, created
// with the profile given.
func openCheckpointSession(t *testing.T, profile string) *protocol.Session {
	st, err := wsstore.Open(context.Background(), t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Checkpoints: st.Checkpoints})
	r := s.Handle(context.Background(), []byte(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"},"profile":`+profile+`}`))
	require.True(t, r.OK, "%+v", r.Error)
	return s
}

// TestCheckpointViewPages: checkpoint.view answers a page of the
// checkpoint's files and whether more remain; asked again after the last
// file's path, the pages together are the whole view's files, with the
// same head. A limit out of range or an after that is no path is the
// host's mistake.
func TestCheckpointViewPages(t *testing.T) {
	ctx := context.Background()
	s := openCheckpointSession(t, `{"autoCheckpoint":false}`)
	var want []string
	for _, p := range []string{"output/a/x.md", "output/a/y.md", "output/b.md", "output/c/d/e.md", "output/c/f.md", "output/z.md"} {
		r := s.Handle(ctx, fmt.Appendf(nil, `{"op":"write","path":%q,"content":"x"}`, p))
		require.True(t, r.OK, "%+v", r.Error)
	}
	r := s.Handle(ctx, []byte(`{"op":"checkpoint","reason":"paged"}`))
	require.True(t, r.OK, "%+v", r.Error)
	var cp struct {
		Result struct {
			CheckpointID string `json:"checkpointId"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(line(t, r)), &cp))

	type answer struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
		Files  []struct {
			Path string `json:"path"`
		} `json:"files"`
		More *bool `json:"more"`
	}
	view := func(l string) answer {
		a := result[answer](t, s, l)
		require.NotNil(t, a.More, "more is always answered")
		assert.Equal(t, cp.Result.CheckpointID, a.ID)
		assert.Equal(t, "paged", a.Reason)
		return a
	}
	whole := view(fmt.Sprintf(`{"op":"checkpoint.view","checkpointId":%q}`, cp.Result.CheckpointID))
	assert.False(t, *whole.More)
	for _, f := range whole.Files {
		want = append(want, f.Path)
	}
	require.Subset(t, want, []string{"output/a/x.md", "output/c/d/e.md", "output/z.md"})
	for _, limit := range []int{1, 2, 4} {
		var got []string
		after := ""
		for {
			a := view(fmt.Sprintf(`{"op":"checkpoint.view","checkpointId":%q,"limit":%d,"after":%q}`, cp.Result.CheckpointID, limit, after))
			require.LessOrEqual(t, len(a.Files), limit)
			for _, f := range a.Files {
				got = append(got, f.Path)
			}
			if !*a.More {
				break
			}
			require.NotEmpty(t, a.Files, "a page with more holds files")
			after = a.Files[len(a.Files)-1].Path
		}
		assert.Equal(t, want, got, "limit %d", limit)
	}
	// After a directory: the files below it come after it.
	a := view(fmt.Sprintf(`{"op":"checkpoint.view","checkpointId":%q,"after":"output/c"}`, cp.Result.CheckpointID))
	var got []string
	for _, f := range a.Files {
		got = append(got, f.Path)
	}
	assert.Equal(t, []string{"output/c/d/e.md", "output/c/f.md", "output/z.md"}, got)

	for _, l := range []string{
		`{"op":"checkpoint.view","checkpointId":%q,"limit":-1}`,
		`{"op":"checkpoint.view","checkpointId":%q,"limit":100001}`,
		`{"op":"checkpoint.view","checkpointId":%q,"after":"../x"}`,
	} {
		l = fmt.Sprintf(l, cp.Result.CheckpointID)
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, "%s: %s", l, r.Error.Message)
	}
}

// TestCheckpointsListPages: checkpoints.list answers a page of the run's
// checkpoints, oldest first, and whether more remain; asked again after
// the last one's seq, the pages together are the list.
func TestCheckpointsListPages(t *testing.T) {
	ctx := context.Background()
	s := openCheckpointSession(t, `{}`)
	for i := range 5 {
		r := s.Handle(ctx, fmt.Appendf(nil, `{"op":"write","path":"output/f%d.md","content":"x"}`, i))
		require.True(t, r.OK, "%+v", r.Error)
	}
	type answer struct {
		Checkpoints []struct {
			Seq int64 `json:"seq"`
		} `json:"checkpoints"`
		More *bool `json:"more"`
	}
	list := func(l string) answer {
		a := result[answer](t, s, l)
		require.NotNil(t, a.More, "more is always answered")
		return a
	}
	whole := list(`{"op":"checkpoints.list"}`)
	assert.False(t, *whole.More)
	var want []int64
	for _, c := range whole.Checkpoints {
		want = append(want, c.Seq)
	}
	require.GreaterOrEqual(t, len(want), 5, "a checkpoint after each write")
	for _, limit := range []int{1, 2, len(want)} {
		var got []int64
		after := int64(0)
		for {
			a := list(fmt.Sprintf(`{"op":"checkpoints.list","limit":%d,"afterSeq":%d}`, limit, after))
			require.LessOrEqual(t, len(a.Checkpoints), limit)
			for _, c := range a.Checkpoints {
				got = append(got, c.Seq)
			}
			if !*a.More {
				break
			}
			after = a.Checkpoints[len(a.Checkpoints)-1].Seq
		}
		assert.Equal(t, want, got, "limit %d", limit)
	}
	for _, l := range []string{
		`{"op":"checkpoints.list","limit":-1}`,
		`{"op":"checkpoints.list","limit":10001}`,
		`{"op":"checkpoints.list","afterSeq":-1}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, "%s: %s", l, r.Error.Message)
	}
}

// TestSearchLimitOutOfRange: search's limit out of 0..200 is the host's
// mistake, named by its field, as list's and events' are.
func TestSearchLimitOutOfRange(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/a.md","content":"alpha"}`))
	require.True(t, r.OK, "%+v", r.Error)
	for _, l := range []string{
		`{"op":"search","query":"alpha","limit":-1}`,
		`{"op":"search","query":"alpha","limit":201}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, "%s: %s", l, r.Error.Message)
		assert.Contains(t, r.Error.Message, "limit", l)
		assert.NotContains(t, r.Error.Message, "maxHits", l)
	}
	for _, l := range []string{
		`{"op":"search","query":"alpha"}`,
		`{"op":"search","query":"alpha","limit":200}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
	}
}

// TestReadEmptyFileCountsZeroLines: a read of an empty file answers
// totalLines 0 rather than leaving it out, as a file of lines answers its
// count; a file that is not text has no lines counted and leaves it out.
func TestReadEmptyFileCountsZeroLines(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	for _, l := range []string{`{"op":"write","path":"output/empty.md","content":""}`, `{"op":"write","path":"output/two.md","content":"a\nb\n"}`} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%+v", r.Error)
	}
	for path, want := range map[string]int{"output/empty.md": 0, "output/two.md": 2} {
		r := s.Handle(ctx, fmt.Appendf(nil, `{"op":"read","path":%q}`, path))
		require.True(t, r.OK, "%+v", r.Error)
		var a struct {
			Result struct {
				TotalLines *int `json:"totalLines"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line(t, r)), &a))
		require.NotNil(t, a.Result.TotalLines, path)
		assert.Equal(t, want, *a.Result.TotalLines, path)
	}
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/b.bin","contentBase64":"/wD+AQ=="}`))
	require.True(t, r.OK, "%+v", r.Error)
	r = s.Handle(ctx, []byte(`{"op":"read","path":"output/b.bin"}`))
	require.True(t, r.OK, "%+v", r.Error)
	var a struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(line(t, r)), &a))
	require.Contains(t, a.Result, "contentBase64")
	assert.NotContains(t, a.Result, "totalLines", "a binary file's lines are not counted")
}

// TestDiffPages: diff, runs.diff and actor.diff answer a page of changed
// files in path order and whether more remain; asked again after the last
// path, the pages together are the whole diff. A limit out of range or an
// after that is no path is the host's mistake.
func TestDiffPages(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Host: st.Runs})
	ok := func(l string) { result[json.RawMessage](t, s, l) }
	ok(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"},"profile":{"autoCheckpoint":false}}`)
	ok(`{"op":"write","path":"output/keep.md","content":"same"}`)
	ok(`{"op":"write","path":"output/b/old.md","content":"old"}`)
	ok(`{"op":"checkpoint","reason":"one"}`)
	// Seven changes: four added, one modified, one deleted, a directory
	// replaced by a file.
	for _, l := range []string{
		`{"op":"write","path":"output/a1.md","content":"x"}`,
		`{"op":"write","path":"output/a2/deep.md","content":"x"}`,
		`{"op":"write","path":"output/c.md","content":"x"}`,
		`{"op":"write","path":"output/keep.md","content":"changed"}`,
		`{"op":"delete","path":"output/b/old.md"}`,
		`{"op":"write","path":"output/b","content":"now a file"}`,
		`{"op":"write","path":"output/z.md","content":"x"}`,
	} {
		ok(l)
	}
	ok(`{"op":"checkpoint","reason":"two"}`)
	ok(`{"op":"actor.upload","actor":"alice","path":"a.md","content":"1"}`)
	for i := range 5 {
		ok(fmt.Sprintf(`{"op":"actor.upload","actor":"alice","path":"n/f%d.md","content":"x"}`, i))
	}

	type answer struct {
		Changes []struct {
			Path string `json:"path"`
			Op   string `json:"op"`
		} `json:"changes"`
		More *bool `json:"more"`
	}
	page := func(l string) ([]string, bool) {
		a := result[answer](t, s, l)
		require.NotNil(t, a.More, "more is always answered: %s", l)
		var out []string
		for _, c := range a.Changes {
			out = append(out, c.Op+" "+c.Path)
		}
		return out, *a.More
	}
	for _, tc := range []struct{ name, req string }{
		{"diff", `{"op":"diff","from":1,"to":2`},
		{"runs.diff", `{"op":"runs.diff","fromRunId":"r","from":1,"toRunId":"r","to":2`},
		{"actor.diff", `{"op":"actor.diff","actor":"alice","from":1,"to":6`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, more := page(tc.req + `}`)
			assert.False(t, more)
			require.Greater(t, len(whole), 4)
			for _, limit := range []int{1, 2, 3} {
				var got []string
				after := ""
				for range 20 {
					ps, more := page(fmt.Sprintf(`%s,"limit":%d,"after":%q}`, tc.req, limit, after))
					require.LessOrEqual(t, len(ps), limit)
					got = append(got, ps...)
					if !more {
						break
					}
					_, after, _ = strings.Cut(ps[len(ps)-1], " ")
				}
				assert.Equal(t, whole, got, "pages of %d", limit)
			}
			for _, bad := range []string{`,"limit":-1}`, `,"limit":100001}`, `,"after":"../x"}`, `,"after":"/abs"}`} {
				r := s.Handle(ctx, []byte(tc.req+bad))
				require.False(t, r.OK, bad)
				assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, "%s: %s", bad, r.Error.Message)
			}
		})
	}
	whole, _ := page(`{"op":"diff","from":1,"to":2}`)
	assert.Equal(t, []string{"added output/a1.md", "added output/a2/deep.md", "added output/b", "deleted output/b/old.md",
		"added output/c.md", "modified output/keep.md", "added output/z.md"}, whole)
}
