package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/runs"
)

// TestUploadOfStoredContentUnderTheStoreCap: with less room left under
// the store cap than a file's size, an upload of content the store holds
// already is not refused: the same bytes again (a retry: seq 0) and to a
// new path, as a body of known length, as a chunked body and as an
// actor.upload; new content of that size is 422.
func TestUploadOfStoredContentUnderTheStoreCap(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	content := make([]byte, 1_000_000)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(content)
	upload := func(path string, body io.Reader) (int, map[string]any) {
		resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", path), s.full, body)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		return resp.StatusCode, m
	}
	status, m := upload("r.bin", bytes.NewReader(content))
	require.Equal(t, http.StatusOK, status, "%v", m)
	used, err := s.st.DB.UsedBytes(t.Context())
	require.NoError(t, err)
	limit := used + 500_000
	require.NoError(t, s.st.Runs.SetPolicy(t.Context(), runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))

	chunked := func() io.Reader { return struct{ io.Reader }{bytes.NewReader(content)} } // no length: chunked
	for _, path := range []string{"r.bin", "r2.bin"} {
		status, m = upload(path, bytes.NewReader(content))
		assert.Equal(t, http.StatusOK, status, "%s, Content-Length: %v", path, m)
		status, m = upload(path, chunked())
		assert.Equal(t, http.StatusOK, status, "%s, chunked: %v", path, m)
		status, m = s.op(s.full, map[string]any{"op": "actor.upload", "actor": "alice", "path": path,
			"contentBase64": base64.StdEncoding.EncodeToString(content)})
		assert.Equal(t, http.StatusOK, status, "%s, actor.upload: %v", path, m)
	}
	status, m = upload("r.bin", bytes.NewReader(content))
	require.Equal(t, http.StatusOK, status, "%v", m)
	assert.Equal(t, float64(0), m["seq"], "a retry records nothing: %v", m)

	fresh := bytes.Clone(content)
	fresh[0] ^= 1
	status, m = upload("r3.bin", bytes.NewReader(fresh))
	assert.Equal(t, http.StatusUnprocessableEntity, status)
	assert.Equal(t, "workspace.size_limit_exceeded", m["error"].(map[string]any)["code"], "%v", m)
}
