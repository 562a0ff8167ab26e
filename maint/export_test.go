package maint

// SetSpillAfter sets how many objects a work set holds in memory before it
// spills to disk, and returns a function that restores the setting.
func SetSpillAfter(n int) (restore func()) {
	old := spillAfter
	spillAfter = n
	return func() { spillAfter = old }
}
