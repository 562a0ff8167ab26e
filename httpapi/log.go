package httpapi

import (
	"fmt"
	"net/http"
	"time"
)

// logWriter records what a response sent, for the access log.
type logWriter struct {
	http.ResponseWriter
	status  int
	bytes   int64
	written bool
	token   string // the id of the token that authenticated the request
	// aborted is why the answer was cut short after its status went
	// out (a stream that failed midway), for the log line.
	aborted error
	// answering, if set, is called as the answer starts to go out
	// (Handler.answerWindow).
	answering func()
}

func (w *logWriter) WriteHeader(status int) {
	if !w.written {
		w.status, w.written = status, true
		if w.answering != nil {
			w.answering()
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *logWriter) Write(b []byte) (int, error) {
	if !w.written && w.answering != nil {
		w.answering()
	}
	w.written = true
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush sends what is buffered: server-sent events need it.
func (w *logWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is Flush that says whether what was buffered went out, so
// http.ResponseController.Flush reports a connection gone (a commit's
// response is its delivery).
func (w *logWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequest writes the access log line of r: when, who, what, how it
// ended. The token is named by its id, never its secret.
func (h *Handler) logRequest(r *http.Request, w *logWriter, start time.Time) {
	tok := w.token
	if tok == "" {
		tok = "-"
	}
	aborted := ""
	if w.aborted != nil {
		aborted = fmt.Sprintf(" aborted=%q", w.aborted.Error())
	}
	fmt.Fprintf(h.opts.AccessLog, "%s %s %s %q %d %d %s token=%s%s\n",
		start.UTC().Format(time.RFC3339Nano), r.RemoteAddr, r.Method, r.URL.RequestURI(),
		w.status, w.bytes, time.Since(start).Round(time.Microsecond), tok, aborted)
}
