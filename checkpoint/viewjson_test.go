package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
)

// TestWriteJSONIsMarshalIndent: the streamed checkpoint.json is byte for
// byte json.MarshalIndent of the whole view and a newline, with no files,
// one, and many, with names JSON escapes and with and without a parent.
func TestWriteJSONIsMarshalIndent(t *testing.T) {
	names := []string{"a.md", `quote"and\back`, "<tag>&amp;", "ünïcødé/файл.txt", "tab\there", "output/deep/er/file.go"}
	for _, n := range []int{0, 1, 2, 300} {
		for _, parent := range []string{"", "cp_000002"} {
			v := checkpoint.View{ID: "cp_000003", Seq: 3, RunID: "run<1>", CreatedAt: time.Unix(1700000000, 123456789).UTC(),
				Reason: "after write \"x\"", EventSeq: 9, Parent: parent, Root: cas.Sum([]byte("root")), Files: []checkpoint.FileRef{}}
			for i := range n {
				v.Files = append(v.Files, checkpoint.FileRef{Path: fmt.Sprintf("%s/%d", names[i%len(names)], i), Hash: cas.Sum([]byte{byte(i)}), Bytes: int64(i * 7)})
			}
			want, err := json.MarshalIndent(v, "", "  ")
			require.NoError(t, err)
			want = append(want, '\n')
			var got bytes.Buffer
			files := v.Files
			v.Files = nil
			require.NoError(t, checkpoint.WriteJSON(context.Background(), &got, v, func(fn func(checkpoint.FileRef) error) error {
				for _, f := range files {
					if err := fn(f); err != nil {
						return err
					}
				}
				return nil
			}))
			require.Equal(t, string(want), got.String(), "%d files, parent %q", n, parent)

			// As an element of an array indented two spaces, HTML
			// characters unescaped (wsctl checkpoints --json).
			var elem bytes.Buffer
			enc := json.NewEncoder(&elem)
			enc.SetEscapeHTML(false)
			enc.SetIndent("  ", "  ")
			whole := v
			whole.Files = files
			require.NoError(t, enc.Encode(whole))
			got.Reset()
			require.NoError(t, checkpoint.WriteJSONElement(context.Background(), &got, v, func(fn func(checkpoint.FileRef) error) error {
				for _, f := range files {
					if err := fn(f); err != nil {
						return err
					}
				}
				return nil
			}, "  "))
			require.Equal(t, strings.TrimSuffix(elem.String(), "\n"), got.String(), "element: %d files, parent %q", n, parent)
		}
	}
}

// TestWriteJSONStopsAtItsErrors: an error of the files' source and a
// context that ends are returned.
func TestWriteJSONStopsAtItsErrors(t *testing.T) {
	boom := errors.New("boom")
	err := checkpoint.WriteJSON(context.Background(), &bytes.Buffer{}, checkpoint.View{}, func(func(checkpoint.FileRef) error) error { return boom })
	assert.ErrorIs(t, err, boom)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = checkpoint.WriteJSON(ctx, &bytes.Buffer{}, checkpoint.View{}, func(fn func(checkpoint.FileRef) error) error {
		return fn(checkpoint.FileRef{Path: "a"})
	})
	assert.ErrorIs(t, err, context.Canceled)
}
