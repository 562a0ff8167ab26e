package httpapi

import (
	"net/http"
	"slices"
)

// cors sets the CORS headers of a request from an allowed origin, and
// answers its preflight (returning true). With no origins configured it
// does nothing, and browsers refuse cross-origin calls.
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(h.opts.CORSOrigins) == 0 {
		return false
	}
	if !slices.Contains(h.opts.CORSOrigins, "*") && !slices.Contains(h.opts.CORSOrigins, origin) {
		return false
	}
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Add("Vary", "Origin")
	// Retry-After says when to try a busy server again, Allow what a 405
	// would take, Content-Disposition an export's file name.
	hd.Set("Access-Control-Expose-Headers", "ETag, X-Content-Hash, Content-Length, Content-Range, Accept-Ranges, Retry-After, Allow, Content-Disposition")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		hd.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE")
		// Range and If-Range for ranged downloads (a suffix range is not
		// a simple header), If-Match and If-None-Match for conditional
		// downloads and writes.
		hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID, Range, If-Range, If-Match, If-None-Match")
		hd.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}
