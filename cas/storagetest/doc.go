// Package storagetest holds what every cas.Storage implementation is
// tested with: Run, the conformance suite each implementation must pass,
// and NewFaulty, a wrapper that makes chosen calls of any implementation
// fail (or hand back altered bytes) so that tests of the layers above can
// prove what a storage fault does to them. It is imported by tests only.
//
// The suite treats objects as opaque, as a Storage must: it stores bytes
// that are not valid codec output, so a database it runs on is not a
// sound CAS afterwards and must not be verified as one.
package storagetest
