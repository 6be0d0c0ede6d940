package multitree

import (
	"fmt"
	"maps"
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

// TestParallelTasks: every call runs once, and a task a call hands over
// runs on another worker while the call waits for it, also when it is
// handed by the only call or the last one; with one worker, the calls run
// in order on the calling goroutine and the tasks are dropped.
func TestParallelTasks(t *testing.T) {
	for _, c := range []struct{ n, workers int }{{1, 2}, {3, 2}, {5, 3}, {2, 8}} {
		calls := make([]atomic.Int64, c.n)
		var tasks atomic.Int64
		parallelTasks(c.n, c.workers, func(i int, spawn func(func())) {
			calls[i].Add(1)
			if i != c.n-1 && i != 0 {
				return
			}
			ran := make(chan struct{})
			spawn(func() { tasks.Add(1); close(ran) })
			select {
			case <-ran: // another worker took it
			case <-time.After(time.Minute):
				t.Errorf("n %d, workers %d: call %d's task did not run", c.n, c.workers, i)
			}
		})
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Errorf("n %d, workers %d: call %d ran %d times", c.n, c.workers, i, got)
			}
		}
		if want := int64(min(c.n, 2)); tasks.Load() != want {
			t.Errorf("n %d, workers %d: %d tasks ran, want %d", c.n, c.workers, tasks.Load(), want)
		}
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
