package actors

// SetSpacePage makes EachSpaceRecord read n actor spaces at a time, and
// returns what puts the old size back.
func SetSpacePage(n int) (restore func()) {
	old := spacePage
	spacePage = n
	return func() { spacePage = old }
}

// SetGCPage makes GC prune n spaces a transaction, and returns what puts
// the old size back.
func SetGCPage(n int) (restore func()) {
	old := gcPage
	gcPage = n
	return func() { gcPage = old }
}

// SetPruneChunk makes GC hand a space's pruned roots to the collection n
// at a time, and returns what puts the old size back.
func SetPruneChunk(n int) (restore func()) {
	old := pruneChunk
	pruneChunk = n
	return func() { pruneChunk = old }
}
