package compat_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestBranchBesideReload: a historical branch opened on another goroutine
// while the multistore reloads (LoadLatestVersion: closeDB, then open)
// either fails (ErrNotLoaded, a version refused) or holds the mounted
// stores: the branch takes its database and its stores together
// (MultiStore.published), never the empty ones a reload in progress
// publishes with a database it has already closed. The interleaving is
// rare: 40 readers beside reloads, for 3 s (8 s without -short, 15 s with MEMIAVL_FULL=1).
func TestBranchBesideReload(t *testing.T) {
	dir := t.TempDir()
	keys := keyring{}
	ms := newOurs(t, dir, testConfig(), keys, smallMount, nil)
	defer ms.Close()
	for i := 0; i < 3; i++ {
		ms.GetKVStore(keys["b"]).Set([]byte("x"), []byte(fmt.Sprintf("v%d", i)))
		ms.Commit()
	}
	const v = 3
	var stop atomic.Bool
	var empty, served atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 40; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				func() {
					br, err := ms.CacheMultiStoreWithVersion(v)
					if err != nil {
						return // refused while the database was swapped
					}
					defer func() {
						r := recover()
						if r == nil {
							served.Add(1)
							return
						}
						if e, ok := r.(error); ok && errors.Is(e, compat.ErrVersionReleased) {
							return // the reload released its view: documented
						}
						if strings.Contains(fmt.Sprint(r), "has not been registered") {
							if empty.Add(1) == 1 {
								t.Errorf("a branch of version %d opened beside a reload has no store b: %v", v, r)
							}
							stop.Store(true)
							return
						}
						t.Errorf("branch read: %v", r)
						stop.Store(true)
					}()
					_ = br.GetKVStore(keys["b"]).Get([]byte("x"))
				}()
			}
		}()
	}
	span := time.Duration(size(15, 8, 3)) * time.Second
	start := time.Now()
	for i := 0; i < 100000 && time.Since(start) < span && !stop.Load(); i++ {
		if err := ms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d branches served, %d without stores", served.Load(), empty.Load())
}
