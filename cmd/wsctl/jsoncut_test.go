package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// cancelingWriter is standard output that ends its command's context
// once the first bytes reach it: the command then fails part way, after
// it has begun to print.
type cancelingWriter struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelingWriter) Write(p []byte) (int, error) {
	w.cancel()
	return w.Buffer.Write(p)
}

// TestJSONCutShortIsStillJSON: a --json command that fails part way,
// once it has printed some of its output (here its context ends as the
// first bytes go out), ends what it began, so standard output is one
// JSON document holding what was read before the failure, and the error
// goes to standard error with its exit status. It printed a "[" and some
// entries and stopped there.
func TestJSONCutShortIsStillJSON(t *testing.T) {
	defer func(r, c int) { runsPage, chatsPage = r, c }(runsPage, chatsPage)
	runsPage, chatsPage = 2, 2
	c := newCLI(t)
	st := c.open()
	ctx := context.Background()
	for i := range 5 {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("chat", i)}, RunID: fmt.Sprint("run", i)})
		require.NoError(t, err)
	}
	// A checkpoint of 600 files: its view outgrows the output's buffer,
	// which goes out, and the walk of its files stops, in the middle of
	// the view.
	edits := make([]runs.Edit, 600)
	for i := range edits {
		edits[i] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/f%04d.md", i)), Content: []byte("x")}
	}
	_, err := st.Runs.Workspace("run0", runs.ModelScope).Apply(ctx, edits)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	for _, args := range [][]string{
		{"runs", "--json"},
		{"chats", "--json"},
		{"checkpoints", "run0", "--json"},
	} {
		cctx, cancel := context.WithCancel(ctx)
		out := &cancelingWriter{cancel: cancel}
		var errOut bytes.Buffer
		code := execute(cctx, c.app(), append([]string{"--store", c.store}, args...), strings.NewReader(""), out, &errOut)
		cancel()
		assert.NotEqual(t, 0, code, "%v: the command failed part way", args)
		assert.NotEmpty(t, errOut.String(), "%v: the error is on standard error", args)
		var doc []json.RawMessage
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc), "%v: standard output is one JSON document:\n%s", args, out.Bytes())
		assert.NotEmpty(t, doc, "%v: it holds what was printed", args)
		if args[0] == "checkpoints" {
			var last struct{ Files []json.RawMessage }
			require.NoError(t, json.Unmarshal(doc[len(doc)-1], &last))
			assert.Less(t, len(last.Files), 600, "the view was cut short in its files, and ended")
		}
		t.Logf("%v: exit %d, %d entries of JSON, %s", args, code, len(doc), strings.TrimSpace(errOut.String()))
	}
}

// TestPagesAbort: a listing whose second page fails ends its JSON array
// after the first page's entries and returns the error; one whose first
// page fails prints nothing. A listing that closed is left as it is.
func TestPagesAbort(t *testing.T) {
	fail := errors.New("page two is unreadable")
	list := func(failAt int) (string, error) {
		var out bytes.Buffer
		p := &pages[string]{w: &out, json: true}
		defer p.abort()
		calls := 0
		err := p.all(func(page vfs.ListPage) ([]string, bool, error) {
			calls++
			if calls == failAt {
				return nil, false, fail
			}
			return []string{fmt.Sprint("a", calls), fmt.Sprint("b", calls)}, calls < 3, nil
		}, func(s string) vfs.Path { return vfs.MustPath(s) })
		p.abort()
		return out.String(), err
	}
	out, err := list(2)
	assert.ErrorIs(t, err, fail)
	var got []string
	require.NoError(t, json.Unmarshal([]byte(out), &got), "%s", out)
	assert.Equal(t, []string{"a1", "b1"}, got)

	out, err = list(1)
	assert.ErrorIs(t, err, fail)
	assert.Empty(t, out)

	out, err = list(0)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &got), "%s", out)
	assert.Equal(t, []string{"a1", "b1", "a2", "b2", "a3", "b3"}, got, "abort after close adds nothing")
}

// TestShowJSONCutShort: show --json whose commits fail part way ends the
// document, its commits those read before the failure.
func TestShowJSONCutShort(t *testing.T) {
	fail := errors.New("commits unreadable")
	var out bytes.Buffer
	err := writeDetailsJSON(&out, runDetails{}, func(fn func(runs.CommitRecord) error) error {
		for _, id := range []string{"c1", "c2"} {
			if err := fn(runs.CommitRecord{ID: id}); err != nil {
				return err
			}
		}
		return fail
	})
	assert.ErrorIs(t, err, fail)
	var d runDetails
	require.NoError(t, json.Unmarshal(out.Bytes(), &d), "%s", out.Bytes())
	require.Len(t, d.Commits, 2)
	assert.Equal(t, "c2", d.Commits[1].ID)
}
