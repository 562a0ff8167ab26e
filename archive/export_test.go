package archive

// SetSpillAfter makes the sets of exports and imports, and the lists of
// the rows a merge keeps, move to disk past n entries, and returns what
// puts the limits back.
func SetSpillAfter(n int) (restore func()) {
	old, oldMerge := spillAfter, mergeSpillAfter
	spillAfter, mergeSpillAfter = n, n
	return func() { spillAfter, mergeSpillAfter = old, oldMerge }
}

// SetTreeBatch makes an import store its trees n at a time or bytes of
// them at a time, whichever comes first, and returns what puts the
// limits back.
func SetTreeBatch(n, bytes int) (restore func()) {
	old, oldBytes := treeBatch, treeBatchBytes
	treeBatch, treeBatchBytes = n, bytes
	return func() { treeBatch, treeBatchBytes = old, oldBytes }
}
