package compat_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestWorkingBranchBesideReload: a branch of the working state taken before
// reloads (BaseApp's check state, which CheckTx and simulations read on
// goroutines of their own) reads on other goroutines while the multistore
// reloads (LoadLatestVersion: closeDB, then open), between them too: never
// a panic of the closed database, nor a wrong answer. (An iterator open
// across a reload panics: compat/README.md.)
func TestWorkingBranchBesideReload(t *testing.T) {
	for _, zeroCopy := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero-copy=%v", zeroCopy), func(t *testing.T) {
			cfg := testConfig()
			cfg.ZeroCopy = zeroCopy
			testWorkingBranchBesideReload(t, cfg)
		})
	}
}

func testWorkingBranchBesideReload(t *testing.T, cfg compat.Config) {
	dir := t.TempDir()
	keys := keyring{}
	ms := newOurs(t, dir, cfg, keys, smallMount, nil)
	defer ms.Close()
	for i := 0; i < 3; i++ {
		ms.GetKVStore(keys["b"]).Set([]byte("x"), []byte(fmt.Sprintf("v%d", i)))
		ms.Commit()
	}
	br := ms.CacheMultiStore()
	var stop atomic.Bool
	var served atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		g := g
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("working branch read beside a reload: %v", r)
							stop.Store(true)
						}
					}()
					// a key the branch has not read: its cache would
					// answer without reading the store
					n := served.Add(1)
					if got := br.GetKVStore(keys["b"]).Get([]byte(fmt.Sprint("absent", g, n))); got != nil {
						t.Errorf("working branch read beside a reload: %q for an absent key", got)
						stop.Store(true)
					}
					if br.GetKVStore(keys["a"]).Has([]byte(fmt.Sprint("absent", g, n))) {
						t.Errorf("working branch read beside a reload: an absent key is there")
						stop.Store(true)
					}
				}()
			}
		}()
	}
	span := time.Duration(size(8, 5, 2)) * time.Second
	start := time.Now()
	for i := 0; time.Since(start) < span && !stop.Load(); i++ {
		if err := ms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d reads served", served.Load())
}
