package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocsNameEveryCommandAndFlag: README's wsctl reference has a row for
// every command, and README or a page of docs/ names every flag of every
// command (by its long name, or its shorthand), so a command or flag
// cannot ship that no document mentions.
func TestDocsNameEveryCommandAndFlag(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	start := strings.Index(readme, "## wsctl reference")
	require.GreaterOrEqual(t, start, 0, "README has a wsctl reference")
	reference, _, _ := strings.Cut(readme[start+1:], "\n## ")
	docs := readme
	pages, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		docs += string(b)
	}

	root := newRootCmd(newApp())
	for _, cmd := range root.Commands() {
		if cmd.Hidden || cmd.Name() == "help" {
			continue
		}
		assert.True(t, strings.Contains(reference, "| `"+cmd.Name()) || strings.Contains(reference, ", `"+cmd.Name()),
			"README's wsctl reference has a row for %s", cmd.Name())
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Name() == "completion" {
			return // cobra's own, with its own help
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			named := strings.Contains(docs, "--"+f.Name)
			if f.Shorthand != "" {
				named = named || strings.Contains(docs, "`-"+f.Shorthand+"`") || strings.Contains(docs, " -"+f.Shorthand+" ") || strings.Contains(docs, " -"+f.Shorthand+"`")
			}
			assert.True(t, named, "README or docs/ names %s's flag --%s", cmd.CommandPath(), f.Name)
		})
		for _, c := range cmd.Commands() {
			if !c.Hidden && c.Name() != "help" {
				walk(c)
			}
		}
	}
	walk(root)
}
