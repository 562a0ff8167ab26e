// Package httpapi implements the store's HTTP API, the one wsctl serve
// serves, as an http.Handler a Go host can mount in its own server:
//
//   - seed 004's Workspace API on actor spaces: GET /workspace/files,
//     GET /workspace/file, POST /workspace/upload, DELETE /workspace/file,
//     GET /workspace/stats, POST /workspace/gc and
//     DELETE /workspace/delete-by-prefix, with the seed's query parameters;
//   - the host protocol's whole op table: POST /v1/op takes one request
//     object and answers one response object, as wsctl batch does, with
//     the HTTP status of its code (export and import, which name files on
//     the host, as streams instead: GET /v1/export answers an archive,
//     POST /v1/import takes one);
//   - read-only views of a run a browser can use without the protocol:
//     the run, its checkpoints, its files and a file at a checkpoint, a
//     diff, the journal paged, and a follow of the journal (server-sent
//     events, or a long poll);
//   - GET /healthz, the one endpoint that needs no token.
//
// Guarantees:
//   - Every endpoint but /healthz answers 401 without a valid bearer token
//     (package tokens), and 403 when the token may not do what is asked:
//     a read-only token changing anything (the op table says which ops
//     read), a token limited to actors
//     touching another actor's space or any run. The check runs before
//     the request touches the store.
//   - Uploads, downloads, exports and imports stream: memory stays
//     bounded whatever the size. A download's ETag is its content hash;
//     one byte range is read alone (206), from the chunks that hold it.
//     An upload or a delete with If-Match or If-None-Match: * changes
//     the file only if the condition holds, else answers 412.
//   - Every error body is {"error": {"code", "message"}}, its status from
//     protocol.HTTPStatus, the one table beside the exit statuses.
//   - A busy store is retried with backoff within Options.BusyDeadline,
//     never answered while the deadline lasts; a body too large to hold
//     (an upload, an import) is spooled to disk so it can be sent again. Each request commits whole
//     or not at all, as its operation does.
//   - Over HTTP there is no current run: each op request is handled by a
//     session of its own, so a request names its run ("runId").
package httpapi
