// Package protocol implements the host protocol: the JSON requests hosts
// written in other languages send, one per line, and the response each
// gets. wsctl batch serves it over standard input and output.
//
// It owns the op table (every operation, its request fields and its help,
// written once), the request and response types, strict decoding, and
// the tables that map error codes to exit statuses and to HTTP statuses.
// A Session holds what a conversation with a host holds: the store it
// acts on (a Backend, small interfaces over runs and the journal) and the
// run later requests act on by default.
//
// Guarantees: Session.Handle answers every line with exactly one Response
// and never panics (a panic becomes store.internal). A line is read once,
// byte by byte, into a tree that decoding then walks: field names are
// case-sensitive and unknown ones refused at every level, no object holds
// a key twice, strings hold no lone surrogate escape, values have the JSON
// type their field needs, and nothing nests over 64 levels; a request that
// breaks a rule is refused whole, before it acts. The work and memory a
// line costs grow with its length only, not with its depth.
//
// A transport that writes responses where the host reads them uses
// Session.HandleTo: the response of a commit, which delivers its message
// into the host's chat, is written from the commit's sink, so the commit
// is completed only once the host could have it. Handle, which returns
// every response, records such a commit completed before returning it.
package protocol
