package compat_test

// TreeStore against iavl.Store (through rootmulti), side by side: the
// KVStore surface, long keys, historical writes, upgraded stores' commit
// IDs. Contract edges are in treestore_contract_test.go.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"cosmossdk.io/store/gaskv"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
)

func rkNewPair(t *testing.T, zeroCopy bool) *pair {
	p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
	p.cfg.ZeroCopy = zeroCopy
	p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
	t.Cleanup(func() { p.ours.Close() })
	return p
}

func rkDump(it types.Iterator) string {
	defer it.Close()
	s := ""
	for ; it.Valid(); it.Next() {
		s += fmt.Sprintf("%q=%q(nil=%v),", it.Key(), it.Value(), it.Value() == nil)
	}
	return s + fmt.Sprintf("err=%v", it.Error())
}

// TestTreeStoreSurface: a TreeStore's reads, iterators (empty values
// last, Next past the end and after Close, Domain of empty and reverse
// bounds), gas consumed through gaskv, LastCommitID / WorkingHash,
// CacheWrap, and its own Query (iavl.Store.Query) at odd heights, with and
// without zero copy, over pairs read from a snapshot.
// (iavl's UnsavedFastIterator reports Valid, Key and Value of its last pair
// after Close; ours is invalid then, as dbm.Iterator wants: not compared.)
func TestTreeStoreSurface(t *testing.T) {
	for _, zc := range []bool{false, true} {
		t.Run(fmt.Sprint("zc=", zc), func(t *testing.T) {
			p := rkNewPair(t, zc)
			ak := p.keys["a"]
			p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte{}}, {[]byte("k3"), []byte{}}}})
			if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			p.commit(map[string][][2][]byte{"b": {{[]byte("x"), []byte("y")}}})
			ops := map[string]func(s types.CommitMultiStore) any{
				"iter all":  func(s types.CommitMultiStore) any { return rkDump(s.GetKVStore(ak).Iterator(nil, nil)) },
				"riter all": func(s types.CommitMultiStore) any { return rkDump(s.GetKVStore(ak).ReverseIterator(nil, nil)) },
				"get k3": func(s types.CommitMultiStore) any {
					v := s.GetKVStore(ak).Get([]byte("k3"))
					return fmt.Sprint(v == nil, len(v))
				},
				"has k3": func(s types.CommitMultiStore) any { return s.GetKVStore(ak).Has([]byte("k3")) },
				"branch get": func(s types.CommitMultiStore) any {
					v := s.CacheMultiStore().GetKVStore(ak).Get([]byte("k3"))
					return fmt.Sprint(v == nil, len(v))
				},
				"branch iter": func(s types.CommitMultiStore) any {
					return rkDump(s.CacheMultiStore().GetKVStore(ak).Iterator(nil, nil))
				},
				"next after end": func(s types.CommitMultiStore) any {
					it := s.GetKVStore(ak).Iterator(nil, nil)
					for it.Valid() {
						it.Next()
					}
					it.Next()
					return fmt.Sprintf("%v %q %q %v", it.Valid(), it.Key(), it.Value(), it.Error())
				},
				"next after close": func(s types.CommitMultiStore) any {
					it := s.GetKVStore(ak).Iterator(nil, nil)
					it.Close()
					it.Next()
					return fmt.Sprintf("%v %q %q %v", it.Valid(), it.Key(), it.Value(), it.Error())
				},
				"domain empty": func(s types.CommitMultiStore) any {
					it := s.GetKVStore(ak).Iterator([]byte{}, []byte{})
					a, b := it.Domain()
					return fmt.Sprintf("%q %v %q %v %v", a, a == nil, b, b == nil, it.Valid())
				},
				"domain rev": func(s types.CommitMultiStore) any {
					it := s.GetKVStore(ak).ReverseIterator([]byte("k1"), []byte("k3"))
					a, b := it.Domain()
					return fmt.Sprintf("%q %q", a, b)
				},
				"gas get": func(s types.CommitMultiStore) any {
					gm := types.NewInfiniteGasMeter()
					g := gaskv.NewStore(s.GetKVStore(ak), gm, types.KVGasConfig())
					g.Get([]byte("k1"))
					g.Get([]byte("k3"))
					g.Get([]byte("zz"))
					g.Has([]byte("k1"))
					rkDump(g.Iterator(nil, nil))
					rkDump(g.ReverseIterator([]byte("k2"), nil))
					return gm.GasConsumed()
				},
				"store LastCommitID": func(s types.CommitMultiStore) any { return s.GetCommitKVStore(ak).LastCommitID() },
				"store WorkingHash":  func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.GetCommitKVStore(ak).WorkingHash()) },
				"store b LastCommitID after write": func(s types.CommitMultiStore) any {
					st := s.GetCommitKVStore(p.keys["b"])
					st.(types.KVStore).Set([]byte("q"), []byte("q"))
					return st.LastCommitID()
				},
				"cachewrap type": func(s types.CommitMultiStore) any { return fmt.Sprintf("%T", s.GetCommitKVStore(ak).CacheWrap()) },
				"hist next after close": func(s types.CommitMultiStore) any {
					b, _ := s.CacheMultiStoreWithVersion(1)
					it := b.GetKVStore(ak).Iterator(nil, nil)
					it.Close()
					return fmt.Sprintf("%v", it.Valid())
				},
			}
			for name, f := range ops {
				sameOutcome(t, name, p, f)
			}
			// direct queries
			for _, q := range []types.RequestQuery{
				{Path: "/key", Data: []byte("k1")},
				{Path: "/key", Data: []byte("k1"), Prove: true},
				{Path: "/key", Data: []byte("k3"), Height: 1, Prove: true},
				{Path: "/key", Data: []byte("k3"), Height: 5, Prove: true},
				{Path: "/key", Data: []byte("k3"), Height: -1, Prove: true},
				{Path: "/key", Data: nil},
				{Path: "/subspace", Data: []byte("k")},
				{Path: "/bad", Data: []byte("k")},
			} {
				qa, qb := q, q
				ra, ea := p.ours.GetCommitKVStore(ak).(types.Queryable).Query(&qa)
				rb, eb := p.oracle.GetCommitKVStore(ak).(types.Queryable).Query(&qb)
				if err := sameResponse(ra, ea, rb, eb); err != nil {
					t.Errorf("direct query %+v: %v", q, err)
				}
			}
		})
	}
}

// TestTreeStoreLongKeysAndHistoricalWrites: keys longer than
// types.MaxKeyLength in Delete, Get, Has and iterator bounds (iavl.Store
// checks the length in Set only), and writes written back to a historical
// branch (both panic; the messages differ: ErrReadOnlyVersion, documented in
// errors.go, against iavl's "cannot call 'Set' on an immutable IAVL tree").
func TestTreeStoreLongKeysAndHistoricalWrites(t *testing.T) {
	p := newPair(t, smallMount)
	ak := p.keys["a"]
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v2")}}})
	long := make([]byte, types.MaxKeyLength+10)
	sameOutcome(t, "Delete of a long key", p, func(s types.CommitMultiStore) any {
		s.GetKVStore(ak).Delete(long)
		return fmt.Sprintf("%X", s.WorkingHash())
	})
	sameOutcome(t, "Get/Has of a long key", p, func(s types.CommitMultiStore) any {
		return fmt.Sprint(s.GetKVStore(ak).Get(long), s.GetKVStore(ak).Has(long))
	})
	sameOutcome(t, "iterators from a long key", p, func(s types.CommitMultiStore) any {
		return rkDump(s.GetKVStore(ak).Iterator(long, nil)) + rkDump(s.GetKVStore(ak).ReverseIterator(nil, long))
	})
	sameOutcome(t, "commit", p, func(s types.CommitMultiStore) any { return s.Commit() })
	for name, f := range map[string]func(kv types.KVStore){
		"set":    func(kv types.KVStore) { kv.Set([]byte("z"), []byte("z")) },
		"delete": func(kv types.KVStore) { kv.Delete([]byte("k1")) },
	} {
		for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
			b, err := s.CacheMultiStoreWithVersion(1)
			if err != nil {
				t.Fatal(err)
			}
			f(b.GetKVStore(ak))
			got := outcome(func() any { b.Write(); return nil })
			t.Logf("historical %s written back, %T: %s", name, s, got)
			if !strings.HasPrefix(got, "panic") {
				t.Errorf("historical %s written back, %T: %s, want a panic", name, s, got)
			}
		}
	}
}

// TestTreeStoreUpgradedStoresCommitIDs: LastCommitID, WorkingHash and the
// store's own Query of a kept store, a store added and a store renamed by
// the load's upgrades, before and after the next commit.
func TestTreeStoreUpgradedStoresCommitIDs(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("x"), []byte("1")}}, "b": {{[]byte("x"), []byte("y")}}})
	m2 := mount{iavl: []string{"a", "b2", "c"}, transient: "t", memory: "m"}
	up := &types.StoreUpgrades{Added: []string{"c"}, Renamed: []types.StoreRename{{OldKey: "b", NewKey: "b2"}}}
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, m2, up)
	p.oracle = newOracle(t, p.odb, p.keys, m2, up)
	// (with Prove at height 0 before the first commit of the added and the
	// renamed store rootmulti panics; ours answers without a proof: README)
	check := func(stage string, prove bool) {
		for _, n := range []string{"a", "b2", "c"} {
			k := p.keys[n]
			sameOutcome(t, stage+" LastCommitID "+n, p, func(s types.CommitMultiStore) any { return s.GetCommitKVStore(k).LastCommitID() })
			sameOutcome(t, stage+" WorkingHash "+n, p, func(s types.CommitMultiStore) any {
				return fmt.Sprintf("%X", s.GetCommitKVStore(k).WorkingHash())
			})
			sameOutcome(t, stage+" store Query "+n, p, func(s types.CommitMultiStore) any {
				r, err := s.GetCommitKVStore(k).(types.Queryable).Query(&types.RequestQuery{Path: "/key", Data: []byte("x"), Prove: prove})
				if err != nil {
					return err
				}
				return fmt.Sprintf("h=%d log=%q v=%q proof=%d", r.Height, r.Log, r.Value, len(r.ProofOps.GetOps()))
			})
		}
	}
	check("after the upgrade load", false)
	p.commit(map[string][][2][]byte{"c": {{[]byte("x"), []byte("c")}}})
	check("after the commit", true)
}
