package multitree

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

func TestLargestFirst(t *testing.T) {
	trees := map[string]*memiavl.Tree{}
	for name, n := range map[string]int{"a": 3, "b": 10, "c": 0, "d": 10, "e": 1} {
		tr, err := memiavl.New(memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, err := tr.Set([]byte(fmt.Sprint(i)), []byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		trees[name] = tr
	}
	names := []string{"e", "c", "a", "d", "b"}
	largestFirst(names, trees)
	if want := []string{"b", "d", "a", "e", "c"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
}

func TestParallelRunsEveryCallInOrderOfStart(t *testing.T) {
	for _, workers := range []int{1, 2, 5} {
		var started atomic.Int64
		order := make([]int64, 7)
		parallel(len(order), workers, func(i int) { order[i] = started.Add(1) })
		if workers == 1 {
			// on the calling goroutine, strictly in index order
			for i, o := range order {
				if o != int64(i+1) {
					t.Fatalf("workers 1: call %d started %d-th", i, o)
				}
			}
		}
		if started.Load() != int64(len(order)) {
			t.Fatalf("workers %d: %d calls, want %d", workers, started.Load(), len(order))
		}
	}
}

// TestParallelTasks: every call runs once and every handed task once, the
// calls running their tasks themselves when no worker has started them, as
// the split write does; a task handed by the only call runs on the other
// worker while the call waits for it (given two processors); with one
// worker, the calls run in order on the calling goroutine and the tasks are
// dropped.
func TestParallelTasks(t *testing.T) {
	for _, c := range []struct{ n, workers int }{{3, 2}, {5, 3}, {2, 8}, {7, 2}} {
		calls := make([]atomic.Int64, c.n)
		runs := make([]atomic.Int64, c.n)
		parallelTasks(c.n, c.workers, func(i int, spawn func(func())) {
			calls[i].Add(1)
			var claimed atomic.Bool
			done := make(chan struct{})
			task := func() {
				if claimed.CompareAndSwap(false, true) {
					runs[i].Add(1)
					close(done)
				}
			}
			spawn(task)
			for range 100 { // the call's own work, giving workers a chance
				runtime.Gosched()
			}
			task() // here, unless a worker has started it
			<-done
		})
		for i := range calls {
			if calls[i].Load() != 1 || runs[i].Load() != 1 {
				t.Errorf("n %d, workers %d: call %d ran %d times, its task %d", c.n, c.workers, i, calls[i].Load(), runs[i].Load())
			}
		}
	}

	// the only call's task finds the other worker; with one processor
	// (GOMAXPROCS=1) there is one worker, and the task is dropped
	twoProcs := runtime.GOMAXPROCS(0) >= 2
	ran := false
	parallelTasks(1, 2, func(i int, spawn func(func())) {
		done := make(chan struct{})
		spawn(func() { ran = true; close(done) })
		if !twoProcs {
			return
		}
		select {
		case <-done:
		case <-time.After(time.Minute): // a deadlock guard, not a timing
			t.Error("the only call's task did not run on the other worker")
		}
	})
	if ran != twoProcs {
		t.Errorf("GOMAXPROCS %d: the only call's task ran: %v", runtime.GOMAXPROCS(0), ran)
	}

	var order []int
	parallelTasks(3, 1, func(i int, spawn func(func())) {
		order = append(order, i)
		spawn(func() { t.Error("one worker ran a handed task") })
	})
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Errorf("one worker: calls in order %v", order)
	}
}

// TestSplitStore: the largest tree's write is split when it holds more than
// a worker's share of the leaves and at least SplitMinLeaves, and there is
// more than one worker.
func TestSplitStore(t *testing.T) {
	sized := func(sizes map[string]int) map[string]*memiavl.Tree {
		trees := map[string]*memiavl.Tree{}
		for name, n := range sizes {
			tr, err := memiavl.New(memiavl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if _, err := tr.Set([]byte(fmt.Sprintf("%08d", i)), []byte{}); err != nil {
					t.Fatal(err)
				}
			}
			trees[name] = tr
		}
		return trees
	}
	const big = memiavl.SplitMinLeaves
	for _, c := range []struct {
		sizes   map[string]int
		workers int
		want    string
	}{
		{map[string]int{"a": big}, 2, "a"},
		{map[string]int{"a": big}, 1, ""},
		{map[string]int{"a": big - 1}, 2, ""},
		{map[string]int{"a": big * 3, "b": big / 2, "c": big / 2}, 2, "a"},
		{map[string]int{"a": big, "b": big/2 + 8, "c": big/2 - 8}, 2, ""}, // half exactly
		{map[string]int{"a": big + 1, "b": big/2 + 8, "c": big/2 - 8}, 2, "a"},
		{map[string]int{"a": big, "b": big}, 2, ""},
		{map[string]int{"a": big, "b": big}, 4, "a"},
		{map[string]int{"a": big, "b": big, "c": big}, 3, ""},
		{map[string]int{}, 2, ""},
	} {
		trees := sized(c.sizes)
		names := slices.Collect(maps.Keys(trees))
		largestFirst(names, trees)
		if got := splitStore(names, trees, c.workers); got != c.want {
			t.Errorf("sizes %v, %d workers: split %q, want %q", c.sizes, c.workers, got, c.want)
		}
	}
}
