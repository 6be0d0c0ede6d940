package compat_test

import (
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cosmossdk.io/store/types"
)

// TestTreeStoreReadsBesideBlockWrites: the SDK's simulations read the
// working state through the check state's branch on goroutines of their
// own (the gRPC Simulate service; ABCI queries under optimistic execution)
// while a block's writes reach the tree stores, the working hash is
// computed and the block commits (with background snapshot rewrites and
// switches). Such reads must neither lose nor apply twice the writes the
// block is making (every commit's app hash equals rootmulti's for the same
// writes), nor race with them (run under the race detector in CI), nor
// return what was never written; none may fail. Each reader also keeps one
// iterator open across the blocks, stepping it once per block: it holds
// its snapshot, so it reads on, in order, across the switches.
func TestTreeStoreReadsBesideBlockWrites(t *testing.T) {
	p := newPair(t, smallMount)
	stores := []string{"a", "b"}
	blocks := 80
	if testing.Short() {
		blocks = 40
	}
	var stop atomic.Bool
	var reads atomic.Int64
	var committed, longSteps atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			var long types.Iterator // open across blocks
			var last string
			stepped := int64(-1) // the block count at long's last step
			defer func() {
				if long != nil {
					long.Close()
				}
			}()
			report := func(msg string) {
				if msg != "ok" {
					select {
					case errs <- msg:
					default:
					}
				}
			}
			for !stop.Load() {
				msg := outcome(func() any {
					n := committed.Load()
					if n == stepped {
						return "ok"
					}
					stepped = n
					if long == nil {
						branch := p.ours.CacheMultiStore()
						long, last = branch.GetKVStore(p.keys[stores[r.Intn(len(stores))]]).Iterator(nil, nil), ""
					}
					longSteps.Add(1)
					if !long.Valid() {
						long.Close()
						long = nil
						return "ok"
					}
					k := string(long.Key())
					if !strings.HasPrefix(k, "k") || !strings.HasPrefix(string(long.Value()), "v") || k <= last {
						return fmt.Sprintf("long iterator at %q = %q after %q", k, long.Value(), last)
					}
					last = k
					long.Next()
					return "ok"
				})
				report(msg)
				msg = outcome(func() any {
					branch := p.ours.CacheMultiStore() // as the check state's
					kv := branch.GetKVStore(p.keys[stores[r.Intn(len(stores))]])
					for i := 0; i < 20; i++ {
						k := fmt.Appendf(nil, "k%03d", r.Intn(200))
						if v := kv.Get(k); v != nil && !strings.HasPrefix(string(v), "v") {
							return fmt.Sprintf("Get %s = %q, never written", k, v)
						}
					}
					it := kv.Iterator(nil, nil)
					defer it.Close()
					for i := 0; i < 10 && it.Valid(); i++ {
						if !strings.HasPrefix(string(it.Key()), "k") || !strings.HasPrefix(string(it.Value()), "v") {
							return fmt.Sprintf("iterator at %q = %q, never written", it.Key(), it.Value())
						}
						it.Next()
					}
					return "ok"
				})
				reads.Add(1)
				report(msg)
			}
		}(int64(g))
	}
	r := rand.New(rand.NewSource(1))
	for b := 0; b < blocks; b++ {
		p.commitRandom(r, stores, 50) // fails on an app hash other than rootmulti's
		committed.Add(1)
		time.Sleep(time.Millisecond) // for the readers' steps of their long iterators
		if b%7 == 3 {
			p.ours.WorkingHash()
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
	if reads.Load() == 0 {
		t.Fatal("no read ran beside the blocks")
	}
	if n := longSteps.Load(); n < int64(blocks/2) {
		t.Fatalf("the long iterators took %d steps in %d blocks", n, blocks)
	}
}
