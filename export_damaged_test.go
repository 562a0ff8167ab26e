package wsstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestExportRefusesRowsNoImportTakes: a store whose rows an import would
// refuse (a checkpoint's parent that is not an earlier checkpoint, a head
// or a commit naming a checkpoint the run lacks, a manifest that does not
// parse) fails its export with store.corrupt, writing nothing, instead of
// an archive found unimportable only at restore time. The same store
// exports once the row is mended.
func TestExportRefusesRowsNoImportTakes(t *testing.T) {
	damages := map[string]string{
		"parent":   `UPDATE checkpoints SET parent_seq = 99 WHERE run_id = 'r' AND seq = 3`,
		"head":     `UPDATE runs SET head_checkpoint = 77 WHERE id = 'r'`,
		"commit":   `UPDATE commits SET checkpoint_seq = 55 WHERE run_id = 'r'`,
		"manifest": `UPDATE runs SET manifest = '{"workspaceVersion":' WHERE id = 'r'`,
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
			require.NoError(t, err)
			defer st.Close()
			_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{RunID: "r", Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
			require.NoError(t, err)
			ws := st.Runs.Workspace("r", runs.ModelScope)
			for _, content := range []string{"one\n", "two\n", "three\n"} {
				_, err := ws.Write(ctx, vfs.MustPath("output/main.md"), []byte(content), vfs.WriteOptions{})
				require.NoError(t, err)
			}
			_, err = st.Runs.Commit(ctx, "r", runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
				return nil, nil
			}), runs.CommitOptions{})
			require.NoError(t, err)
			var good bytes.Buffer
			_, err = st.Archive.Export(ctx, &good, archive.Scope{All: true}, archive.Options{})
			require.NoError(t, err)

			var undo string
			require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
				if name == "manifest" {
					if err := tx.GetContext(ctx, &undo, `SELECT manifest FROM runs WHERE id = 'r'`); err != nil {
						return err
					}
				}
				_, err := tx.ExecContext(ctx, damage)
				return err
			}))
			var arc bytes.Buffer
			_, err = st.Archive.Export(ctx, &arc, archive.Scope{All: true}, archive.Options{})
			require.Error(t, err)
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			_, err = st.Archive.Export(ctx, &arc, archive.Scope{Runs: []string{"r"}}, archive.Options{})
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)

			// Mended, it exports, and the archive imports.
			defer storetest.RequireSound(t, st)
			require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
				var err error
				switch name {
				case "parent":
					_, err = tx.ExecContext(ctx, `UPDATE checkpoints SET parent_seq = 2 WHERE run_id = 'r' AND seq = 3`)
				case "head":
					_, err = tx.ExecContext(ctx, `UPDATE runs SET head_checkpoint = (SELECT max(seq) FROM checkpoints WHERE run_id = 'r') WHERE id = 'r'`)
				case "commit":
					// 0 names no checkpoint: sound, as fsck and an import take it.
					_, err = tx.ExecContext(ctx, `UPDATE commits SET checkpoint_seq = 0 WHERE run_id = 'r'`)
				default:
					_, err = tx.ExecContext(ctx, `UPDATE runs SET manifest = ? WHERE id = 'r'`, undo)
				}
				return err
			}))
			arc.Reset()
			_, err = st.Archive.Export(ctx, &arc, archive.Scope{All: true}, archive.Options{})
			require.NoError(t, err)
			dst, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
			require.NoError(t, err)
			defer dst.Close()
			_, err = dst.Archive.Import(ctx, &arc, archive.Options{})
			require.NoError(t, err)
		})
	}
}
