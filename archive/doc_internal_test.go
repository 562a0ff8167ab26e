package archive

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFormatDocNamesEveryField: docs/archive.md is the format's
// description for readers and writers in other languages, so it names
// every field an archive holds: each of the manifest's and its scope's,
// and each of every row kind's, in that kind's line of the rows' table.
func TestFormatDocNamesEveryField(t *testing.T) {
	b, err := os.ReadFile("../docs/archive.md")
	require.NoError(t, err)
	doc := string(b)
	line := func(prefix string) string {
		for l := range strings.SplitSeq(doc, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	fields := func(t reflect.Type) []string {
		var out []string
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				out = append(out, name)
			}
		}
		return out
	}
	for _, name := range append(manifestFields, fields(reflect.TypeFor[Scope]())...) {
		assert.Contains(t, line("| `wsstore-archive.json`"), "`"+name+"`", "the manifest's field %s", name)
	}
	for f := range reflect.TypeFor[Record]().Fields() {
		kind, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		l := line("| `" + kind + "` |")
		require.NotEmpty(t, l, "a line of the rows' table for %s", kind)
		for _, name := range fields(f.Type.Elem()) {
			assert.Contains(t, l, "`"+name+"`", "row %s, field %s", kind, name)
		}
	}
	for _, name := range fields(reflect.TypeFor[End]()) {
		assert.Contains(t, line("| `end.json`"), "`"+name+"`", "the end entry's field %s", name)
	}
}
