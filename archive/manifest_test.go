package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestImportKeepsAStoredManifest: a run whose manifest an older build
// accepted (its template names a hidden artifact, which Validate now
// refuses) still commits where it is, exports, and imports: a stored
// manifest is held to the rules it was written under, so restoring a
// store or moving it to a new device never fails on it.
func TestImportKeepsAStoredManifest(t *testing.T) {
	ctx := context.Background()
	src := open(t)
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("r1", runs.HostScope).Write(ctx, vfs.MustPath("output/main.md"), []byte("hi"), vfs.WriteOptions{})
	require.NoError(t, err)
	// A manifest an older build stored: its template names a hidden
	// artifact.
	old := `{"workspaceVersion":1,"artifacts":[` +
		`{"id":"main","path":"output/main.md","kind":"body","target":"message_body","required":true,"assemblyOrder":10},` +
		`{"id":"notes","path":"output/notes.md","kind":"notes","target":"hidden","required":false,"assemblyOrder":20}],` +
		`"commitPolicy":{"defaultTarget":"message_body","combineTemplate":"{{main}}\n{{notes}}","storeArtifactsInExtra":false}}`
	err = src.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE runs SET manifest = ? WHERE id = 'r1'`, old)
		return err
	})
	require.NoError(t, err)
	// The run still commits on its own store (loadManifest does not validate).
	_, err = src.Runs.Commit(ctx, "r1", runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}), runs.CommitOptions{})
	require.NoError(t, err)

	var buf bytes.Buffer
	_, err = src.Archive.Export(ctx, &buf, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	dst := open(t)
	_, err = dst.Archive.Import(ctx, bytes.NewReader(buf.Bytes()), archive.Options{})
	require.NoError(t, err, "an archive of a store made before the manifest rule no longer imports")
}

// TestImportedManifestWithoutTargetsCommitsThem: an archive's manifest
// whose artifacts name no target (another writer's, which the format
// allows: they take commitPolicy.defaultTarget) imports, reads back with
// that target, and commits its body as the body, not an empty message.
func TestImportedManifestWithoutTargetsCommitsThem(t *testing.T) {
	ctx := context.Background()
	src := open(t)
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("r1", runs.HostScope).Write(ctx, vfs.MustPath("output/main.md"), []byte("the body"), vfs.WriteOptions{})
	require.NoError(t, err)
	untargeted := `{"workspaceVersion":1,"artifacts":[{"id":"main","path":"output/main.md","required":true}],` +
		`"commitPolicy":{"defaultTarget":"message_body"}}`
	require.NoError(t, src.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE runs SET manifest = ? WHERE id = 'r1'`, untargeted)
		return err
	}))
	var buf bytes.Buffer
	_, err = src.Archive.Export(ctx, &buf, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	dst := open(t)
	_, err = dst.Archive.Import(ctx, bytes.NewReader(buf.Bytes()), archive.Options{})
	require.NoError(t, err)

	m, err := dst.Runs.Manifest(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, m.Artifacts, 1)
	assert.Equal(t, runs.Target{Kind: runs.TargetMessageBody}, m.Artifacts[0].Target)
	rec, err := dst.Runs.Commit(ctx, "r1", runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}), runs.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, "the body", rec.Message.Body)
}
