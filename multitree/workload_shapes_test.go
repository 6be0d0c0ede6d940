package multitree_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func wlKey(prefix []byte, i int) []byte {
	k := append(bytes.Clone(prefix), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(k[len(prefix):], uint32(i))
	return k
}

func wlVal(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

// Values of several MiB, and one key whose value grows every block, with
// snapshots, a background rewrite, reopens and historical views.
func TestWorkloadHugeValues(t *testing.T) {
	for _, async := range []int{0, 2} {
		t.Run(fmt.Sprint("async", async), func(t *testing.T) { wlHugeValues(t, async) })
	}
}

func wlHugeValues(t *testing.T, async int) {
	r := rand.New(rand.NewSource(1))
	w := wlOpen(t, []string{"big", "small"}, multitree.Options{SnapshotInterval: 4, SnapshotKeepRecent: 3, AsyncCommitBuffer: async})
	multitree.DelayRewrites(w.db, 2)
	grow := []byte("growing")
	var gv []byte
	w.probes = [][]byte{grow, []byte("huge0"), []byte("huge1"), []byte("huge2"), []byte("absent")}
	blocks := scale(40, 14)
	for b := 1; b <= blocks; b++ {
		// a fresh slice each block: the DB keeps the caller's bytes
		gv = append(bytes.Clone(gv), wlVal(r, 48<<10)...)
		w.set("big", grow, gv)
		if b%5 == 1 {
			// 3-5 MiB (256-640 KiB with -short)
			w.set("big", []byte(fmt.Sprintf("huge%d", b%3)), wlVal(r, (3+b%3)<<scale(20, 17)))
		}
		if b%7 == 0 {
			w.del("big", []byte(fmt.Sprintf("huge%d", (b+1)%3)))
		}
		if b == 3 {
			// a log entry over 16 MiB (its encoding buffer is not kept)
			for i := 0; i < 3; i++ {
				w.set("small", []byte(fmt.Sprintf("six%d", i)), wlVal(r, 6<<20))
			}
		}
		for i := 0; i < 20; i++ {
			w.set("small", wlKey([]byte("k"), r.Intn(50)), wlVal(r, r.Intn(64)))
		}
		w.commit()
		if b%9 == 0 {
			w.reopen()
			multitree.DelayRewrites(w.db, 2)
		}
		if b%6 == 0 {
			w.checkLatest()
			w.checkAt(w.last - 3)
		}
	}
	w.reopen() // without the delay hook, which RewriteSnapshot would wait on
	if err := w.db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for v := w.last; v > w.last-8; v-- {
		w.checkAt(v)
	}
	w.finish()
}

// The same with versions whose log entry is "too large" (lowered bound),
// committed by a snapshot each, between logged ones.
func TestWorkloadHugeValuesSnapshotCommits(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	w := wlOpen(t, []string{"big", "small"}, multitree.Options{SnapshotInterval: 5, SnapshotKeepRecent: 2, AsyncCommitBuffer: 3})
	multitree.SetMaxLoggedEntry(w.db, 1<<20)
	w.probes = [][]byte{[]byte("g"), []byte("h")}
	var gv []byte
	for b := 1; b <= scale(30, 16); b++ {
		gv = append(bytes.Clone(gv), wlVal(r, 100<<10)...)
		w.set("big", []byte("g"), gv)
		w.set("small", wlKey(nil, b), wlVal(r, 10))
		if b%4 == 0 {
			w.del("big", []byte("g"))
			gv = nil
		}
		w.commit()
		if b%5 == 0 {
			w.reopen()
			multitree.SetMaxLoggedEntry(w.db, 1<<20)
		}
		w.checkAt(w.last - 1)
	}
	w.finish()
}

// Keys sharing long common prefixes, keys of 0xFF bytes, the empty key and
// 0x00 keys, with range iterations bounded at those keys.
func TestWorkloadOddKeys(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	w := wlOpen(t, []string{"odd", "other"}, multitree.Options{SnapshotInterval: 3, SnapshotKeepRecent: 4})
	long := bytes.Repeat([]byte{0xAB}, 3000)
	var keys [][]byte
	keys = append(keys, []byte{}, []byte{0}, []byte{0, 0}, []byte{0xFF}, bytes.Repeat([]byte{0xFF}, 2),
		bytes.Repeat([]byte{0xFF}, 127), bytes.Repeat([]byte{0xFF}, 128), bytes.Repeat([]byte{0xFF}, 20000),
		append(bytes.Repeat([]byte{0xFF}, 64), 0), append(bytes.Repeat([]byte{0xFF}, 64), 0xFE))
	for i := 0; i < 40; i++ {
		keys = append(keys, wlKey(long, i*7919%1000), append(bytes.Clone(long), byte(i)))
	}
	keys = append(keys, long, long[:2999])
	w.probes = append(keys, []byte{1}, bytes.Repeat([]byte{0xFF}, 129), append(bytes.Clone(long), 0xFF, 0xFF))
	for b := 1; b <= scale(40, 20); b++ {
		for i := 0; i < 15; i++ {
			k := keys[r.Intn(len(keys))]
			if r.Intn(4) == 0 {
				w.del("odd", k)
			} else {
				val := wlVal(r, r.Intn(40))
				if r.Intn(5) == 0 {
					val = []byte{} // empty value
				}
				w.set("odd", k, val)
			}
		}
		w.set("other", []byte{}, []byte{byte(b)})
		w.commit()
		if b%7 == 0 {
			w.reopen()
		}
		if b%4 == 0 {
			w.checkLatest()
			w.checkRanges("odd", w.last, keys)
			if w.checkAt(w.last - 2) {
				w.checkRanges("odd", w.last-2, keys)
			}
		}
	}
	w.finish()
}

// checkRanges compares ranged iterations bounded at the given keys.
func (w *wlRun) checkRanges(store string, v int64, bounds [][]byte) {
	t := w.t
	t.Helper()
	view, err := w.db.ViewAt(v)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	ref, err := w.at[v][store].GetImmutable(v)
	if err != nil {
		t.Fatal(err)
	}
	tr := view.Tree(store)
	for i := 0; i < 30; i++ {
		s, e := bounds[(i*13)%len(bounds)], bounds[(i*29+5)%len(bounds)]
		if i%5 == 0 {
			s = nil
		}
		if i%7 == 0 {
			e = nil
		}
		for _, asc := range []bool{true, false} {
			ri, err := ref.Iterator(s, e, asc)
			if err != nil {
				t.Fatal(err)
			}
			mi := tr.Iterator(s, e, asc)
			for ; ri.Valid(); ri.Next() {
				if !mi.Valid() || !bytes.Equal(mi.Key(), ri.Key()) || !bytes.Equal(mi.Value(), ri.Value()) {
					t.Fatalf("version %d range [%X,%X) asc %v: differs at iavl key %X", v, wlShort(s), wlShort(e), asc, wlShort(ri.Key()))
				}
				mi.Next()
			}
			ri.Close()
			if mi.Valid() {
				t.Fatalf("version %d range [%X,%X) asc %v: extra key %X", v, wlShort(s), wlShort(e), asc, wlShort(mi.Key()))
			}
		}
	}
}

// A tree emptied completely by deletes, then refilled, over and over, with
// the empty state landing on snapshot boundaries and reopens.
func TestWorkloadEmptyRefill(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	w := wlOpen(t, []string{"churn", "steady"}, multitree.Options{SnapshotInterval: 2, SnapshotKeepRecent: 5})
	multitree.DelayRewrites(w.db, 1)
	w.set("steady", []byte("x"), []byte("y"))
	w.commit()
	for round := 0; round < scale(24, 12); round++ {
		n := 1 + r.Intn(60)
		var keys [][]byte
		for i := 0; i < n; i++ {
			k := wlKey([]byte("c"), r.Intn(200))
			keys = append(keys, k)
			w.set("churn", k, wlVal(r, 1+r.Intn(30)))
		}
		w.probes = keys[:min(len(keys), 10)]
		w.commit()
		if round%3 == 1 {
			w.reopen()
			multitree.DelayRewrites(w.db, 1)
		}
		// delete all (and delete again, absent), in one or two blocks
		half := r.Intn(2) == 0
		for i, k := range keys {
			w.del("churn", k)
			if half && i == len(keys)/2 {
				w.commit()
			}
		}
		w.del("churn", keys[0])
		w.commit()
		w.checkLatest()
		if round%2 == 0 {
			// an empty version across a snapshot: commit more empty ones
			w.commit()
			w.commit()
		}
		if round%4 == 3 {
			w.reopen()
			multitree.DelayRewrites(w.db, 1)
			w.checkLatest()
		}
		if round%5 == 4 {
			w.reopen() // without the delay hook, which RewriteSnapshot would wait on
			if err := w.db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			w.reopen()
			multitree.DelayRewrites(w.db, 1)
		}
		for v := w.last - 5; v <= w.last; v++ {
			w.checkAt(v)
		}
	}
	w.finish()
}

// Hundreds of commits without any change, then a reopen, with snapshots
// every few versions; historical views of the unchanged versions.
func TestWorkloadEmptyCommits(t *testing.T) {
	w := wlOpen(t, []string{"a", "b", "c"}, multitree.Options{SnapshotInterval: 7, SnapshotKeepRecent: 2})
	w.set("a", []byte("k"), []byte("v"))
	w.set("b", []byte("k2"), []byte("v2"))
	w.commit()
	first := w.hashes[w.last]
	w.probes = [][]byte{[]byte("k"), []byte("k2")}
	for i := 0; i < scale(600, 300); i++ {
		w.commit()
		if !bytes.Equal(w.hashes[w.last], first) {
			t.Fatalf("version %d: app hash changed without changes", w.last)
		}
		if i == 150 {
			w.reopen()
		}
	}
	w.reopen()
	for v := w.last - 20; v <= w.last; v++ {
		w.checkAt(v)
	}
	w.set("c", []byte("new"), []byte("x"))
	w.commit()
	for i := 0; i < 50; i++ {
		w.commit()
	}
	w.reopen()
	w.finish()
}

// 120 stores, one changing per block.
func TestWorkloadManyStoresOneChanges(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var stores []string
	for i := 0; i < 120; i++ {
		stores = append(stores, fmt.Sprintf("store%03d", i))
	}
	w := wlOpen(t, stores, multitree.Options{SnapshotInterval: 10, SnapshotKeepRecent: 1, AsyncCommitBuffer: 2})
	multitree.DelayRewrites(w.db, 3)
	w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 1), wlKey(nil, 2)}
	for b := 1; b <= scale(150, 70); b++ {
		s := stores[r.Intn(len(stores))]
		for i := 0; i < 1+r.Intn(4); i++ {
			if r.Intn(3) == 0 {
				w.del(s, wlKey(nil, r.Intn(5)))
			} else {
				w.set(s, wlKey(nil, r.Intn(5)), wlVal(r, 8))
			}
		}
		w.commit()
		if b%37 == 0 {
			w.reopen()
			multitree.DelayRewrites(w.db, 3)
		}
		if b%25 == 0 {
			w.checkLatest()
			w.checkAt(w.last - 4)
		}
	}
	w.finish()
}

// A store created and deleted repeatedly under the same name, with data,
// across snapshots and reopens.
func TestWorkloadStoreRecreated(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	w := wlOpen(t, []string{"base"}, multitree.Options{SnapshotInterval: 3, SnapshotKeepRecent: 6})
	w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 1)}
	live := false
	for b := 1; b <= scale(60, 30); b++ {
		switch {
		case !live && b%2 == 1:
			w.upgrade(wal.Upgrades{Added: []string{"tmp"}})
			live = true
		case live && b%5 == 0:
			w.upgrade(wal.Upgrades{Deleted: []string{"tmp"}})
			live = false
		case live && b%7 == 0:
			// deleted and added again in the same version
			w.upgrade(wal.Upgrades{Deleted: []string{"tmp"}, Added: []string{"tmp"}})
		}
		if live {
			for i := 0; i < 3; i++ {
				w.set("tmp", wlKey(nil, r.Intn(4)), wlVal(r, 5))
			}
		}
		w.set("base", wlKey(nil, b%3), wlVal(r, 5))
		w.commit()
		if b%6 == 0 {
			w.reopen()
		}
		if b%4 == 0 {
			w.checkLatest()
			for v := w.last - 4; v < w.last; v++ {
				w.checkAt(v)
			}
		}
	}
	w.finish()
}

// SnapshotInterval 1, SnapshotKeepRecent 0, many quick commits: a rewrite
// starts at nearly every commit.
func TestWorkloadIntervalOneKeepZero(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	w := wlOpen(t, []string{"a", "b"}, multitree.Options{SnapshotInterval: 1})
	w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 7)}
	for b := 1; b <= scale(800, 400); b++ {
		for i := 0; i < 1+r.Intn(8); i++ {
			s := []string{"a", "b"}[r.Intn(2)]
			if r.Intn(4) == 0 {
				w.del(s, wlKey(nil, r.Intn(300)))
			} else {
				w.set(s, wlKey(nil, r.Intn(300)), wlVal(r, r.Intn(50)))
			}
		}
		w.commit()
		if b%150 == 0 {
			w.reopen()
		}
		if b%100 == 0 {
			w.checkLatest()
		}
	}
	w.finish()
}

// InitialVersion 2^40 with snapshots, reopens and historical views.
func TestWorkloadHugeInitialVersion(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	w := wlOpen(t, []string{"a", "b"}, multitree.Options{InitialVersion: 1 << 40, SnapshotInterval: 4, SnapshotKeepRecent: 2})
	w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 3)}
	for b := 1; b <= scale(40, 25); b++ {
		for i := 0; i < 6; i++ {
			w.set([]string{"a", "b"}[i%2], wlKey(nil, r.Intn(40)), wlVal(r, 9))
		}
		if b%3 == 0 {
			w.del("a", wlKey(nil, r.Intn(40)))
		}
		v := w.commit()
		if b == 1 && v != 1<<40 {
			t.Fatalf("first version %d", v)
		}
		if b%6 == 0 {
			w.reopen()
			w.checkAt(w.last - 3)
		}
	}
	w.opts.InitialVersion = 0 // not needed by an existing database
	w.reopen()
	w.finish()
}

// AsyncCommitBuffer > 0 with a Close and reopen after every commit.
func TestWorkloadAsyncCloseEveryStep(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	w := wlOpen(t, []string{"a", "b"}, multitree.Options{AsyncCommitBuffer: 8, SnapshotInterval: 3, SnapshotKeepRecent: 1})
	w.probes = [][]byte{wlKey(nil, 0), wlKey(nil, 3)}
	for b := 1; b <= scale(60, 30); b++ {
		for i := 0; i < 10; i++ {
			s := []string{"a", "b"}[r.Intn(2)]
			if r.Intn(3) == 0 {
				w.del(s, wlKey(nil, r.Intn(30)))
			} else {
				w.set(s, wlKey(nil, r.Intn(30)), wlVal(r, r.Intn(100)))
			}
		}
		w.commit()
		if b%2 == 0 {
			w.commit() // and an empty one
		}
		w.reopen()
		if b%5 == 0 {
			w.checkLatest()
			w.checkAt(w.last - 2)
		}
	}
	w.finish()
}

// Deletes of absent keys and sets of identical values: the version is
// bumped; absent deletes leave the hash; identical sets change it exactly
// as iavl (which gives the leaf the new version).
func TestWorkloadNoOpChanges(t *testing.T) {
	w := wlOpen(t, []string{"a", "b"}, multitree.Options{SnapshotInterval: 3, SnapshotKeepRecent: 2})
	w.probes = [][]byte{[]byte("k1"), []byte("k2"), []byte("none")}
	w.set("a", []byte("k1"), []byte("v1"))
	w.set("a", []byte("k2"), []byte("v2"))
	w.commit()
	for b := 0; b < scale(30, 15); b++ {
		prev := w.hashes[w.last]
		w.del("a", []byte("none"))
		w.del("b", []byte("none"))
		w.del("a", []byte("k3"))
		v := w.commit()
		if !bytes.Equal(w.hashes[v], prev) {
			t.Fatalf("version %d: deletes of absent keys changed the app hash", v)
		}
		// set and delete in the same block (iavl gives the path new
		// versions: compared with iavl only)
		w.set("b", []byte("tmp"), []byte("x"))
		w.del("b", []byte("tmp"))
		w.commit()
		w.set("a", []byte("k1"), []byte("v1")) // identical value
		w.commit()
		// one change set setting, deleting and setting the same key,
		// and deleting an absent one twice
		w.apply([]wal.ChangeSet{{Name: "b", Pairs: []wal.KVPair{
			{Key: []byte("d"), Value: []byte("1")}, {Key: []byte("d"), Delete: true},
			{Key: []byte("d"), Value: []byte("2")}, {Key: []byte("d"), Value: []byte("2")},
			{Key: []byte("zz"), Delete: true}, {Key: []byte("zz"), Delete: true}}},
			{Name: "a", Pairs: []wal.KVPair{{Key: []byte("k2"), Value: []byte("v2")}}}})
		w.commit()
		if b%4 == 0 {
			w.reopen()
		}
		w.checkAt(w.last - 1)
	}
	w.finish()
}
