package runs

// SetPruneGap makes Prune call f between reading a chat's candidates and
// deleting them, and returns what puts the old hook back.
func SetPruneGap(f func()) (restore func()) {
	old := pruneGap
	pruneGap = f
	return func() { pruneGap = old }
}
