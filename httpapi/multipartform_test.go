package httpapi_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestMultipartFormBeforeTheFile: a form whose fields before its file
// run past what the server takes around a file is refused for its size,
// 422 workspace.size_limit_exceeded naming the form's bound, not as a
// form that holds no file; a form cut short before its file says so.
// Neither stores anything.
func TestMultipartFormBeforeTheFile(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxUploadBytes: 1000})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	require.NoError(t, mw.WriteField("note", strings.Repeat("n", 70<<10)))
	fw, err := mw.CreateFormFile("file", "f.bin")
	require.NoError(t, err)
	_, err = fw.Write([]byte("small"))
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	form := buf.Bytes()

	resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "f.bin"), s.full, bytes.NewReader(form),
		"Content-Type", mw.FormDataContentType())
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s", b)
	assert.Equal(t, "workspace.size_limit_exceeded", errCode(t, b))
	assert.Contains(t, string(b), "65536 bytes of form", "%s", b)

	// Cut in the field before the file: the form ends early.
	open := newServer(t, httpapi.Options{})
	resp, b = open.do(http.MethodPost, open.url("/workspace/upload", "actor", "a", "path", "f.bin"), open.full, bytes.NewReader(form[:1000]),
		"Content-Type", mw.FormDataContentType())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
	assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
	assert.NotContains(t, string(b), "holds no file part", "%s", b)

	for _, srv := range []*server{s, open} {
		m := srv.okJSON(http.MethodGet, srv.url("/workspace/stats", "actor", "a"), nil)
		assert.Equal(t, float64(0), m["files"], "nothing was stored")
	}
}
