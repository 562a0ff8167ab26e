// Package synctests_test holds the tests of a whole store moving through
// an object store: sync and pull (sync.go in the root package) and a
// database replicated and restored (remote/replica) under a store that
// keeps its blobs there. They need a tier, the in-process fake or
// moto_server, and run as a test binary of their own, beside the root
// package's.
package synctests_test
