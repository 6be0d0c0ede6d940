package compat_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestQueryBesideReload: a query of a mounted store beside reloads
// (LoadLatestVersion) either answers with the stored value or fails with
// ErrNotLoaded; it never answers "no such store" for a store mounted in
// every load (Query reads the published stores once: a reload in progress
// publishes empty ones) nor that the key is absent. The interleavings are
// rare: 16 queriers beside reloads for 3 s (8 s without -short, 15 s with MEMIAVL_FULL=1).
func TestQueryBesideReload(t *testing.T) {
	dir := t.TempDir()
	keys := keyring{}
	ms := newOurs(t, dir, testConfig(), keys, smallMount, nil)
	defer ms.Close()
	for i := 0; i < 3; i++ {
		ms.GetKVStore(keys["a"]).Set([]byte("x"), []byte("v"))
		ms.Commit()
	}
	var stop atomic.Bool
	var wrong atomic.Int64
	var msg atomic.Value
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("x")})
				bad := ""
				switch {
				case err != nil && !errors.Is(err, compat.ErrNotLoaded):
					bad = err.Error()
				case err == nil && string(res.Value) != "v":
					bad = fmt.Sprintf("value %q at height %d", res.Value, res.Height)
				}
				if bad != "" {
					if wrong.Add(1) == 1 {
						msg.Store(bad)
					}
					stop.Store(true)
				}
			}
		}()
	}
	span := time.Duration(size(15, 8, 3)) * time.Second
	start := time.Now()
	for time.Since(start) < span && !stop.Load() {
		if err := ms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if wrong.Load() > 0 {
		t.Errorf("a query of mounted store a beside a reload gave %q; want the value or ErrNotLoaded (after %v)", msg.Load(), time.Since(start))
	}
}
