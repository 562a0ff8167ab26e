// Package wserr defines the store's one structured error type.
//
// An *Error carries a stable Code, the operation and the workspace path it
// concerns, and the error that caused it. Codes fall in two classes, as the
// agent runtime needs them: model-correctable codes (a bad path, a patch that
// does not match) leave the run going and are reported back to the model;
// host-level codes (corruption, a failed journal write, a conflict) fail the
// run. Every package returns *Error for conditions a caller must tell apart,
// and callers test them with errors.Is(err, &wserr.Error{Code: ...}),
// errors.As, or CodeOf.
package wserr
