package multitree

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// largestFirst orders names by the size of their trees, largest first (by
// name among equal sizes). parallel starts calls in index order, so the
// longest job starts first and the small ones fill the other workers: with
// fewer workers than stores, a large store started last would add its whole
// time to the wall time.
func largestFirst(names []string, trees map[string]*memiavl.Tree) {
	size := make(map[string]int64, len(names))
	for _, n := range names {
		size[n] = trees[n].Size()
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(size[b], size[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// parallel calls f(0) .. f(n-1) on up to workers goroutines, in index order
// of start, and returns when all calls have returned. With one worker or
// one call it runs them on the calling goroutine.
func parallel(n, workers int, f func(i int)) {
	workers = min(n, workers)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// splitStore returns the store whose snapshot write two goroutines share
// (memiavl.WithSplit), "" for none. names must be in largestFirst order.
// With more than one worker, it is the largest tree when that holds at
// least three quarters of all leaves: the other workers would otherwise
// idle for most of its write. With less of the state, the smaller trees
// keep the other workers busy, and splitting measured no faster (the
// right half is copied once more at the join).
func splitStore(names []string, trees map[string]*memiavl.Tree, workers int) string {
	if workers < 2 || len(names) == 0 {
		return ""
	}
	var total int64
	for _, n := range names {
		total += trees[n].Size()
	}
	if largest := trees[names[0]].Size(); largest >= memiavl.SplitMinLeaves && largest >= total-total/4 {
		return names[0]
	}
	return ""
}
