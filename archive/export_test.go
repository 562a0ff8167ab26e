package archive

// SetSpillAfter makes the sets of exports and imports, and the lists of
// the rows a merge keeps, move to disk past n entries, and returns what
// puts the limits back.
func SetSpillAfter(n int) (restore func()) {
	old, oldMerge := spillAfter, mergeSpillAfter
	spillAfter, mergeSpillAfter = n, n
	return func() { spillAfter, mergeSpillAfter = old, oldMerge }
}
