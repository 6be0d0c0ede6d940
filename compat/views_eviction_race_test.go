package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestBranchReadBesideEviction: a historical branch read on one
// goroutine while Commits on another evict its version from the view cache
// (QueryViews 1) reads the version's right pairs until the eviction and then
// panics ErrVersionReleased, never anything else: each read keeps the view
// pinned until it has copied what it read, so the eviction, whose release
// unmaps the snapshot the version was rebuilt from (an older one, which
// nothing else maps), waits for the read to end. A read done after dropping
// its pin reads the snapshot while it is unmapped (the race detector reports
// it, or the read fails with a closed snapshot or faults).
func TestBranchReadBesideEviction(t *testing.T) {
	cfg := rvConfig(-1, 20, 1) // snapshots only where RewriteSnapshot writes them
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, smallMount, nil)
	defer ms.Close()
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%08d", i)) }
	val := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 40) }
	const written = 64
	for h := 1; h <= 20; h++ {
		kv := ms.GetKVStore(keys["a"])
		for i := 0; i < written; i++ {
			if h == 1 {
				kv.Set(key(i), val(i))
			}
			kv.Set([]byte(fmt.Sprintf("h%02d-%d", h, i)), val(h))
		}
		ms.Commit()
		if h%5 == 0 {
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	rounds := 60
	if testing.Short() {
		rounds = 25
	}
	for r := 0; r < rounds; r++ {
		h := int64(6 + r%4) // rebuilt from snapshot 5, which is not current
		b, err := ms.CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Fatal(err)
		}
		kv := b.GetKVStore(keys["a"])
		done := make(chan any)
		go func() {
			var rec any
			// every key once: the branch's cache would answer a
			// second read itself
			for i := 0; rec == nil; i++ {
				if i == 1<<24 {
					rec = fmt.Sprintf("no panic after %d reads", i)
					break
				}
				rec = rvRecover(func() {
					got := kv.Get(key(i))
					want := []byte(nil)
					if i < written {
						want = val(i)
					}
					if !bytes.Equal(got, want) {
						panic(fmt.Errorf("version %d: key %d read %q, want %q", h, i, got, want))
					}
				})
			}
			done <- rec
		}()
		// a Commit caches the new latest version and evicts h
		ms.GetKVStore(keys["b"]).Set([]byte(fmt.Sprintf("r%d", r)), []byte("x"))
		ms.Commit()
		rec := <-done
		if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
			t.Fatalf("round %d: a branch read beside the eviction of version %d: %v, want a panic with ErrVersionReleased", r, h, rec)
		}
	}
}
