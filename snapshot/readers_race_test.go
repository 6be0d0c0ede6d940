package snapshot

import (
	"bytes"
	"context"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentReaders: readers of one snapshot (point reads,
// searches, navigation, Verify, VerifyChecksums, Mapping and Holds) run
// while other goroutines open and close other snapshots, which changes the
// registry Mapping reads. Meant for -race; every read must succeed.
func TestConcurrentReaders(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(11)), 700)
	s := writeAndOpen(t, 2, 9, true, keys, values)
	otherDir := filepath.Join(t.TempDir(), "other")
	writeTree(t, otherDir, 3, 4, false, keys[:50], values[:50])

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for it := 0; it < 400; it++ {
				i := r.Intn(len(keys))
				idx, v, found, err := s.Lookup(keys[i])
				if err != nil || !found || idx != uint64(i) || !bytes.Equal(v, values[i]) {
					errs <- err
					return
				}
				if Mapping(v) != s && len(v) > 0 {
					errs <- context.Canceled
					return
				}
				if !s.Holds(v) && len(v) > 0 {
					errs <- context.Canceled
					return
				}
				if j, found, err := s.Search(keys[i], 0, s.LeafCount()); err != nil || !found || j != uint64(i) {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for it := 0; it < 3; it++ {
			if err := s.Verify(); err != nil {
				errs <- err
				return
			}
			if err := s.VerifyChecksums(context.Background()); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for it := 0; it < 50; it++ {
			o, err := Open(otherDir)
			if err != nil {
				errs <- err
				return
			}
			v, _ := o.LeafValue(0)
			if Mapping(v) != o {
				errs <- context.Canceled
			}
			o.Close()
			if Mapping(v) != nil {
				errs <- context.Canceled
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent read: %v", err)
	}
}
