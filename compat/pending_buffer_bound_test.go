package compat_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// pendingRetained runs a block of writes writes to 1000 keys of one
// store (a hot set, as the transactions of a block write the same
// balances, fee pool and counters again and again), commits it, then
// commits 10 small blocks, and returns how far the live heap grew over the
// live heap before the big block.
func pendingRetained(t *testing.T, writes int) int64 {
	dir := filepath.Join(testutil.ShmTempDir(t), "db")
	cfg := testConfig()
	cfg.SnapshotInterval = 1000
	keys := keyring{}
	m := mount{iavl: []string{"bank"}}
	ms := newOurs(t, dir, cfg, keys, m, nil)
	defer ms.Close()
	kv := ms.GetKVStore(keys["bank"])
	key := func(i int) []byte { return []byte(fmt.Sprintf("balance/%04d", i%1000)) }
	for i := 0; i < 1000; i++ {
		kv.Set(key(i), make([]byte, 32))
	}
	ms.Commit()
	small := func() {
		for i := 0; i < 20; i++ {
			kv.Set(key(i), []byte{byte(i)})
		}
		ms.Commit()
	}
	for i := 0; i < 10; i++ {
		small()
	}
	before := testutil.LiveHeap()
	for i := 0; i < writes; i++ {
		v := make([]byte, 32)
		v[0] = byte(i)
		kv.Set(key(i), v)
	}
	ms.Commit()
	for i := 0; i < 10; i++ {
		small()
	}
	runtime.GC()
	after := testutil.LiveHeap()
	return int64(after) - int64(before)
}

// TestPendingBufferAfterBigBlock: the live heap after a block of many
// writes, once later small blocks have committed, does not depend on how
// many writes that block made: the tree holds one leaf per key, the log
// entry one value per key, and the store's buffer of pending writes keeps
// at most maxKeptPending of its capacity.
func TestPendingBufferAfterBigBlock(t *testing.T) {
	small, large := 40_000, 400_000
	gs := pendingRetained(t, small)
	gl := pendingRetained(t, large)
	t.Logf("live heap growth after a block of %d writes: %.1f MiB; of %d writes: %.1f MiB", small, float64(gs)/(1<<20), large, float64(gl)/(1<<20))
	if gl-gs > 4<<20 {
		t.Errorf("a block of %d writes to 1000 keys leaves the live heap %.1f MiB larger than one of %d writes, blocks after it: memory retained in proportion to the largest block's writes",
			large, float64(gl-gs)/(1<<20), small)
	}
}
