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
