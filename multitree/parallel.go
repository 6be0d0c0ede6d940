package multitree

import (
	"cmp"
	"runtime"
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
		size[n] = sizeForOrder(trees[n])
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(size[b], size[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// sizeForOrder is t's number of keys, by which the writes are ordered and
// split, or 0 when its snapshot cannot be read: the write of t meets the
// same damage and reports it.
func sizeForOrder(t *memiavl.Tree) int64 {
	n, err := t.SizeChecked()
	if err != nil {
		return 0
	}
	return n
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

// parallelTasks is parallel for calls that hand tasks of their own to the
// workers through spawn (memiavl.WithSplitRunner): a worker takes a handed
// task before the next call, and the workers wait for tasks until every
// call has returned, so the tasks of the last calls still find a worker.
// The calls must run the tasks they handed over and nobody started (the
// split write does), and spawn may be called from any goroutine. With one
// worker, the calls run on the calling goroutine and spawn drops the
// tasks.
func parallelTasks(n, workers int, f func(i int, spawn func(task func()))) {
	// more workers than calls only help the handed tasks, which need no
	// more than the processors
	workers = min(workers, max(n, runtime.GOMAXPROCS(0)))
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i, func(func()) {})
		}
		return
	}
	if n == 0 {
		return
	}
	var (
		mu      sync.Mutex
		queue   []func()
		wake    = make(chan struct{}, workers)
		next    atomic.Int64
		pending atomic.Int64
		allDone = make(chan struct{})
		wg      sync.WaitGroup
	)
	pending.Store(int64(n))
	spawn := func(task func()) {
		mu.Lock()
		queue = append(queue, task)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default: // wake-ups are pending already
		}
	}
	take := func() func() {
		mu.Lock()
		defer mu.Unlock()
		if len(queue) == 0 {
			return nil
		}
		t := queue[0]
		queue = queue[1:]
		return t
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if t := take(); t != nil {
					t()
					continue
				}
				if i := int(next.Add(1)) - 1; i < n {
					f(i, spawn)
					if pending.Add(-1) == 0 {
						close(allDone)
					}
					continue
				}
				select {
				case <-wake:
				case <-allDone:
					return
				}
			}
		}()
	}
	wg.Wait()
}

// splitStore returns the store whose snapshot write two workers share
// (memiavl.WithSplitRunner), "" for none. names must be in largestFirst
// order.
//
// With more than one worker, it is the largest tree, of SplitMinLeaves
// leaves or more, when it holds more than a worker's share of all leaves:
// its write would otherwise outlast the others', the other workers idling
// at the end. Its right half goes to the pool with the other trees.
func splitStore(names []string, trees map[string]*memiavl.Tree, workers int) string {
	if workers < 2 || len(names) == 0 {
		return ""
	}
	var total int64
	for _, n := range names {
		total += sizeForOrder(trees[n])
	}
	if largest := sizeForOrder(trees[names[0]]); largest >= memiavl.SplitMinLeaves && largest > total/int64(workers) {
		return names[0]
	}
	return ""
}
