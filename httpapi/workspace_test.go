package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
)

func TestHealthzNeedsNoToken(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	resp, b := s.do(http.MethodGet, s.url("/healthz"), "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"ok":true}`, string(b))
}

func TestWorkspaceEndpoints(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	up := func(actor, path, content string) map[string]any {
		return s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", actor, "path", path), strings.NewReader(content))
	}

	t.Run("Upload", func(t *testing.T) {
		c := up("alice", "reports/weekly.md", "weekly")
		assert.Equal(t, "upload", c["op"])
		assert.Equal(t, float64(1), c["seq"])
		up("alice", "reports/daily.md", "daily")
		up("alice", "notes/meeting.md", "meeting")
		up("alice", "temp/a.txt", "a")
		up("alice", "temp/b.txt", "b")
		up("bob", "drafts/contract-v2.md", "contract")
	})
	t.Run("UploadMultipart", func(t *testing.T) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		require.NoError(t, mw.WriteField("note", "ignored"))
		fw, err := mw.CreateFormFile("file", "x.bin")
		require.NoError(t, err)
		_, _ = fw.Write([]byte("from a form"))
		require.NoError(t, mw.Close())
		resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "bob", "path", "form.bin"), s.full, &body,
			"Content-Type", mw.FormDataContentType())
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		_, got := s.do(http.MethodGet, s.url("/workspace/file", "actor", "bob", "path", "form.bin"), s.full, nil)
		assert.Equal(t, "from a form", string(got))
	})
	t.Run("Files", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/workspace/files", "actor", "alice", "path", "reports/", "depth", "2"), nil)
		var paths []string
		for _, e := range m["entries"].([]any) {
			paths = append(paths, e.(map[string]any)["path"].(string))
		}
		assert.Equal(t, []string{"reports/daily.md", "reports/weekly.md"}, paths)
		m = s.okJSON(http.MethodGet, s.url("/workspace/files", "actor", "alice"), nil)
		assert.Len(t, m["entries"], 3, "depth 1 by default: notes, reports, temp")
		m = s.okJSON(http.MethodGet, s.url("/workspace/files", "actor", "carol"), nil)
		assert.Empty(t, m["entries"], "an actor with no space lists nothing")
		assert.Equal(t, false, m["more"])
		// pages of two, each after the last path of the one before
		var got []string
		after := ""
		for {
			m = s.okJSON(http.MethodGet, s.url("/workspace/files", "actor", "alice", "depth", "2", "limit", "2", "after", after), nil)
			es := m["entries"].([]any)
			require.LessOrEqual(t, len(es), 2)
			for _, e := range es {
				got = append(got, e.(map[string]any)["path"].(string))
			}
			if m["more"] != true {
				break
			}
			after = got[len(got)-1]
		}
		assert.Equal(t, []string{"notes", "notes/meeting.md", "reports", "reports/daily.md", "reports/weekly.md", "temp", "temp/a.txt", "temp/b.txt"}, got)
		resp, b := s.do(http.MethodGet, s.url("/workspace/files", "actor", "alice", "limit", "-2"), s.full, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
	})
	t.Run("FilesOfTheRoot", func(t *testing.T) {
		// Every spelling of the root lists it, "./" as "." and "/" do;
		// "./reports" is reports.
		for _, root := range []string{"", ".", "/", "./", "./.", ".//"} {
			m := s.okJSON(http.MethodGet, s.url("/workspace/files", "actor", "alice", "path", root), nil)
			assert.Len(t, m["entries"], 3, "%q: notes, reports, temp", root)
		}
		m := s.okJSON(http.MethodGet, s.url("/workspace/files", "actor", "alice", "path", "./reports"), nil)
		assert.Len(t, m["entries"], 2)
		for _, bad := range []string{"..", "./..", "/reports"} {
			resp, b := s.do(http.MethodGet, s.url("/workspace/files", "actor", "alice", "path", bad), s.full, nil)
			assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%q: %s", bad, b)
			assert.Equal(t, "workspace.invalid_path", errCode(t, b), "%q", bad)
		}
	})
	t.Run("FilesBadDepth", func(t *testing.T) {
		resp, b := s.do(http.MethodGet, s.url("/workspace/files", "actor", "alice", "depth", "x"), s.full, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
	})
	t.Run("Download", func(t *testing.T) {
		resp, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "reports/weekly.md"), s.full, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "weekly", string(b))
		assert.Equal(t, "6", resp.Header.Get("Content-Length"))
		assert.Contains(t, resp.Header.Get("Content-Type"), "markdown")
		etag := resp.Header.Get("ETag")
		require.NotEmpty(t, etag)
		resp, _ = s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "reports/weekly.md"), s.full, nil, "If-None-Match", etag)
		assert.Equal(t, http.StatusNotModified, resp.StatusCode)
		resp, b = s.do(http.MethodHead, s.url("/workspace/file", "actor", "alice", "path", "reports/weekly.md"), s.full, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, b)
	})
	t.Run("DownloadErrors", func(t *testing.T) {
		for _, tc := range []struct {
			name, actor, path string
			status            int
			code              string
		}{
			{"FileNotFound", "alice", "nope.md", http.StatusNotFound, "workspace.file_not_found"},
			{"PathIsDirectory", "alice", "reports", http.StatusUnprocessableEntity, "workspace.path_is_directory"},
			{"InvalidPath", "alice", "../etc/passwd", http.StatusUnprocessableEntity, "workspace.invalid_path"},
			{"InvalidActor", "../x", "a", http.StatusUnprocessableEntity, "workspace.invalid_actor"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", tc.actor, "path", tc.path), s.full, nil)
				assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
				assert.Equal(t, tc.code, errCode(t, b))
				assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
			})
		}
	})
	t.Run("Stats", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "alice"), nil)
		assert.Equal(t, float64(5), m["files"])
	})
	t.Run("DeleteFile", func(t *testing.T) {
		c := s.okJSON(http.MethodDelete, s.url("/workspace/file", "actor", "alice", "path", "notes/meeting.md"), nil)
		assert.Equal(t, "delete", c["op"])
		resp, _ := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "notes/meeting.md"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
	t.Run("DeleteByPrefix", func(t *testing.T) {
		c := s.okJSON(http.MethodDelete, s.url("/workspace/delete-by-prefix", "actor", "alice", "prefix", "temp/"), nil)
		assert.Equal(t, float64(2), c["files"])
		m := s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "alice"), nil)
		assert.Equal(t, float64(2), m["files"])
	})
	t.Run("GC", func(t *testing.T) {
		m := s.okJSON(http.MethodPost, s.url("/workspace/gc", "actor", "alice"), nil)
		assert.Contains(t, m, "pruned")
		assert.Contains(t, m, "gc")
		m = s.okJSON(http.MethodPost, s.url("/workspace/gc"), nil)
		assert.Contains(t, m, "pruned")
		_, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "reports/weekly.md"), s.full, nil)
		assert.Equal(t, "weekly", string(b), "gc keeps live files")

		// A token limited to alice prunes her versions, and does not run
		// the store's collection, which reaches every actor's content.
		alice := s.token(tokens.Spec{Name: "alice", Actors: []string{"alice"}})
		resp, b := s.do(http.MethodPost, s.url("/workspace/gc", "actor", "alice"), alice, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Contains(t, got, "pruned")
		assert.NotContains(t, got, "gc")
	})
	t.Run("UnknownEndpoint", func(t *testing.T) {
		resp, b := s.do(http.MethodGet, s.url("/workspace/nope"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, "http.not_found", errCode(t, b))
	})
}

// TestUploadLimit: MaxUploadBytes bounds the file an upload stores,
// sent as the body or as a multipart form's file (whose form around it
// does not count); a larger one is 422 and stores nothing.
func TestUploadLimit(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxUploadBytes: 1000})
	upload := func(path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
		return s.do(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", path), s.full, body, hdr...)
	}
	form := func(content []byte) (io.Reader, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		require.NoError(t, mw.WriteField("note", "a field before the file"))
		fw, err := mw.CreateFormFile("file", "f.bin")
		require.NoError(t, err)
		_, err = fw.Write(content)
		require.NoError(t, err)
		require.NoError(t, mw.Close())
		return &buf, mw.FormDataContentType()
	}
	resp, b := upload("big", storetest.Text(5000))
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	assert.Equal(t, "workspace.size_limit_exceeded", errCode(t, b))
	for _, n := range []int{1001, 5000} {
		body, ct := form(bytes.Repeat([]byte("x"), n))
		resp, b = upload("big", body, "Content-Type", ct)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "a form's file of %d bytes: %s", n, b)
		assert.Equal(t, "workspace.size_limit_exceeded", errCode(t, b))
	}
	m := s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "a"), nil)
	assert.Equal(t, float64(0), m["files"], "nothing was stored")

	resp, b = upload("raw", bytes.NewReader(bytes.Repeat([]byte("r"), 1000)))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a body of the limit: %s", b)
	body, ct := form(bytes.Repeat([]byte("f"), 1000))
	resp, b = upload("form", body, "Content-Type", ct)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a form's file of the limit, the form beside it: %s", b)
	resp, b = s.do(http.MethodGet, s.url("/workspace/file", "actor", "a", "path", "form"), s.full, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, bytes.Repeat([]byte("f"), 1000), b)

	// The largest limit there is takes a form too.
	huge := newServer(t, httpapi.Options{MaxUploadBytes: math.MaxInt64})
	body, ct = form([]byte("anything"))
	resp, b = huge.do(http.MethodPost, huge.url("/workspace/upload", "actor", "a", "path", "form"), huge.full, body, "Content-Type", ct)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}

func TestCORS(t *testing.T) {
	t.Run("OffByDefault", func(t *testing.T) {
		s := newServer(t, httpapi.Options{})
		resp, _ := s.do(http.MethodGet, s.url("/workspace/stats", "actor", "a"), s.full, nil, "Origin", "http://app.example")
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		resp, _ = s.do(http.MethodOptions, s.url("/workspace/stats"), "", nil, "Origin", "http://app.example", "Access-Control-Request-Method", "GET")
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("Configured", func(t *testing.T) {
		s := newServer(t, httpapi.Options{CORSOrigins: []string{"http://app.example"}})
		resp, _ := s.do(http.MethodGet, s.url("/workspace/stats", "actor", "a"), s.full, nil, "Origin", "http://app.example")
		assert.Equal(t, "http://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
		resp, _ = s.do(http.MethodOptions, s.url("/workspace/stats"), "", nil, "Origin", "http://app.example", "Access-Control-Request-Method", "GET")
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		for _, h := range []string{"Authorization", "Range", "If-Range", "If-Match", "If-None-Match"} {
			assert.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), h, "a browser may send it")
		}
		resp, _ = s.do(http.MethodGet, s.url("/workspace/stats", "actor", "a"), s.full, nil, "Origin", "http://app.example")
		for _, h := range []string{"ETag", "Content-Range", "Accept-Ranges", "Retry-After", "Allow"} {
			assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), h, "a page may read it")
		}
		resp, _ = s.do(http.MethodGet, s.url("/workspace/stats", "actor", "a"), s.full, nil, "Origin", "http://evil.example")
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	})
}

// TestUncleanPathsAreJSON: a path with an empty, "." or ".." segment is
// answered 400 in JSON, not redirected with an HTML 307 (which took
// /v1/runs/../../etc/passwd to /etc/passwd).
func TestUncleanPathsAreJSON(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, p := range []string{"/workspace//files", "/workspace/./files", "/v1/runs/../../etc/passwd", "/workspace/files/."} {
		req, err := http.NewRequest(http.MethodGet, s.srv.URL+p+"?actor=alice", nil)
		require.NoError(t, err)
		req.URL.Opaque = p // sent as it is, unclean
		req.Header.Set("Authorization", "Bearer "+s.full)
		client := *s.srv.Client()
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := client.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", p, b)
		assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), p)
	}
}

// TestConditionalWrites: an upload or a delete with If-Match (the ETag a
// download gave) or If-None-Match: * changes the file only when the
// condition holds, and otherwise answers 412 with the coded error and
// changes nothing.
func TestConditionalWrites(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	file := s.url("/workspace/file", "actor", "alice", "path", "notes.md")
	upload := s.url("/workspace/upload", "actor", "alice", "path", "notes.md")
	put := func(content string, hdr ...string) (int, []byte) {
		resp, b := s.do(http.MethodPost, upload, s.full, strings.NewReader(content), hdr...)
		return resp.StatusCode, b
	}
	current := func() (string, string) {
		resp, b := s.do(http.MethodGet, file, s.full, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		return resp.Header.Get("ETag"), string(b)
	}

	code, b := put("first", "If-None-Match", "*")
	require.Equal(t, http.StatusOK, code, "%s", b)
	etag, _ := current()
	code, b = put("again", "If-None-Match", "*")
	assert.Equal(t, http.StatusPreconditionFailed, code)
	assert.Equal(t, "workspace.write_stale_file", errCode(t, b))

	code, b = put("second", "If-Match", etag)
	require.Equal(t, http.StatusOK, code, "%s", b)
	newTag, content := current()
	assert.Equal(t, "second", content)
	// An entity tag matches only as the download gave it: a strong
	// comparison, so the hash in capitals or quoted twice is another tag.
	for _, stale := range []string{etag, "W/" + newTag, `"not-a-hash"`, strings.Trim(newTag, `"`), strings.ToUpper(newTag), `"` + newTag + `"`} {
		code, b = put("third", "If-Match", stale)
		assert.Equal(t, http.StatusPreconditionFailed, code, "If-Match %s: %s", stale, b)
		assert.Equal(t, "workspace.write_stale_file", errCode(t, b))
	}
	for _, hdr := range [][]string{{"If-Match", etag + ", " + newTag}, {"If-None-Match", newTag},
		// A header's lines are one list, whichever tag comes first.
		{"If-Match", newTag, "If-Match", etag}, {"If-Match", etag, "If-Match", newTag},
		{"If-None-Match", "*", "If-None-Match", newTag}} {
		code, b = put("third", hdr...)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %s", hdr, b)
	}
	_, content = current()
	assert.Equal(t, "second", content, "no refused upload changed the file")
	code, b = put("by star", "If-Match", "*")
	require.Equal(t, http.StatusOK, code, "%s", b)
	resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "new.md"), s.full,
		strings.NewReader("x"), "If-Match", "*")
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "If-Match * with no file there: %s", b)

	starTag, _ := current()
	resp, b = s.do(http.MethodDelete, file, s.full, nil, "If-Match", newTag)
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s", b)
	_, content = current()
	assert.Equal(t, "by star", content)
	resp, b = s.do(http.MethodDelete, file, s.full, nil, "If-Match", starTag)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	resp, _ = s.do(http.MethodGet, file, s.full, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	// Without conditions nothing changes: a plain upload still answers 200.
	code, b = put("plain")
	assert.Equal(t, http.StatusOK, code, "%s", b)

	// If-Match: * asks for a file: a directory there fails it, and stays.
	resp, b = s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "dir/a.md"), s.full, strings.NewReader("a"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	dir := s.url("/workspace/file", "actor", "alice", "path", "dir")
	resp, b = s.do(http.MethodDelete, dir, s.full, nil, "If-Match", "*")
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s", b)
	assert.Equal(t, "workspace.write_stale_file", errCode(t, b))
	resp, b = s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "dir/a.md"), s.full, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}

// TestQueryStringsParseOrAreRefused: a query string with a pair that does
// not parse (a ";" separator, a bad "%" escape) is 400 on every endpoint,
// and an endpoint that changes the store refuses a parameter it does not
// take; a gc meant for one actor never prunes another's history, and a
// misspelled keepVersions is not read as its default.
func TestQueryStringsParseOrAreRefused(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, actor := range []string{"alice", "bob"} {
		for v := range 4 {
			s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", actor, "path", "f.txt"), strings.NewReader(fmt.Sprint(v)))
		}
	}
	versions := func(actor string) float64 {
		return s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", actor), nil)["versions"].(float64)
	}
	require.Equal(t, 4.0, versions("bob"))
	for _, tc := range []struct{ method, query string }{
		{http.MethodPost, "/workspace/gc?actor=alice;keepVersions=3"},
		{http.MethodPost, "/workspace/gc?actor=alice%zz&keepVersions=3"},
		{http.MethodPost, "/workspace/gc?actor=alice&keep=3"},
		{http.MethodPost, "/workspace/gc?actor=&actor=alice&keepVersions=3"},
		{http.MethodPost, "/workspace/upload?actor=alice&path=notes;v2.md"},
		{http.MethodDelete, "/workspace/file?actor=alice&path=f.txt&force=1"},
		{http.MethodGet, "/workspace/files?actor=alice&path=%zz"},
	} {
		resp, b := s.do(tc.method, s.srv.URL+tc.query, s.full, strings.NewReader("x"))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", tc.method, tc.query, b)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b), tc.query)
	}
	assert.Equal(t, 4.0, versions("alice"), "nothing pruned")
	assert.Equal(t, 4.0, versions("bob"), "nothing pruned")
	resp, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "f.txt"), s.full, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "3", string(b), "nothing deleted")
	// A read takes what it does not know (a browser's cache buster).
	resp, _ = s.do(http.MethodGet, s.srv.URL+"/workspace/files?actor=alice&_=1733000000", s.full, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestRefusedUploadReadsNoBody: an upload the store refuses before its
// content (a stale If-None-Match, a bad path, a bad actor) answers without
// reading a byte of the body, whatever its size: a client that sent
// Expect: 100-continue sends none.
func TestRefusedUploadReadsNoBody(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "there.md"), strings.NewReader("x"))
	for _, tc := range []struct {
		name, url string
		hdr       []string
		status    int
	}{
		{"Stale", s.url("/workspace/upload", "actor", "alice", "path", "there.md"), []string{"If-None-Match", "*"}, http.StatusPreconditionFailed},
		{"BadPath", s.url("/workspace/upload", "actor", "alice", "path", "../x"), nil, http.StatusUnprocessableEntity},
		{"BadActor", s.url("/workspace/upload", "actor", "al/ice", "path", "x.md"), nil, http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int64{10, 5 << 20} {
				body := &countingBody{r: io.LimitReader(zeros{}, size)}
				req := httptest.NewRequest(http.MethodPost, tc.url, body)
				req.Header.Set("Authorization", "Bearer "+s.full)
				for i := 0; i+1 < len(tc.hdr); i += 2 {
					req.Header.Set(tc.hdr[i], tc.hdr[i+1])
				}
				rec := httptest.NewRecorder()
				s.h.ServeHTTP(rec, req)
				assert.Equal(t, tc.status, rec.Code, "%d bytes: %s", size, rec.Body)
				assert.Zero(t, body.n, "%d bytes: bytes of the body read", size)
			}
		})
	}
}

// TestSpoolFailureIsCoded: when the copy of a large upload kept for
// retries cannot be made (here: its directory is not one, which is the
// server's problem, store.internal; a full disk is store.disk_full,
// TestSpoolFullDisk), the upload fails naming the spool and changes
// nothing; a small upload needs no file.
func TestSpoolFailureIsCoded(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o644))
	s := newServer(t, httpapi.Options{SpoolDir: notADir})
	resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "big.bin"), s.full,
		io.LimitReader(zeros{}, 3<<20))
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), "spool the body")
	resp, _ = s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "big.bin"), s.full, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "nothing stored")
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "small.md"), strings.NewReader("fits in memory"))
}

// TestCORSExposesWhatAHostReads: each header a download or an export
// carries for a host to read (the file's ETag and hash, its ranges, an
// export's file name in Content-Disposition) is exposed to a page of an
// allowed origin; Content-Disposition was not, so a page could not read
// the file name.
func TestCORSExposesWhatAHostReads(t *testing.T) {
	s := newServer(t, httpapi.Options{CORSOrigins: []string{"http://app.example"}})
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), strings.NewReader("one"))
	for _, c := range []struct {
		path    string
		kv      []string
		headers []string
	}{
		{"/workspace/file", []string{"actor", "alice", "path", "a.md"}, []string{"ETag", "X-Content-Hash", "Accept-Ranges", "Content-Length"}},
		{"/v1/export", []string{"actor", "alice"}, []string{"Content-Disposition"}},
	} {
		resp, b := s.do(http.MethodGet, s.url(c.path, c.kv...), s.full, nil, "Origin", "http://app.example")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.path, b)
		exposed := strings.Split(resp.Header.Get("Access-Control-Expose-Headers"), ", ")
		for _, h := range c.headers {
			require.NotEmpty(t, resp.Header.Get(h), "%s carries %s", c.path, h)
			assert.Contains(t, exposed, h, "%s: a page may read %s", c.path, h)
		}
	}
}
