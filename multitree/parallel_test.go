package multitree

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

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
