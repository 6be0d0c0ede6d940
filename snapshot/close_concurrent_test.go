package snapshot

import (
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
)

// TestCloseTwiceAtOnce: Close may be called more than once, also by
// two goroutines at once (the last releases of a database's generations run
// on the releasing goroutine or the unmapper's): one of them unmaps, the
// other returns at once, so no range is unmapped twice (a second munmap could
// hit a mapping made at the same address meanwhile). Meant for -race, which
// reports two Closes that both unmap. Afterwards the snapshot reads as closed
// and none of its slices is reported as mapped (Mapping).
func TestCloseTwiceAtOnce(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(5)), 200)
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, 5, 3, false, keys, values)
	n := 300
	if testing.Short() {
		n = 100
	}
	for i := 0; i < n; i++ {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, v, found, err := s.Lookup(keys[7])
		if err != nil || !found {
			t.Fatalf("Lookup: %v, found %v", err, found)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for g := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[g] = s.Close()
			}()
		}
		close(start)
		wg.Wait()
		for g, err := range errs {
			if err != nil {
				t.Fatalf("iteration %d: Close %d: %v", i, g, err)
			}
		}
		if !s.Closed() || Mapping(v) != nil {
			t.Fatalf("iteration %d: after two Closes: closed %v, value still mapped %v", i, s.Closed(), Mapping(v) != nil)
		}
	}
}
