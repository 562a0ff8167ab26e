package vfs

// TreeLoads returns how many trees t has loaded (from its cache or the
// table), so tests can prove what a walk never opened.
func TreeLoads(t *Trees) int64 { return t.loads.Load() }

// SetTreeCacheSize replaces t's cache with an empty one holding about n
// entries (a tree counts one more than its entries).
func SetTreeCacheSize(t *Trees, n int) { t.cache = newTreeCache(n) }

// TreeCacheLen returns how many trees t's cache holds.
func TreeCacheLen(t *Trees) int {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	return len(t.cache.cur) + len(t.cache.old)
}

// EncodeTreePatch and ApplyTreePatch expose the patch codec; patches are
// numbered 1.
func EncodeTreePatch(old, cur []Entry) []byte { return encodePatch(old, cur, 1) }

func ApplyTreePatch(base []Entry, patch []byte) ([]Entry, error) { return applyPatch(base, patch) }

// MaxPatchDepth is the longest chain of patches a store writes.
const MaxPatchDepth = maxPatchDepth

// RowRefKeys returns the tree_refs keys a tree row (data, base) lists.
func RowRefKeys(data, base []byte) ([]int64, error) {
	refs, err := rowRefs(data, base)
	return uniqueRefs(refs), err
}

// RefBatchMax is the most tree_refs pairs one statement inserts.
const RefBatchMax = refBatchMax
