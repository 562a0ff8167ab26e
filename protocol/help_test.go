package protocol

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestHelpGivesEveryField: each operation's help names every field its
// request may hold, at every level; fields are found by reflection over
// the types the op table lists, so a new one cannot go undocumented, and
// Help lists every operation in the table.
func TestHelpGivesEveryField(t *testing.T) {
	help := Help()
	names := map[string]bool{}
	for _, o := range ops {
		require.False(t, names[o.name], "op %s listed once", o.name)
		names[o.name] = true
		assert.True(t, strings.HasPrefix(o.help, "  "+o.name+" "), "op %s: its help starts with its name", o.name)
		assert.Contains(t, help, "\n"+o.help+"\n", "op %s", o.name)
		require.NotEmpty(t, o.request, "op %s", o.name)
		for _, v := range o.request {
			for _, name := range fieldsOf(reflect.TypeOf(v)).names {
				if name == "op" || name == "id" || (name == "runId" && o.name != "run.create") {
					continue // every request's, documented once above the operations
				}
				assert.Regexp(t, `[^A-Za-z]`+regexp.QuoteMeta(name)+`[^A-Za-z]`, o.help, "%s: field %s", o.name, name)
			}
		}
	}
	assert.Len(t, opsByName, len(ops))
	for _, common := range []string{`"op": NAME`, `"runId"?: RUN`, `"id"?: ANY`} {
		assert.Contains(t, help, common)
	}
}

// TestPruneHelpGivesEveryReportField: prune's help names every field of
// its answer, the counts beside its lists included.
func TestPruneHelpGivesEveryReportField(t *testing.T) {
	help := opsByName["prune"].help
	for _, v := range []any{runs.PruneReport{}, runs.PrunedRun{}, runs.PrunedCheckpoints{}, runs.HeldRun{}} {
		for _, name := range fieldsOf(reflect.TypeOf(v)).names {
			assert.Regexp(t, `[^A-Za-z]`+regexp.QuoteMeta(name)+`[^A-Za-z]`, help, "field %s", name)
		}
	}
}

// TestEveryOpDeclaresAccess: each op says whether it reads or writes, so
// a new op cannot be let through to a read-only token by omission; Ops
// and ReadOnly report it.
func TestEveryOpDeclaresAccess(t *testing.T) {
	for _, o := range ops {
		assert.Contains(t, []access{reads, writes}, o.access, "op %s", o.name)
	}
	infos := Ops()
	require.Len(t, infos, len(ops))
	for _, info := range infos {
		assert.Equal(t, info.ReadOnly, ReadOnly(info.Name), info.Name)
	}
	assert.True(t, ReadOnly("read"))
	assert.False(t, ReadOnly("write"))
	assert.False(t, ReadOnly("nope"), "an unknown op is never read-only")
	assert.Contains(t, Help(), "Read-only operations")
}

// TestListHelpGivesEveryEntryField: list's and stat's help name every
// field of the entries they answer (a host file's modTime too); the
// checkpoint a change took is on a change's answer, never on these.
func TestListHelpGivesEveryEntryField(t *testing.T) {
	for _, op := range []string{"list", "stat"} {
		for _, name := range fieldsOf(reflect.TypeFor[vfs.FileInfo]()).names {
			if name == "checkpoint" {
				continue
			}
			assert.Regexp(t, `[^A-Za-z]`+regexp.QuoteMeta(name)+`[^A-Za-z]`, opsByName[op].help, "%s: field %s", op, name)
		}
	}
}

// TestCheckpointsListHelpGivesEveryField: checkpoints.list's help names
// every field of the checkpoints it answers.
func TestCheckpointsListHelpGivesEveryField(t *testing.T) {
	for _, name := range fieldsOf(reflect.TypeFor[checkpoint.Checkpoint]()).names {
		assert.Regexp(t, `[^A-Za-z]`+regexp.QuoteMeta(name)+`[^A-Za-z]`, opsByName["checkpoints.list"].help, "field %s", name)
	}
}

// TestImportHelpGivesEveryField: import's help names every field of the
// summary it answers (export's beside its own); updated and its count
// are a merging import's (sync), which the op never does.
func TestImportHelpGivesEveryField(t *testing.T) {
	help := opsByName["export"].help + opsByName["import"].help
	for _, name := range fieldsOf(reflect.TypeFor[archive.Summary]()).names {
		if name == "updated" || name == "updatedCount" {
			continue
		}
		assert.Regexp(t, `[^A-Za-z]`+regexp.QuoteMeta(name)+`[^A-Za-z]`, help, "field %s", name)
	}
}
