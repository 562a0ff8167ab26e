package wsstore_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// exec runs one statement in a write transaction.
func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	require.NoError(e.t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, query, args...)
		return err
	}))
}

// stat returns what p is in the run's live workspace.
func (e *env) stat(runID, p string) vfs.FileInfo {
	e.t.Helper()
	fi, err := e.s.Runs.Workspace(runID, runs.HostScope).Stat(e.ctx, vfs.MustPath(p))
	require.NoError(e.t, err)
	return fi
}

// actorVersions uploads n versions of a file to actor's space.
func (e *env) actorVersions(actor string, n int) {
	e.t.Helper()
	for i := range n {
		_, err := e.s.Actors.Upload(e.ctx, actor, "notes.md", strings.NewReader(fmt.Sprint("version ", i)))
		require.NoError(e.t, err)
	}
}

// alterBlob flips one byte of the stored form of the blob holding content.
func (e *env) alterBlob(content []byte) cas.Hash {
	e.t.Helper()
	h := cas.Sum(content)
	var data []byte
	require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &data, `SELECT data FROM blobs WHERE hash = ?`, h)
	}))
	require.NotEmpty(e.t, data)
	data[len(data)/2] ^= 0x40
	e.exec(`UPDATE blobs SET data = ? WHERE hash = ?`, data, h)
	return h
}

func TestFsck(t *testing.T) {
	big := random(20, 600<<10) // chunked with InlineMax 64 KiB
	tests := []struct {
		name string
		// damage breaks the store and returns the problems Fsck must
		// report (Detail is matched as a substring).
		damage func(e *env) []wsstore.Problem
	}{
		{name: "OK/Healthy", damage: func(e *env) []wsstore.Problem { return nil }},
		{name: "OK/GarbageWithDanglingEntries", damage: func(e *env) []wsstore.Problem {
			// Trees nothing references may name rows that are gone:
			// garbage is never corruption.
			e.drop("run_b")
			e.exec(`DELETE FROM blobs WHERE hash = ?`, cas.Sum([]byte("only run b\n")))
			return nil
		}},
		{name: "Blob/ByteAltered", damage: func(e *env) []wsstore.Problem {
			h := e.alterBlob(random(1, 3000)) // scratch/shared.bin, stored raw
			return []wsstore.Problem{{Kind: "blob", Ref: h.String(), Detail: "store.corrupt"}}
		}},
		{name: "Chunk/ByteAltered", damage: func(e *env) []wsstore.Problem {
			info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(big))
			require.NoError(e.t, err)
			require.Equal(e.t, cas.CodecChunked, info.Codec)
			var chunk cas.Hash
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &chunk, `SELECT chunk FROM blob_chunks WHERE blob = ? AND idx = 0`, info.Hash)
			}))
			e.exec(`UPDATE chunks SET data = substr(data, 1, 100) || x'00' || substr(data, 102) WHERE hash = ?`, chunk)
			return []wsstore.Problem{
				{Kind: "chunk", Ref: chunk.String(), Detail: "does not hash"},
				{Kind: "blob", Ref: info.Hash.String()},
			}
		}},
		{name: "Tree/NotItsAddress", damage: func(e *env) []wsstore.Problem {
			notes := e.stat("run_a", "output/notes")
			e.exec(`UPDATE trees SET data = x'01' WHERE hash = ?`, notes.Hash)
			return []wsstore.Problem{{Kind: "tree", Ref: notes.Hash.String(), Detail: "does not hash to its address"}}
		}},
		{name: "Tree/PatchBaseDamaged", damage: func(e *env) []wsstore.Problem {
			// The run's root is a patch against an earlier root: damage
			// that base, and the root no longer reads either.
			run, err := e.s.Runs.Run(e.ctx, "run_a")
			require.NoError(e.t, err)
			var base cas.Hash
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &base, `SELECT base FROM trees WHERE hash = ?`, run.Root)
			}))
			require.False(e.t, base.IsZero(), "the root is stored as a patch")
			e.exec(`UPDATE trees SET data = x'01' WHERE hash = ?`, base)
			return []wsstore.Problem{
				{Kind: "tree", Ref: base.String()},
				{Kind: "tree", Ref: run.Root.String(), Detail: "patch base " + base.String()},
			}
		}},
		{name: "Tree/PatchNumberOutOfOrder", damage: func(e *env) []wsstore.Problem {
			// A patch whose number does not exceed its base's: the bytes
			// still decode, but the chain is not one a store writes.
			var h cas.Hash
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &h, `SELECT t.hash FROM trees t JOIN trees b ON t.base = b.hash
					WHERE b.base IS NOT NULL ORDER BY t.hash LIMIT 1`)
			}))
			require.False(e.t, h.IsZero(), "a patch against a patch")
			e.exec(`UPDATE trees SET data = substr(data, 1, 1) || (SELECT substr(b.data, 2, 1) FROM trees b
				WHERE b.hash = trees.base) || substr(data, 3) WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "tree", Ref: h.String(), Detail: "does not follow its base"}}
		}},
		{name: "Tree/NotListedInTreeRefs", damage: func(e *env) []wsstore.Problem {
			// The collection after a deletion takes a lookup in tree_refs
			// that finds nothing as proof that no tree names an object:
			// a list row lost would let it delete a file both runs hold.
			h := cas.Sum([]byte("# Shared\nboth runs write this\n"))
			e.exec(`DELETE FROM tree_refs WHERE child = ?`, int64(binary.BigEndian.Uint64(h[:8])))
			return []wsstore.Problem{{Kind: "tree", Detail: "names blob " + h.String() + ", which tree_refs does not list"}}
		}},
		{name: "Reference/RootMissing", damage: func(e *env) []wsstore.Problem {
			run, err := e.s.Runs.Run(e.ctx, "run_a")
			require.NoError(e.t, err)
			e.exec(`DELETE FROM trees WHERE hash = ?`, run.Root)
			return []wsstore.Problem{{Kind: "reference", Ref: run.Root.String(), Detail: "tree is missing (referenced by"}}
		}},
		{name: "Reference/SubtreeMissing", damage: func(e *env) []wsstore.Problem {
			out := e.stat("run_a", "output")
			e.exec(`DELETE FROM trees WHERE hash = ?`, out.Hash)
			return []wsstore.Problem{{Kind: "reference", Ref: out.Hash.String(), Detail: `entry "output"`}}
		}},
		{name: "Reference/BlobMissing", damage: func(e *env) []wsstore.Problem {
			h := cas.Sum([]byte("only run a\n"))
			e.exec(`DELETE FROM blobs WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "reference", Ref: h.String(), Detail: `blob is missing (referenced by tree`}}
		}},
		{name: "Reference/ChunkMissing", damage: func(e *env) []wsstore.Problem {
			var chunk cas.Hash
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &chunk, `SELECT chunk FROM blob_chunks WHERE blob = ? AND idx = 0`, cas.Sum(big))
			}))
			// Only with foreign keys off can a listed chunk go.
			require.NoError(e.t, e.s.DB.Exec(e.ctx, `PRAGMA foreign_keys = OFF`))
			e.exec(`DELETE FROM chunks WHERE hash = ?`, chunk)
			require.NoError(e.t, e.s.DB.Exec(e.ctx, `PRAGMA foreign_keys = ON`))
			return []wsstore.Problem{
				{Kind: "reference", Ref: chunk.String(), Detail: "chunk is missing"},
				{Kind: "blob", Ref: cas.Sum(big).String()},
				{Kind: "sqlite", Detail: "foreign key"},
			}
		}},
		{name: "Reference/CheckpointsAndEventsOfMissingRun", damage: func(e *env) []wsstore.Problem {
			e.exec(`INSERT INTO checkpoints (run_id, seq, root, reason, event_seq, created_at) VALUES ('ghost', 1, ?, 'x', 1, 0)`, vfs.EmptyTree)
			e.exec(`INSERT INTO events (run_id, seq, type, level, at) VALUES ('ghost', 1, 'status_changed', 'info', 0), ('ghost', 2, 'status_changed', 'info', 0)`)
			return []wsstore.Problem{
				{Kind: "reference", Ref: "ghost", Detail: "1 checkpoints belong to run ghost"},
				{Kind: "reference", Ref: "ghost", Detail: "2 events belong to run ghost"},
			}
		}},
		{name: "Event/GarbagePayload", damage: func(e *env) []wsstore.Problem {
			e.exec(`UPDATE events SET payload = CAST('{"path": "out' AS BLOB) WHERE run_id = 'run_a' AND seq = 2`)
			e.exec(`UPDATE events SET payload = x'07ff' WHERE run_id = 'run_b' AND seq = 1`)
			return []wsstore.Problem{
				{Kind: "event", Ref: "run_a#2", Detail: "not a JSON object"},
				{Kind: "event", Ref: "run_b#1", Detail: "payload"},
			}
		}},
		{name: "Rows/DanglingCheckpointReferences", damage: func(e *env) []wsstore.Problem {
			// A run's head, and a checkpoint's parent, that name no
			// checkpoint of the run.
			// A commit whose checkpoint is gone.
			c, err := e.s.Runs.Commit(e.ctx, "run_b", runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
				return json.RawMessage(`{}`), nil
			}), runs.CommitOptions{Path: "output/shared.md"})
			require.NoError(e.t, err)
			e.exec(`UPDATE runs SET head_checkpoint = 99 WHERE id = 'run_a'`)
			e.exec(`UPDATE checkpoints SET parent_seq = 77 WHERE run_id = 'run_b' AND seq = 2`)
			e.exec(`UPDATE commits SET checkpoint_seq = 55 WHERE run_id = 'run_b'`)
			return []wsstore.Problem{
				{Kind: "run", Ref: "run_a", Detail: "names checkpoint 99"},
				{Kind: "checkpoint", Ref: "run_b#2", Detail: "names checkpoint 77"},
				{Kind: "commit", Ref: c.ID, Detail: "names checkpoint 55"},
			}
		}},
		{name: "OK/ActorSpaces", damage: func(e *env) []wsstore.Problem {
			// Counts kept through changes and a prune, and a row that
			// keeps none yet (NULL), are sound.
			e.actorVersions("alice", 4)
			e.actorVersions("bob", 2)
			_, err := e.s.Actors.GC(e.ctx, actors.GCOptions{Actor: "alice", KeepVersions: 2})
			require.NoError(e.t, err)
			e.exec(`UPDATE actor_spaces SET versions = NULL WHERE actor = 'bob'`)
			return nil
		}},
		{name: "Rows/ActorVersionsMiscounted", damage: func(e *env) []wsstore.Problem {
			e.actorVersions("alice", 3)
			e.exec(`UPDATE actor_spaces SET versions = 7 WHERE actor = 'alice'`)
			return []wsstore.Problem{{Kind: "actor", Ref: "alice", Detail: "its row counts 7 versions, its journal holds 3"}}
		}},
		{name: "Many/AllReported", damage: func(e *env) []wsstore.Problem {
			h := e.alterBlob(random(1, 3000))
			out := e.stat("run_b", "output")
			e.exec(`DELETE FROM trees WHERE hash = ?`, out.Hash)
			e.exec(`INSERT INTO events (run_id, seq, type, level, at) VALUES ('ghost', 1, 'status_changed', 'info', 0)`)
			return []wsstore.Problem{
				{Kind: "blob", Ref: h.String()},
				{Kind: "reference", Ref: out.Hash.String()},
				{Kind: "reference", Ref: "ghost"},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCorruptibleEnv(t, wsstore.Options{CAS: cas.Options{InlineMax: 64 << 10}})
			twoRuns(e)
			e.write("run_a", "scratch/big.bin", big)
			want := tt.damage(e)

			var phases []string
			rep, err := e.s.Fsck(e.ctx, func(phase string, done, total int) {
				if len(phases) == 0 || phases[len(phases)-1] != phase {
					phases = append(phases, phase)
				}
			})

			require.NoError(t, err)
			assert.Equal(t, []string{"sqlite", "blobs", "trees", "references", "journal", "rows"}, phases)
			assert.Equal(t, len(want) == 0, rep.OK(), "%v", rep.Problems)
			for _, w := range want {
				assert.True(t, hasProblem(rep.Problems, w), "want %+v in %v", w, rep.Problems)
			}
			if len(want) == 0 {
				assert.Equal(t, []wsstore.Problem{}, rep.Problems)
				assert.Equal(t, e.count("blobs"), rep.Blobs)
				assert.Equal(t, e.count("chunks"), rep.Chunks)
				assert.Equal(t, e.count("trees"), rep.Trees)
				assert.Equal(t, e.count("runs"), rep.Runs)
				assert.Equal(t, e.count("checkpoints"), rep.Checkpoints)
				assert.Positive(t, rep.Chunks)
			}
		})
	}
}

func hasProblem(ps []wsstore.Problem, want wsstore.Problem) bool {
	for _, p := range ps {
		if p.Kind == want.Kind && (want.Ref == "" || p.Ref == want.Ref) && strings.Contains(p.Detail, want.Detail) {
			return true
		}
	}
	return false
}

func TestFsckReportJSON(t *testing.T) {
	b, err := json.Marshal(wsstore.FsckReport{Blobs: 1, Problems: []wsstore.Problem{{Kind: "tree", Ref: "ab", Detail: "x"}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"blobs":1,"chunks":0,"trees":0,"runs":0,"checkpoints":0,"events":0,
		"problems":[{"kind":"tree","ref":"ab","detail":"x"}]}`, string(b))
}
