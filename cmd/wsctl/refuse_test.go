package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// TestEmptiedStoreIsRefusedUntouched: a store whose database file was
// emptied or overwritten with something else is refused by queries,
// maintenance and batch alike, with exit status 6, and never recreated.
func TestEmptiedStoreIsRefusedUntouched(t *testing.T) {
	for name, content := range map[string][]byte{
		"Empty":   nil,
		"Garbage": bytes.Repeat([]byte("not a database "), 1000),
	} {
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			c.skipFsck = true
			c.ok("batch")
			db := filepath.Join(c.store, wsstore.DBName)
			require.NoError(t, os.WriteFile(db, content, 0o644))
			for _, args := range [][]string{{"runs"}, {"fsck"}, {"gc"}, {"stats"}, {"batch"}} {
				out, errOut, code := c.run(`{"op":"listRuns"}`+"\n", args...)
				assert.Equal(t, 6, code, "wsctl %v: %s %s", args, out, errOut)
				assert.Contains(t, out+errOut, "store.not_a_store", "wsctl %v", args)
				got, err := os.ReadFile(db)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(content, got), "wsctl %v changed the file", args)
			}
			entries, err := os.ReadDir(c.store)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			assert.Equal(t, wsstore.DBName, strings.Join(names, ","))
		})
	}
}
