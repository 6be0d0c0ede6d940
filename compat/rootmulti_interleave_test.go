package compat_test

// Side-by-side checks of the multistore against rootmulti over cosmos/iavl
// for behaviours the other comparison tests leave out: iterator positions
// past the end, iterators over buffered (not yet applied) writes, long
// interleavings of the rarer CommitMultiStore calls (reloads and rollbacks
// in the middle of a block, listeners, transient stores, store-level
// hashes), historical branches while the working version changes, state-sync
// streams of emptied stores at older heights, and the default query height
// with no older snapshot kept.

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"
)

// sideDump lists the pairs an iterator yields, then its error, and closes it.
func sideDump(it types.Iterator) string {
	defer it.Close()
	var out []string
	for ; it.Valid(); it.Next() {
		out = append(out, fmt.Sprintf("%s=%s", it.Key(), it.Value()))
	}
	out = append(out, fmt.Sprintf("err=%v", it.Error()))
	return strings.Join(out, ",")
}

// TestSideRootIteratorPastEnd: once an iterator of an IAVL store has
// gone past its last pair, iavl's iterator has no current pair: Key and
// Value return nil. The store's own iterator (GetKVStore, GetCommitKVStore)
// must do the same rather than keep returning the last pair it yielded. (A
// branch's cache iterator refuses Key past the end with either store.)
func TestSideRootIteratorPastEnd(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v2")}, {[]byte("k3"), []byte("v3")}}})
	ak := p.keys["a"]
	pastEnd := func(it types.Iterator) any {
		defer it.Close()
		for it.Valid() {
			it.Next()
		}
		return fmt.Sprintf("valid=%v key=%q value=%q err=%v", it.Valid(), it.Key(), it.Value(), it.Error())
	}
	sameOutcome(t, "store iterator past its end", p, func(s types.CommitMultiStore) any {
		return pastEnd(s.GetKVStore(ak).Iterator(nil, nil))
	})
	sameOutcome(t, "store reverse iterator past its end", p, func(s types.CommitMultiStore) any {
		return pastEnd(s.GetKVStore(ak).ReverseIterator([]byte("k2"), nil))
	})
	sameOutcome(t, "historical branch iterator past its end", p, func(s types.CommitMultiStore) any {
		b, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return pastEnd(b.GetKVStore(ak).Iterator(nil, nil))
	})
}

// TestSideIteratorsOverBufferedWrites: iterators of an IAVL store
// with sets, overwrites and deletes not yet committed, over every kind of
// bounds (open, inner, empty, reversed), both directions; an iterator closed
// twice.
func TestSideIteratorsOverBufferedWrites(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v2")}, {[]byte("k3"), []byte("v3")}}})
	ak := p.keys["a"]
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		kv := s.GetKVStore(ak)
		kv.Set([]byte("k0"), []byte("n0"))
		kv.Delete([]byte("k2"))
		kv.Set([]byte("k25"), []byte("n25"))
		kv.Set([]byte("k3"), []byte("n3"))
		kv.Set([]byte("k4"), []byte{})
	}
	for _, b := range [][2][]byte{
		{nil, nil}, {[]byte("k1"), []byte("k3")}, {[]byte("k2"), nil}, {nil, []byte("k25")},
		{[]byte("k3"), []byte("k1")}, {[]byte("k2"), []byte("k2")}, {[]byte("k4"), nil},
	} {
		sameOutcome(t, fmt.Sprintf("iterator %q", b), p, func(s types.CommitMultiStore) any {
			return sideDump(s.GetKVStore(ak).Iterator(b[0], b[1]))
		})
		sameOutcome(t, fmt.Sprintf("reverse iterator %q", b), p, func(s types.CommitMultiStore) any {
			return sideDump(s.GetKVStore(ak).ReverseIterator(b[0], b[1]))
		})
	}
	sameOutcome(t, "iterator closed twice", p, func(s types.CommitMultiStore) any {
		it := s.GetKVStore(ak).Iterator(nil, nil)
		return fmt.Sprintf("%v %v %v", it.Close(), it.Close(), it.Error())
	})
	sameOutcome(t, "working hash", p, func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
	sameOutcome(t, "commit", p, func(s types.CommitMultiStore) any { return s.Commit() })
}

// TestSideRandomOps drives both multistores with the same random
// interleaving of writes, reads, working hashes (of the multistore and of
// one store), commits, branches written back, queries of kept heights,
// historical iterators, reloads and rollbacks in the middle of a block,
// listener state (PopStateCache) and a transient store; every outcome must
// be equal.
func TestSideRandomOps(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { sideRandomOps(t, seed) })
	}
}

func sideRandomOps(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	p := newPair(t, smallMount)
	names := []string{"a", "b"}
	listened := []types.StoreKey{p.keys["a"], p.keys["t"]}
	p.ours.AddListeners(listened)
	p.oracle.AddListeners(listened)
	for step := 0; step < 500; step++ {
		op := r.Intn(18)
		name := names[r.Intn(2)]
		key := p.keys[name]
		k := []byte(fmt.Sprintf("k%02d", r.Intn(30)))
		k2 := []byte(fmt.Sprintf("k%02d", r.Intn(30)))
		what := fmt.Sprintf("step %d op %d store %s key %s (version %d)", step, op, name, k, p.ours.LatestVersion())
		switch op {
		case 0, 1, 2:
			v := []byte(fmt.Sprint(r.Intn(1000)))
			if r.Intn(10) == 0 {
				v = []byte{}
			}
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { s.GetKVStore(key).Set(k, v); return nil })
		case 3:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { s.GetKVStore(key).Delete(k); return nil })
		case 4:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { return fmt.Sprintf("%q", s.GetKVStore(key).Get(k)) })
		case 5:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
		case 6:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { return s.Commit() })
		case 7:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				cms := s.CacheMultiStore()
				kv := cms.GetKVStore(key)
				kv.Set(k, []byte("branch"))
				kv.Delete(k2)
				out := sideDump(kv.Iterator(nil, nil))
				cms.Write()
				return out
			})
		case 8:
			// heights within the kept history (the versions older than
			// the oldest kept snapshot are not served)
			h := int64(0)
			if d := r.Intn(6); d > 0 {
				h = max(p.ours.LatestVersion()-int64(d)+1, 0)
			}
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				return queryOf(s, types.RequestQuery{Path: "/" + name + "/key", Data: k, Height: h, Prove: h > 0})
			})
		case 9:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				h := s.LatestVersion()
				if h == 0 {
					return nil
				}
				b, err := s.CacheMultiStoreWithVersion(h)
				if err != nil {
					return err
				}
				return sideDump(b.GetKVStore(key).ReverseIterator(nil, nil))
			})
		case 10:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
		case 11:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { return s.GetCommitKVStore(key).LastCommitID() })
		case 12:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				return fmt.Sprintf("%X", s.GetCommitKVStore(key).WorkingHash())
			})
		case 13:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				return sideDump(s.GetKVStore(key).Iterator(k2, nil))
			})
		case 14:
			d := int64(r.Intn(3))
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				if s.LatestVersion()-d < 1 {
					return nil
				}
				return s.RollbackToVersion(s.LatestVersion() - d)
			})
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any { return s.LastCommitID() })
		case 15:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				var out []string
				for _, kv := range s.PopStateCache() {
					out = append(out, kv.String())
				}
				return out
			})
		case 16:
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				tk := s.GetKVStore(p.keys["t"])
				old := fmt.Sprintf("%q", tk.Get(k))
				tk.Set(k, []byte("t"))
				return old
			})
		case 17:
			// "/subspace" reads the last committed version: commit first
			sameOutcome(t, what, p, func(s types.CommitMultiStore) any {
				s.Commit()
				return queryOf(s, types.RequestQuery{Path: "/" + name + "/subspace", Data: []byte("k0")})
			})
		}
		if t.Failed() {
			return
		}
	}
}

// TestSideHistoricalBranchIsolation: a historical branch and proven
// queries of a committed version read that version while the working
// version rewrites and deletes its keys (the writes applied to the working
// trees by a read) and after the next commit, with and without zero-copy
// reads.
func TestSideHistoricalBranchIsolation(t *testing.T) {
	for _, zc := range []bool{false, true} {
		t.Run(fmt.Sprint("zero-copy=", zc), func(t *testing.T) {
			p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
			p.cfg.ZeroCopy = zc
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
			t.Cleanup(func() { p.ours.Close() })
			var w [][2][]byte
			for i := 0; i < 50; i++ {
				w = append(w, [2][]byte{[]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint("v", i))})
			}
			p.commit(map[string][][2][]byte{"a": w})
			p.commit(map[string][][2][]byte{"a": w[:3]})
			ak := p.keys["a"]
			bo, err := p.ours.CacheMultiStoreWithVersion(2)
			if err != nil {
				t.Fatal(err)
			}
			br, err := p.oracle.CacheMultiStoreWithVersion(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
				kv := s.GetKVStore(ak)
				for i := 0; i < 50; i += 2 {
					kv.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("changed"))
					kv.Delete([]byte(fmt.Sprintf("k%03d", i+1)))
				}
				kv.Get([]byte("k000"))
			}
			if a, b := sideDump(bo.GetKVStore(ak).Iterator(nil, nil)), sideDump(br.GetKVStore(ak).Iterator(nil, nil)); a != b {
				t.Errorf("historical branch: %s, rootmulti %s", a, b)
			}
			for _, h := range []int64{0, 1, 2} {
				edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("k001"), Height: h, Prove: h > 0})
			}
			p.commit(nil)
			if a, b := sideDump(bo.GetKVStore(ak).Iterator(nil, nil)), sideDump(br.GetKVStore(ak).Iterator(nil, nil)); a != b {
				t.Errorf("historical branch after the commit: %s, rootmulti %s", a, b)
			}
		})
	}
}

// TestSideSnapshotStreamEmptiedStore: the state-sync stream of every
// kept height, byte for byte, where a store is empty, holds one pair, holds
// an empty value, and has been emptied by a delete.
func TestSideSnapshotStreamEmptiedStore(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	p.commit(map[string][][2][]byte{"a": {{[]byte("k2"), []byte("")}}, "b": {{[]byte("x"), []byte("y")}}})
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		s.GetKVStore(p.keys["b"]).Delete([]byte("x"))
	}
	p.commit(nil)
	for h := uint64(1); h <= 3; h++ {
		var ba, bb bytes.Buffer
		ea := p.ours.Snapshot(h, protoio.NewDelimitedWriter(&ba))
		eb := p.oracle.Snapshot(h, protoio.NewDelimitedWriter(&bb))
		if ea != nil || eb != nil || !bytes.Equal(ba.Bytes(), bb.Bytes()) {
			t.Errorf("height %d: error %v, rootmulti %v; stream\n %X\nrootmulti\n %X", h, ea, eb, ba.Bytes(), bb.Bytes())
		}
	}
}

// TestSideDefaultHeightWithoutOlderSnapshots: with no older snapshot
// kept and rewrites every block or few, the version before the latest stays
// readable: a query at height 0 answers at it (as iavl does) and a
// historical branch of it opens.
func TestSideDefaultHeightWithoutOlderSnapshots(t *testing.T) {
	for _, interval := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("interval=", interval), func(t *testing.T) {
			p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
			p.cfg.SnapshotKeepRecent = 0
			p.cfg.SnapshotInterval = interval
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
			t.Cleanup(func() { p.ours.Close() })
			for i := 0; i < 30; i++ {
				p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte(fmt.Sprint("v", i))}}})
				time.Sleep(5 * time.Millisecond) // lets background rewrites finish and switch
				edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("k")})
				sameOutcome(t, fmt.Sprintf("block %d: historical branch of the version before the latest", i+1), p, func(s types.CommitMultiStore) any {
					v := s.LatestVersion() - 1
					if v < 1 {
						return nil
					}
					b, err := s.CacheMultiStoreWithVersion(v)
					if err != nil {
						return err
					}
					return fmt.Sprintf("%q", b.GetKVStore(p.keys["a"]).Get([]byte("k")))
				})
			}
		})
	}
}
