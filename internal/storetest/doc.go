// Package storetest opens throwaway stores for tests and proves them sound
// when each test ends: every store it opens gets a full CAS verify and
// SQLite's integrity and foreign-key checks in t.Cleanup, before it is
// closed. Clock is the fake clock tests inject as a store's one clock.
package storetest
