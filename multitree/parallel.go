package multitree

import (
	"sync"
	"sync/atomic"
)

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
