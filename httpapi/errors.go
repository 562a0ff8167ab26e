package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// errorBody is every error's body: {"error": {"code", "message"}}, and
// "partial" for a request whose steps committed in part before it failed
// (POST /workspace/gc): what they did, in the shape of the answer.
type errorBody struct {
	Error   protocol.ErrorBody `json:"error"`
	Partial any                `json:"partial,omitempty"`
}

// writeError answers err with its code's HTTP status (protocol.HTTPStatus)
// and the error body.
func writeError(w http.ResponseWriter, err error) {
	writeErrorPartial(w, err, nil)
}

// writeErrorPartial is writeError with the body's partial (nil: none).
func writeErrorPartial(w http.ResponseWriter, err error, partial any) {
	code := wserr.CodeOf(err)
	status := protocol.HTTPStatus(code)
	if code == wserr.Unauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wsstore"`)
	}
	retryAfter(w, code)
	writeJSON(w, status, errorBody{Error: protocol.ErrorBody{Code: code, Message: wserr.MessageOf(err)}, Partial: partial})
}

// retryAfter says when to try again (Retry-After) on a 503 store.busy:
// the store another process kept busy past the busy deadline, or no
// transfer's turn within it.
func retryAfter(w http.ResponseWriter, code wserr.Code) {
	if code == wserr.Busy {
		w.Header().Set("Retry-After", "1")
	}
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func errNoRoute(r *http.Request) error {
	return wserr.New(protocol.CodeNoEndpoint, "http", "", "no endpoint %s %s", r.Method, r.URL.Path)
}

func badRequest(format string, args ...any) error {
	return wserr.New(wserr.InvalidArgument, "http", "", format, args...)
}

func forbidden(format string, args ...any) error {
	return wserr.New(wserr.Forbidden, "auth", "", format, args...)
}

// clientBody tags the errors of reading a request's body as the client's
// (workspace.invalid_argument): a body cut short of its Content-Length, a
// broken chunked encoding, a multipart form without its closing
// boundary. Its end and the size limit (*http.MaxBytesError) pass as they
// are.
type clientBody struct {
	r    io.Reader
	what string
}

func (b clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		var mbe *http.MaxBytesError
		var we *wserr.Error
		if !errors.As(err, &mbe) && !errors.As(err, &we) {
			err = wserr.Wrap(wserr.InvalidArgument, "http", "", fmt.Errorf("%s: %w", b.what, err))
		}
	}
	return n, err
}
