package archive

// SetSpillAfter makes the sets of exports and imports move to disk past n
// addresses, and returns what puts the limit back.
func SetSpillAfter(n int) (restore func()) {
	old := spillAfter
	spillAfter = n
	return func() { spillAfter = old }
}
