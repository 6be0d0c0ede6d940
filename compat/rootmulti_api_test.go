package compat_test

// API edges run side by side against rootmulti over cosmos/iavl
// (cosmossdk.io/store v1.1.1): loads refused before the first version,
// reloads between a store-removing upgrade and its commit, store key type
// errors, queries of removed stores, query paths, rollbacks, initial
// versions, extreme heights, self-renames.

import (
	"fmt"
	"reflect"
	"testing"

	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/types"
)

var sideNothing = pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)

// TestSideAPILoadVersionBeforeFirstVersion: a chain with initial version 5
// never committed versions 1..4. LoadVersion(4) and LoadVersion(1) are
// refused with rootmulti's "no commit info found" before anything changes:
// the stores keep their uncommitted writes and the memory store its
// contents, and the next commit has them.
func TestSideAPILoadVersionBeforeFirstVersion(t *testing.T) {
	z := newSide(t, sideNothing)
	mk := types.NewMemoryStoreKey("mem")
	z.c.MountStoreWithDB(mk, types.StoreTypeMemory, nil)
	z.o.MountStoreWithDB(mk, types.StoreTypeMemory, nil)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.same("SetInitialVersion(5)", func(s types.CommitMultiStore) any { return s.SetInitialVersion(5) })
	z.set("store1", "k", "v")
	z.commit()
	z.set("store1", "k2", "v2")
	z.commit()
	z.same("GetCommitInfo(4)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 4) })
	z.set("store1", "pending", "p")
	z.c.GetKVStore(mk).Set([]byte("cap"), []byte("1"))
	z.o.GetKVStore(mk).Set([]byte("cap"), []byte("1"))
	for _, v := range []int64{4, 1} {
		z.same(fmt.Sprintf("LoadVersion(%d)", v), func(s types.CommitMultiStore) any { return s.LoadVersion(v) })
		z.same(fmt.Sprintf("uncommitted write after LoadVersion(%d)", v), func(s types.CommitMultiStore) any {
			return getByName(s, "store1", "pending")
		})
		z.same(fmt.Sprintf("memory store after LoadVersion(%d)", v), func(s types.CommitMultiStore) any {
			return fmt.Sprintf("%q", s.GetKVStore(mk).Get([]byte("cap")))
		})
		z.sameLCID()
	}
	z.commit() // version 7 with the pending write in both
}

// TestSideAPIReloadBeforeCommitKeepsDeletedStore: a load that deletes a
// mounted store, then another load before any commit. As in rootmulti the
// store stays mounted until the commit (GetKVStore, StoreKeysByName and
// queries find it) and the commit still drops it; only a plain reload's
// reads of it differ (sideAccepted). After the commit it is unmounted.
func TestSideAPIReloadBeforeCommitKeepsDeletedStore(t *testing.T) {
	del := &types.StoreUpgrades{Deleted: []string{"store3"}}
	for _, tc := range []struct {
		name   string
		reload func(s types.CommitMultiStore) error
	}{
		{"LoadLatestVersion", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() }},
		{"same upgrades again", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(del) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := newSide(t, sideNothing)
			z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.set("store1", "k", "v")
			z.set("store3", "k", "v3")
			z.commit()
			z.fresh(sideStores, sideNothing)
			z.loadBoth("delete store3", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(del) })
			z.want("store3 after the upgrade load", `""`, func(s types.CommitMultiStore) any { return getByName(s, "store3", "k") })
			z.loadBoth("reload before commit", tc.reload)
			k3 := z.keys["store3"]
			read := func(s types.CommitMultiStore) any { return fmt.Sprintf("%q", s.GetKVStore(k3).Get([]byte("k"))) }
			if tc.name == "LoadLatestVersion" {
				z.acceptedBoth("reload-before-commit/read", read)
			} else {
				z.same("GetKVStore(store3) after the reload", read)
				z.same("GetStoreByName(store3) after the reload", func(s types.CommitMultiStore) any { return getByName(s, "store3", "k") })
			}
			z.same("StoreKeysByName after the reload", func(s types.CommitMultiStore) any { return keyNames(s) })
			z.same("query /store3/key after the reload", func(s types.CommitMultiStore) any {
				return queryOf(s, types.RequestQuery{Path: "/store3/key", Data: []byte("k"), Height: 1})
			})
			z.commit()
			z.same("commit info after", func(s types.CommitMultiStore) any { return commitInfoNames(s, 2) })
			z.samePanicness("GetKVStore(store3) after the commit", func(s types.CommitMultiStore) any { return s.GetKVStore(k3) })
			z.loadBoth("reload after the commit", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.same("StoreKeysByName after the commit and a reload", func(s types.CommitMultiStore) any { return keyNames(s) })
			z.set("store1", "k", "again")
			z.commit()
		})
	}
}

// TestSideAPIWrongStoreKeyTypeError: a transient or memory store mounted
// with a KVStoreKey fails the load with rootmulti's error text ("failed to
// load store: ...").
func TestSideAPIWrongStoreKeyTypeError(t *testing.T) {
	for _, typ := range []types.StoreType{types.StoreTypeTransient, types.StoreTypeMemory} {
		t.Run(typ.String(), func(t *testing.T) {
			z := newSide(t, sideNothing)
			k := types.NewKVStoreKey("wrongkey")
			z.c.MountStoreWithDB(k, typ, nil)
			z.o.MountStoreWithDB(k, typ, nil)
			z.same("load", func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
		})
	}
}

// TestSideAPIDeletedStoreIsQueryable: between a load that deletes a mounted
// store and the next commit, the store GetCommitKVStore returns is a
// types.Queryable answering "/key" from its committed versions, as
// rootmulti's *iavl.Store, and the multistore's Query agrees.
func TestSideAPIDeletedStoreIsQueryable(t *testing.T) {
	z := newSide(t, sideNothing)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store3", "k", "v3")
	z.commit()
	z.commit()
	z.fresh(sideStores, sideNothing)
	z.loadBoth("delete store3", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Deleted: []string{"store3"}})
	})
	z.same("store query of store3", func(s types.CommitMultiStore) any {
		q, ok := s.GetCommitKVStore(z.keys["store3"]).(types.Queryable)
		if !ok {
			return "not queryable"
		}
		res, err := q.Query(&types.RequestQuery{Path: "/key", Data: []byte("k"), Height: 1})
		if err != nil {
			return err
		}
		return fmt.Sprintf("h=%d %q", res.Height, res.Value)
	})
	// the multistore's own Query agrees
	z.same("MultiStore query of store3", func(s types.CommitMultiStore) any {
		return queryOf(s, types.RequestQuery{Path: "/store3/key", Data: []byte("k"), Prove: true})
	})
}

// ---------------------------------------------------------------------------
// passing coverage

// TestSideAPIQueryPathsAndStoreQuery: path forms and empty data not in the
// existing tests, the CommitKVStore's own Query (iavl.Store.Query), and deep
// equality of the commit infos.
func TestSideAPIQueryPathsAndStoreQuery(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}}})
	p.commit(map[string][][2][]byte{"b": {{[]byte("k2"), []byte("v2")}}})
	for _, q := range []types.RequestQuery{
		{Path: "/t/key", Data: []byte("k"), Prove: true},
		{Path: "/m/subspace", Data: []byte("k")},
		{Path: "/a/key", Data: nil, Prove: true},
		{Path: "/a/subspace", Data: nil},
		{Path: "/a/subspace", Data: []byte{}, Prove: true},
		{Path: "/a/subspace", Data: []byte("k"), Height: 100},
		{Path: "/a/subspace", Data: []byte("k"), Height: -3},
		{Path: "/a/key", Data: []byte("k1"), Height: 2, Prove: true},
		{Path: "/a/bogus", Data: []byte("k1"), Prove: true},
		{Path: "/a/key/", Data: []byte("k1"), Prove: true},
		{Path: "//key", Data: []byte("k1")},
	} {
		edgeQuery(t, p, q)
	}
	ak := p.keys["a"]
	for _, q := range []types.RequestQuery{
		{Path: "/key", Data: []byte("k1")},
		{Path: "/key", Data: []byte("k1"), Prove: true},
		{Path: "/key", Data: []byte("k1"), Height: 1, Prove: true},
		{Path: "/key", Data: []byte("zz"), Height: 2, Prove: true},
		{Path: "/key", Data: []byte("k1"), Height: 9, Prove: true},
		{Path: "/key", Data: []byte("k1"), Height: -1},
		{Path: "/subspace", Data: []byte("k")},
		{Path: "/other", Data: []byte("k")},
		{Path: "/key", Data: nil},
	} {
		sameOutcome(t, fmt.Sprintf("store query %+v", q), p, func(s types.CommitMultiStore) any {
			qq := q
			res, err := s.GetCommitKVStore(ak).(types.Queryable).Query(&qq)
			if res == nil {
				return fmt.Sprintf("nil %v", err)
			}
			bz, _ := res.ProofOps.Marshal()
			return fmt.Sprintf("%v h=%d k=%q v=%q log=%q proof=%X", err, res.Height, res.Key, res.Value, res.Log, bz)
		})
	}
	for _, v := range []int64{1, 2} {
		a, ea := p.ours.GetCommitInfo(v)
		b, eb := p.oracle.GetCommitInfo(v)
		if ea != nil || eb != nil {
			t.Fatal(ea, eb)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("GetCommitInfo(%d): %#v, rootmulti %#v", v, a, b)
		}
	}
	sameOutcome(t, "historical branch reads the live transient store", p, func(s types.CommitMultiStore) any {
		s.GetKVStore(p.keys["t"]).Set([]byte("x"), []byte("y"))
		c, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return fmt.Sprintf("%q", c.GetKVStore(p.keys["t"]).Get([]byte("x")))
	})
	sameOutcome(t, "RollbackToVersion(-1)", p, func(s types.CommitMultiStore) any { return s.RollbackToVersion(-1) })
}

// TestSideAPIRollbackBeforeFirstVersion: a rollback to a version before
// the initial one is refused by both, keeping the uncommitted writes.
func TestSideAPIRollbackBeforeFirstVersion(t *testing.T) {
	z := newSide(t, sideNothing)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.same("SetInitialVersion(5)", func(s types.CommitMultiStore) any { return s.SetInitialVersion(5) })
	z.set("store1", "k", "v")
	z.commit()
	z.set("store1", "k2", "v2")
	z.commit()
	z.set("store1", "pending", "p")
	z.same("RollbackToVersion(4) refused", func(s types.CommitMultiStore) any { return s.RollbackToVersion(4) != nil })
	z.same("uncommitted write after the refused rollback", func(s types.CommitMultiStore) any { return getByName(s, "store1", "pending") })
	z.sameLCID()
	z.commit()
}

// TestSideAPISetInitialVersionTwice: the last SetInitialVersion before the
// first commit wins, also when lower or 0/1.
func TestSideAPISetInitialVersionTwice(t *testing.T) {
	for _, seq := range [][]int64{{5, 3}, {5, 0}, {5, 1}, {3, 5}, {5, 5}} {
		t.Run(fmt.Sprint(seq), func(t *testing.T) {
			z := newSide(t, sideNothing)
			z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			for _, v := range seq {
				z.same(fmt.Sprintf("SetInitialVersion(%d)", v), func(s types.CommitMultiStore) any { return s.SetInitialVersion(v) })
			}
			z.set("store1", "k", "v")
			z.commit()
			z.commit()
		})
	}
}

// TestSideAPIExtremeHeights: MaxInt64/MinInt64 heights in queries,
// historical branches and commit infos.
func TestSideAPIExtremeHeights(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}}})
	for _, h := range []int64{1<<63 - 1, -1 << 63} {
		for _, prove := range []bool{false, true} {
			edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("k1"), Height: h, Prove: prove})
			edgeQuery(t, p, types.RequestQuery{Path: "/a/subspace", Data: []byte("k"), Height: h, Prove: prove})
		}
		sameOutcome(t, fmt.Sprintf("CacheMultiStoreWithVersion(%d)", h), p, func(s types.CommitMultiStore) any {
			_, err := s.CacheMultiStoreWithVersion(h)
			return err
		})
		sameOutcome(t, fmt.Sprintf("GetCommitInfo(%d)", h), p, func(s types.CommitMultiStore) any {
			_, err := getCommitInfo(s, h)
			return err
		})
	}
}

// TestSideAPIRenameOntoItself: a rename of a store to its own name, on a
// fresh database and on one with versions.
func TestSideAPIRenameOntoItself(t *testing.T) {
	self := &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store1", NewKey: "store1"}}}
	t.Run("fresh", func(t *testing.T) {
		z := newSide(t, sideNothing)
		z.same("load", func(s types.CommitMultiStore) any { return s.LoadLatestVersionAndUpgrade(self) })
		z.same("has store1", func(s types.CommitMultiStore) any { return storeByName(s, "store1") != nil })
		z.commit()
		z.same("has store1 after the commit", func(s types.CommitMultiStore) any { return storeByName(s, "store1") != nil })
		z.same("commit info", func(s types.CommitMultiStore) any { return commitInfoNames(s, 1) })
	})
	t.Run("after commits", func(t *testing.T) {
		z := newSide(t, sideNothing)
		z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
		z.set("store1", "k", "v")
		z.commit()
		z.fresh(sideStores, sideNothing)
		z.same("load refused", func(s types.CommitMultiStore) any { return s.LoadLatestVersionAndUpgrade(self) != nil })
	})
}
