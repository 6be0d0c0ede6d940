package multitree_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// Stores that hold nothing at snapshots and reopens, at a version past
// 2^40, with the very first version committed by a snapshot (too large for
// the lowered log bound), then emptied and refilled.
func TestWorkloadFirstVersionBySnapshotHugeInitial(t *testing.T) {
	r := rand.New(rand.NewSource(10))
	for _, async := range []int{0, 4} {
		t.Run(fmt.Sprint("async", async), func(t *testing.T) {
			w := wlOpen(t, []string{"a", "b", "empty"}, multitree.Options{InitialVersion: 1<<40 + 7,
				SnapshotInterval: 2, SnapshotKeepRecent: 3, AsyncCommitBuffer: async})
			multitree.SetMaxLoggedEntry(w.db, 64<<10)
			w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 1), {}}
			// genesis: too large for the log
			for i := 0; i < 200; i++ {
				w.set("a", wlKey(nil, i), wlVal(r, 500))
			}
			if v := w.commit(); v != 1<<40+7 {
				t.Fatalf("first version %d", v)
			}
			w.reopen()
			multitree.SetMaxLoggedEntry(w.db, 64<<10)
			w.checkLatest()
			for b := 0; b < 12; b++ {
				for i := 0; i < 200; i++ {
					if b%3 == 2 {
						w.del("a", wlKey(nil, i))
					} else if r.Intn(3) == 0 {
						w.set("a", wlKey(nil, i), wlVal(r, 20))
					}
				}
				w.set("b", []byte{}, wlVal(r, 3))
				if b%4 == 3 {
					w.del("b", []byte{})
				}
				w.commit()
				w.checkAt(w.last - 1)
				if b%3 == 0 {
					w.reopen()
					multitree.SetMaxLoggedEntry(w.db, 64<<10)
				}
			}
			w.finish()
		})
	}
}

// Huge keys (1 MiB of 0xFF, 70000 bytes sharing a prefix) and empty values.
func TestWorkloadHugeKeys(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	w := wlOpen(t, []string{"k"}, multitree.Options{SnapshotInterval: 2, SnapshotKeepRecent: 2})
	ff := bytes.Repeat([]byte{0xFF}, 1<<20)
	pre := bytes.Repeat([]byte{0x11}, 70000)
	keys := [][]byte{ff, ff[:1<<19], append(bytes.Clone(pre), 1), append(bytes.Clone(pre), 2), pre, {}, {0}}
	w.probes = append(keys, append(bytes.Clone(ff), 0))
	for b := 0; b < 10; b++ {
		for i, k := range keys {
			switch (b + i) % 3 {
			case 0:
				w.set("k", k, []byte{})
			case 1:
				w.set("k", k, wlVal(r, 10))
			case 2:
				w.del("k", k)
			}
		}
		w.commit()
		if b%3 == 1 {
			w.reopen()
		}
		w.checkAt(w.last - 1)
		w.checkRanges("k", w.last, keys)
	}
	w.finish()
}

// Background rewrites held back so that their catch-up rebases, over
// versions without any change, then with store churn (catch-up across
// upgrades).
func TestWorkloadDelayedRewritesEmptyAndChurn(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	w := wlOpen(t, []string{"base", "tmp"}, multitree.Options{SnapshotInterval: 2, SnapshotKeepRecent: 2})
	multitree.DelayRewrites(w.db, 3)
	w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 1)}
	w.set("base", wlKey(nil, 0), []byte("x"))
	w.commit()
	for i := 0; i < 60; i++ {
		w.commit()
	}
	w.checkLatest()
	live := true
	for b := 1; b <= 60; b++ {
		switch {
		case live && b%3 == 0:
			w.upgrade(wal.Upgrades{Deleted: []string{"tmp"}})
			live = false
		case !live:
			w.upgrade(wal.Upgrades{Added: []string{"tmp"}})
			live = true
		case b%5 == 1:
			w.upgrade(wal.Upgrades{Deleted: []string{"tmp"}, Added: []string{"tmp"}})
		}
		if live {
			w.set("tmp", wlKey(nil, r.Intn(3)), wlVal(r, 4))
		}
		if b%2 == 0 {
			w.set("base", wlKey(nil, r.Intn(3)), wlVal(r, 4))
		}
		w.commit()
		if b%10 == 0 {
			w.checkLatest()
			w.checkAt(w.last - 2)
		}
		if b%17 == 0 {
			w.reopen()
			multitree.DelayRewrites(w.db, 3)
		}
	}
	rebased, skipped, failed := multitree.RebaseCounts(w.db)
	t.Logf("rebased %d, skipped %d, failed %d", rebased, skipped, failed)
	if failed != 0 {
		t.Fatalf("%d rebases failed", failed)
	}
	w.finish()
}

// A database without any store: commits, snapshots, a reopen, then a store
// added, emptied, and deleted again.
func TestWorkloadNoStores(t *testing.T) {
	w := wlOpen(t, nil, multitree.Options{SnapshotInterval: 2, SnapshotKeepRecent: 1})
	for i := 0; i < 9; i++ {
		w.commit()
	}
	w.reopen()
	w.upgrade(wal.Upgrades{Added: []string{"s"}})
	w.set("s", []byte("k"), []byte("v"))
	w.commit()
	w.commit()
	w.reopen()
	w.del("s", []byte("k"))
	w.commit()
	w.upgrade(wal.Upgrades{Deleted: []string{"s"}})
	w.commit()
	w.commit()
	w.reopen()
	for v := w.last - 5; v <= w.last; v++ {
		w.checkAt(v)
	}
	w.finish()
}
