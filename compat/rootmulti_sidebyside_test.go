package compat_test

// Side-by-side tests of the multistore's less-used calls against rootmulti
// (cosmossdk.io/store v1.1.1 over a cosmos-db memdb): queries after deletes
// at every height, working hashes with transient and memory stores, store
// lookups, rollbacks to the latest and older versions with recommits, store
// upgrade combinations and repeated loads before a commit, ADR-038 listeners
// with deletes and overwrites through nested branches, and a randomized mix
// of all of them. The accepted differences of rootmulti_side_test.go
// (sideAccepted) and compat/README.md are avoided, not compared.

import (
	"fmt"
	"math/rand"
	"testing"

	"cosmossdk.io/store/types"
)

func TestSideBySideQueryAfterDeletes(t *testing.T) {
	z := newSide(t, sideNothing)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "k1", "a")
	z.set("store1", "k2", "b")
	z.set("store1", "k3", "c")
	z.commit()
	z.c.GetStoreByName("store1").(types.KVStore).Delete([]byte("k1"))
	z.o.GetStoreByName("store1").(types.KVStore).Delete([]byte("k1"))
	z.set("store1", "k2", "bb")
	z.commit()
	// delete everything
	for _, k := range []string{"k2", "k3"} {
		z.c.GetStoreByName("store1").(types.KVStore).Delete([]byte(k))
		z.o.GetStoreByName("store1").(types.KVStore).Delete([]byte(k))
	}
	z.commit()
	// "/subspace" reads the working state in rootmulti, the last committed
	// version in ours (README): compared with nothing uncommitted
	for _, h := range []int64{0, 1, 2, 3, 4, -1} {
		for _, k := range []string{"k1", "k2", "k3", "k0", "k4", "k9"} {
			for _, prove := range []bool{false, true} {
				q := types.RequestQuery{Path: "/store1/key", Data: []byte(k), Height: h, Prove: prove}
				z.same(fmt.Sprintf("query %s h=%d prove=%v", k, h, prove), func(s types.CommitMultiStore) any { return queryOf(s, q) })
			}
		}
		q := types.RequestQuery{Path: "/store1/subspace", Data: []byte("k"), Height: h}
		z.same(fmt.Sprintf("subspace h=%d", h), func(s types.CommitMultiStore) any { return queryOf(s, q) })
		q = types.RequestQuery{Path: "/store2/key", Data: []byte("k"), Height: h, Prove: true}
		z.same(fmt.Sprintf("empty store2 h=%d", h), func(s types.CommitMultiStore) any { return queryOf(s, q) })
	}
	z.set("store1", "k9", "z")
	z.commit()
}

func TestSideBySideWorkingHash(t *testing.T) {
	z := newSide(t, sideNothing)
	tk := z.keys.key("tr", types.StoreTypeTransient)
	mk := z.keys.key("me", types.StoreTypeMemory)
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		s.MountStoreWithDB(tk, types.StoreTypeTransient, nil)
		s.MountStoreWithDB(mk, types.StoreTypeMemory, nil)
	}
	z.same("WorkingHash before load", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	wh := func(what string) {
		z.same("WorkingHash "+what, func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
	}
	wh("after load")
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		s.GetKVStore(tk).Set([]byte("t"), []byte("t"))
		s.GetKVStore(mk).Set([]byte("m"), []byte("m"))
	}
	wh("after transient/mem writes")
	z.set("store1", "a", "1")
	wh("after write")
	wh("twice")
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		s.GetKVStore(z.keys["store1"]).Delete([]byte("a"))
	}
	wh("after delete back")
	z.set("store1", "a", "1")
	z.commit()
	z.same("transient after commit", func(s types.CommitMultiStore) any { return fmt.Sprintf("%q", s.GetKVStore(tk).Get([]byte("t"))) })
	z.same("memory after commit", func(s types.CommitMultiStore) any { return fmt.Sprintf("%q", s.GetKVStore(mk).Get([]byte("m"))) })
	z.same("commit info", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })
	// per-store working hash
	z.set("store2", "x", "y")
	for _, n := range sideStores {
		z.same("store WorkingHash "+n, func(s types.CommitMultiStore) any {
			return fmt.Sprintf("%X", s.GetCommitKVStore(z.keys[n]).WorkingHash())
		})
		z.same("store LastCommitID "+n, func(s types.CommitMultiStore) any {
			return s.GetCommitKVStore(z.keys[n]).LastCommitID()
		})
	}
	// CacheWrap/Write
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		cw := s.CacheWrap().(types.CacheMultiStore)
		cw.GetKVStore(z.keys["store3"]).Set([]byte("c"), []byte("w"))
		cw.GetKVStore(z.keys["store1"]).Delete([]byte("a"))
		cw.GetKVStore(tk).Set([]byte("t2"), []byte("t"))
		cw.Write()
		cw2 := s.CacheWrapWithTrace(nil, nil).(types.CacheMultiStore)
		cw2.GetKVStore(z.keys["store3"]).Set([]byte("d"), []byte("w"))
		// not written
	}
	wh("after CacheWrap write")
	z.commit()
	z.same("GetStore unmounted", func(s types.CommitMultiStore) any { return s.GetStore(types.NewKVStoreKey("nope")) })
	z.same("GetKVStore unmounted", func(s types.CommitMultiStore) any { return s.GetKVStore(types.NewKVStoreKey("nope")) })
	z.same("GetCommitKVStore unmounted", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(types.NewKVStoreKey("nope")) == nil })
	z.same("GetCommitStore unmounted", func(s types.CommitMultiStore) any { return s.GetCommitStore(types.NewKVStoreKey("nope")) == nil })
	z.same("GetStore same-name other key", func(s types.CommitMultiStore) any { return s.GetStore(types.NewKVStoreKey("store1")) })
	z.same("GetStore transient type", func(s types.CommitMultiStore) any { return fmt.Sprintf("%T", s.GetStore(tk)) })
	z.same("GetStore mem type", func(s types.CommitMultiStore) any { return fmt.Sprintf("%T", s.GetStore(mk)) })
	z.samePanicness("branch GetKVStore unmounted", func(s types.CommitMultiStore) any {
		return s.CacheMultiStore().GetKVStore(types.NewKVStoreKey("nope"))
	})
	z.samePanicness("versioned branch GetKVStore unmounted", func(s types.CommitMultiStore) any {
		c, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return c.GetKVStore(types.NewKVStoreKey("nope"))
	})
	z.same("GetStoreType", func(s types.CommitMultiStore) any { return s.GetStoreType() })
	z.same("transient CommitKVStore LastCommitID", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(tk).LastCommitID() })
	z.same("mem CommitKVStore LastCommitID", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(mk).LastCommitID() })
	z.same("query transient", func(s types.CommitMultiStore) any {
		return queryOf(s, types.RequestQuery{Path: "/tr/key", Data: []byte("t")})
	})
	z.same("query mem", func(s types.CommitMultiStore) any {
		return queryOf(s, types.RequestQuery{Path: "/me/subspace", Data: []byte("t"), Prove: true})
	})
}

func TestSideBySideRollback(t *testing.T) {
	z := newSide(t, sideNothing)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	for i := 1; i <= 4; i++ {
		z.set("store1", "k", fmt.Sprint(i))
		z.commit()
	}
	z.set("store1", "pending", "p")
	z.same("RollbackToVersion(4) latest", func(s types.CommitMultiStore) any { return s.RollbackToVersion(4) })
	z.sameLCID()
	z.same("pending after rollback to latest", func(s types.CommitMultiStore) any { return getByName(s, "store1", "pending") })
	z.same("WorkingHash after rollback", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
	z.same("RollbackToVersion(1)", func(s types.CommitMultiStore) any { return s.RollbackToVersion(1) })
	z.sameLCID()
	z.same("k after rollback to 1", func(s types.CommitMultiStore) any { return getByName(s, "store1", "k") })
	z.set("store1", "k", "new2")
	z.commit()
	for _, h := range []int64{0, 1, 2, 3} {
		q := types.RequestQuery{Path: "/store1/key", Data: []byte("k"), Height: h, Prove: true}
		z.same(fmt.Sprintf("query h=%d after recommit", h), func(s types.CommitMultiStore) any { return queryOf(s, q) })
		z.same(fmt.Sprintf("CMSWV(%d)", h), func(s types.CommitMultiStore) any {
			c, err := s.CacheMultiStoreWithVersion(h)
			if err != nil {
				return "err"
			}
			return fmt.Sprintf("%q", c.GetKVStore(z.keys["store1"]).Get([]byte("k")))
		})
	}
	z.same("GetCommitInfo(2)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 2) })
	z.same("GetCommitInfo(1)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })
	z.same("SetInitialVersion(10) after commits", func(s types.CommitMultiStore) any { return s.SetInitialVersion(10) })
	z.commit()
	z.same("LoadVersion(2)", func(s types.CommitMultiStore) any { return s.LoadVersion(2) })
	z.sameLCID()
	z.same("RollbackToVersion(2) after LoadVersion(2)", func(s types.CommitMultiStore) any { return s.RollbackToVersion(2) })
	z.sameLCID()
	z.commit()
}

func TestSideBySideUpgradeCombos(t *testing.T) {
	cases := []struct {
		name  string
		mount []string
		up    *types.StoreUpgrades
	}{
		{"added+deleted new", []string{"store1", "store2", "store3", "n"}, &types.StoreUpgrades{Added: []string{"n"}, Deleted: []string{"n"}}},
		{"added+deleted existing", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Added: []string{"store3"}, Deleted: []string{"store3"}}},
		{"renamed+added new", []string{"store1", "store3", "n"}, &types.StoreUpgrades{Added: []string{"n"}, Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}},
		{"renamed+deleted new", []string{"store1", "store3", "n"}, &types.StoreUpgrades{Deleted: []string{"n"}, Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}},
		{"renamed old deleted (old unmounted)", []string{"store1", "store3", "n"}, &types.StoreUpgrades{Deleted: []string{"store2"}, Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}},
		{"renamed old deleted (old mounted)", []string{"store1", "store2", "store3", "n"}, &types.StoreUpgrades{Deleted: []string{"store2"}, Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}},
		{"renamed to unmounted", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}},
		{"renamed to unmounted, old unmounted", []string{"store1", "store3"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}},
		{"deleted unmounted", []string{"store1", "store3"}, &types.StoreUpgrades{Deleted: []string{"store2"}}},
		{"deleted unmounted nonexistent", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Deleted: []string{"zzz"}}},
		{"added unmounted", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Added: []string{"zzz"}}},
		{"added twice", []string{"store1", "store2", "store3", "n"}, &types.StoreUpgrades{Added: []string{"n", "n"}}},
		{"deleted twice", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Deleted: []string{"store3", "store3"}}},
		{"two renames to same new", []string{"store1", "n"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}, {OldKey: "store3", NewKey: "n"}}}},
		{"swap", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "store3"}, {OldKey: "store3", NewKey: "store2"}}}},
		{"rename then delete new", []string{"store1", "store3", "n"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}, Deleted: []string{"n"}}},
		{"empty names", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Added: []string{""}, Deleted: []string{""}, Renamed: []types.StoreRename{{OldKey: "", NewKey: ""}}}},
		{"empty upgrades", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{}},
		{"deleted all", []string{"store1", "store2", "store3"}, &types.StoreUpgrades{Deleted: []string{"store1", "store2", "store3"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			z := newSide(t, sideNothing)
			z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.set("store1", "k", "1")
			z.set("store2", "k", "2")
			z.set("store3", "k", "3")
			z.commit()
			z.set("store2", "k2", "22")
			z.commit()
			mount := tc.mount
			z.fresh(mount, sideNothing)
			a, b := z.both(func(s types.CommitMultiStore) any { return s.LoadLatestVersionAndUpgrade(tc.up) })
			t.Logf("load: ours %s | rootmulti %s", a, b)
			if (a == "<nil>") != (b == "<nil>") {
				t.Errorf("DIFF load: ours %s | rootmulti %s", a, b)
				return
			}
			if a != "<nil>" {
				return
			}
			z.same("WorkingHash", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
			for _, n := range mount {
				z.same("get "+n, func(s types.CommitMultiStore) any { return getByName(s, n, "k") })
				z.same("get2 "+n, func(s types.CommitMultiStore) any { return getByName(s, n, "k2") })
			}
			z.set("store1", "after", "x")
			z.commit()
			z.same("commit info 3", func(s types.CommitMultiStore) any { return commitInfoOf(s, 3) })
			for _, n := range mount {
				z.same("get after commit "+n, func(s types.CommitMultiStore) any { return getByName(s, n, "k") })
				for _, h := range []int64{0, 2, 3} {
					q := types.RequestQuery{Path: "/" + n + "/key", Data: []byte("k"), Height: h, Prove: true}
					z.same(fmt.Sprintf("query %s h=%d", n, h), func(s types.CommitMultiStore) any { return queryOf(s, q) })
				}
			}
			z.commit()
			// ours keeps removed stores' keys until the next load (sideAccepted)
			z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.same("keys after reload", func(s types.CommitMultiStore) any { return keyNames(s) })
			z.sameLCID()
		})
	}
}

func TestSideBySideDoubleLoads(t *testing.T) {
	type ld struct {
		mount []string // extra mounts before this load
		up    *types.StoreUpgrades
	}
	for _, tc := range []struct {
		name  string
		loads []ld
	}{
		{"rename then plain reload", []ld{{[]string{"n"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}}, {nil, nil}}},
		{"rename then same rename", []ld{{[]string{"n"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}}, {nil, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "n"}}}}}},
		{"delete then rename deleted", []ld{{nil, &types.StoreUpgrades{Deleted: []string{"store3"}}}, {[]string{"n"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store3", NewKey: "n"}}}}}},
		{"add then plain reload", []ld{{[]string{"n"}, &types.StoreUpgrades{Added: []string{"n"}}}, {nil, nil}}},
		{"add then add again", []ld{{[]string{"n"}, &types.StoreUpgrades{Added: []string{"n"}}}, {nil, &types.StoreUpgrades{Added: []string{"n"}}}}},
		{"delete then add other", []ld{{nil, &types.StoreUpgrades{Deleted: []string{"store3"}}}, {[]string{"n"}, &types.StoreUpgrades{Added: []string{"n"}}}}},
		{"delete then delete other", []ld{{nil, &types.StoreUpgrades{Deleted: []string{"store3"}}}, {nil, &types.StoreUpgrades{Deleted: []string{"store2"}}}}},
		{"delete then LoadVersion(1)", []ld{{nil, &types.StoreUpgrades{Deleted: []string{"store3"}}}, {nil, nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := newSide(t, sideNothing)
			z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.set("store1", "k", "1")
			z.set("store2", "k", "2")
			z.set("store3", "k", "3")
			z.commit()
			if tc.name[:6] == "rename" {
				z.fresh([]string{"store1", "store3"}, sideNothing)
			} else {
				z.fresh(sideStores, sideNothing)
			}
			for i, l := range tc.loads {
				for _, n := range l.mount {
					k := z.keys.key(n, types.StoreTypeIAVL)
					z.c.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
					z.o.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
				}
				up := l.up
				a, b := z.both(func(s types.CommitMultiStore) any { return s.LoadLatestVersionAndUpgrade(up) })
				t.Logf("load %d: ours %s | rootmulti %s", i, a, b)
				if (a == "<nil>") != (b == "<nil>") {
					t.Errorf("DIFF load %d: ours %s | rootmulti %s", i, a, b)
				}
				z.same(fmt.Sprintf("WorkingHash after load %d", i), func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
			}
			z.set("store1", "x", "y")
			z.commit()
			z.same("commit info", func(s types.CommitMultiStore) any { return commitInfoOf(s, 2) })
			for _, n := range []string{"store1", "store2", "store3", "n"} {
				z.same("get "+n, func(s types.CommitMultiStore) any { return getByName(s, n, "k") })
			}
		})
	}
}

func TestSideBySideListenersDeletes(t *testing.T) {
	z := newSide(t, sideNothing)
	tk := z.keys.key("tr", types.StoreTypeTransient)
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		s.MountStoreWithDB(tk, types.StoreTypeTransient, nil)
	}
	k1, k2, k3 := z.keys["store1"], z.keys["store2"], z.keys["store3"]
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		s.AddListeners([]types.StoreKey{k3, k1, tk, k2})
	}
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	pop := func(what string) {
		a := fmt.Sprintf("%v", z.c.PopStateCache())
		b := fmt.Sprintf("%v", z.o.PopStateCache())
		if a != b {
			t.Errorf("DIFF PopStateCache %s: ours %s | rootmulti %s", what, a, b)
		}
	}
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		cms := s.CacheMultiStore()
		for _, k := range []types.StoreKey{k3, k2, k1, tk} {
			st := cms.GetKVStore(k)
			st.Set([]byte("b"), []byte("1"))
			st.Set([]byte("a"), []byte("1"))
			st.Set([]byte("a"), []byte("2"))
			st.Delete([]byte("c"))
			st.Delete([]byte("b"))
		}
		inner := cms.CacheMultiStore()
		inner.GetKVStore(k1).Set([]byte("z"), []byte("z"))
		inner.GetKVStore(k1).Delete([]byte("a"))
		inner.Write()
		cms.Write()
		s.GetKVStore(k2).Set([]byte("a"), []byte("direct"))
		s.GetKVStore(k2).Delete([]byte("a"))
	}
	pop("branch writes")
	z.commit()
	pop("after commit")
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		cms, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			t.Fatal(err)
		}
		cms.GetKVStore(k1).Get([]byte("z"))
		cms.GetKVStore(tk).Set([]byte("x"), []byte("y"))
		cms.Write()
	}
	pop("versioned branch transient write")
}

func TestSideBySideRandomOps(t *testing.T) {
	for seed := int64(1); seed <= int64(scale(40, 12)); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			z := newSide(t, sideNothing)
			z.cfg.SnapshotInterval = 100000
			z.cfg.QueryViews = 2
			z.fresh(sideStores, sideNothing)
			tk := z.keys.key("tr", types.StoreTypeTransient)
			for _, s := range []types.CommitMultiStore{z.c, z.o} {
				s.MountStoreWithDB(tk, types.StoreTypeTransient, nil)
				s.AddListeners([]types.StoreKey{z.keys["store1"], z.keys["store2"], tk})
			}
			if r.Intn(2) == 0 {
				z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
				iv := int64(r.Intn(4))
				t.Logf("SetInitialVersion %d", iv)
				z.same("SetInitialVersion", func(s types.CommitMultiStore) any { return s.SetInitialVersion(iv) })
			} else {
				z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			}
			key := func() []byte { return []byte(fmt.Sprintf("k%d", r.Intn(12))) }
			store := func() types.StoreKey { return z.keys[sideStores[r.Intn(3)]] }
			for step := 0; step < 300; step++ {
				latest := z.c.LastCommitID().Version
				h := int64(r.Intn(int(latest)+3)) - 1
				switch op := r.Intn(16); op {
				case 0, 1, 2:
					k, v, sk := key(), []byte(fmt.Sprint(r.Intn(100))), store()
					for _, s := range []types.CommitMultiStore{z.c, z.o} {
						s.GetKVStore(sk).Set(k, v)
					}
				case 3:
					k, sk := key(), store()
					for _, s := range []types.CommitMultiStore{z.c, z.o} {
						s.GetKVStore(sk).Delete(k)
					}
				case 4:
					id := z.commit()
					t.Logf("step %d commit -> %d", step, id.Version)
				case 5:
					z.same("WorkingHash", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
				case 6:
					q := types.RequestQuery{Path: "/" + sideStores[r.Intn(3)] + "/key", Data: key(), Height: h, Prove: r.Intn(2) == 0}
					if q.Height == 0 && latest == 0 && q.Prove {
						continue
					}
					z.same(fmt.Sprintf("step %d query %+v", step, q), func(s types.CommitMultiStore) any { return queryOf(s, q) })
				case 7:
					sk, k := store(), key()
					z.same(fmt.Sprintf("step %d CMSWV(%d)", step, h), func(s types.CommitMultiStore) any {
						c, err := s.CacheMultiStoreWithVersion(h)
						if err != nil {
							return "err"
						}
						it := c.GetKVStore(sk).Iterator(nil, nil)
						defer it.Close()
						out := ""
						for ; it.Valid(); it.Next() {
							out += fmt.Sprintf("%s=%s,", it.Key(), it.Value())
						}
						return fmt.Sprintf("%q %s", c.GetKVStore(sk).Get(k), out)
					})
				case 8:
					if h <= latest {
						z.same(fmt.Sprintf("step %d GetCommitInfo(%d)", step, h), func(s types.CommitMultiStore) any { return commitInfoOf(s, h) })
					}
				case 9:
					ks := []types.StoreKey{store(), store(), tk}
					ops := make([][3]int, 8)
					for i := range ops {
						ops[i] = [3]int{r.Intn(3), r.Intn(12), r.Intn(3)}
					}
					nested := r.Intn(2) == 0
					for _, s := range []types.CommitMultiStore{z.c, z.o} {
						cms := s.CacheMultiStore()
						target := cms
						if nested {
							target = cms.CacheMultiStore()
						}
						for _, o := range ops {
							st := target.GetKVStore(ks[o[0]])
							k := []byte(fmt.Sprintf("k%d", o[1]))
							if o[2] == 0 {
								st.Delete(k)
							} else {
								st.Set(k, []byte(fmt.Sprint(o[2])))
							}
						}
						if nested {
							target.Write()
						}
						cms.Write()
					}
				case 10:
					a := fmt.Sprintf("%v", z.c.PopStateCache())
					b := fmt.Sprintf("%v", z.o.PopStateCache())
					if a != b {
						t.Errorf("DIFF step %d PopStateCache: ours %s | rootmulti %s", step, a, b)
					}
				case 11:
					// a reload after SetInitialVersion before the first commit is an
					// accepted difference (sideAccepted "initial-version-before-load")
					if r.Intn(4) == 0 && latest > 0 {
						t.Logf("step %d reload", step)
						z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
						z.sameLCID()
					}
				case 12:
					if r.Intn(4) == 0 && latest > 1 {
						target := latest - int64(r.Intn(3))
						if target < 1 {
							target = latest
						}
						t.Logf("step %d rollback %d", step, target)
						z.same(fmt.Sprintf("step %d Rollback(%d)", step, target), func(s types.CommitMultiStore) any { return s.RollbackToVersion(target) != nil })
						z.sameLCID()
					}
				case 13:
					sk, start := store(), key()
					z.same(fmt.Sprintf("step %d iterate root", step), func(s types.CommitMultiStore) any {
						it := s.GetKVStore(sk).ReverseIterator(start, nil)
						defer it.Close()
						out := ""
						for ; it.Valid(); it.Next() {
							out += fmt.Sprintf("%s=%s,", it.Key(), it.Value())
						}
						return out
					})
				case 14:
					q := types.RequestQuery{Path: "/" + sideStores[r.Intn(3)] + "/subspace", Data: []byte("k1"), Height: h}
					// documented: ours reads the last committed version; compare only right after a commit
					t.Logf("step %d commit (subspace) -> %d", step, z.commit().Version)
					z.same(fmt.Sprintf("step %d subspace", step), func(s types.CommitMultiStore) any { return queryOf(s, q) })
				case 15:
					sk := store()
					z.same(fmt.Sprintf("step %d store LCID/WH", step), func(s types.CommitMultiStore) any {
						st := s.GetCommitKVStore(sk)
						return fmt.Sprintf("%v %X", st.LastCommitID(), st.WorkingHash())
					})
				}
				if t.Failed() {
					t.FailNow()
				}
			}
		})
	}
}
