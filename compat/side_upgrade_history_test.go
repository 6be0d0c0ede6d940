package compat_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"
)

// TestSideBySideUpgradeHistory: random blocks with store upgrades (new
// stores added, mounted stores deleted or renamed to new names, on new
// instances and on the loaded ones), reloads, loads of older versions,
// rollbacks after the last upgrade, state listeners, state-sync streams,
// queries with proofs, historical branches and commit infos at random
// heights, side by side with rootmulti over cosmos/iavl, under random
// configurations (snapshot interval, view cache, zero-copy with an
// asynchronous log, initial version). Each seed is a subtest: rerun one
// with -run 'TestSideBySideUpgradeHistory/<seed>'.
func TestSideBySideUpgradeHistory(t *testing.T) {
	seeds := size(30, 15, 6)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { sideUpgradeHistory(t, seed) })
	}
}

func sideUpgradeHistory(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	z := newSide(t, sideNothing)
	z.cfg.SnapshotInterval = int64(1 + r.Intn(4))
	z.cfg.SnapshotKeepRecent = 100000
	z.cfg.QueryViews = 1 + r.Intn(3)
	if r.Intn(2) == 0 {
		z.cfg.ZeroCopy = true
		z.cfg.AsyncCommitBuffer = 1 + r.Intn(5)
	}
	mounted := []string{"store1", "store2", "store3"}
	everNames := map[string]bool{"store1": true, "store2": true, "store3": true}
	next := 0
	lastUpgrade := int64(0)
	listen := r.Intn(2) == 0
	remount := func(names []string) {
		z.fresh(names, sideNothing)
		tk := z.keys.key("tr", types.StoreTypeTransient)
		for _, s := range []types.CommitMultiStore{z.c, z.o} {
			s.MountStoreWithDB(tk, types.StoreTypeTransient, nil)
			if listen {
				var ks []types.StoreKey
				for _, n := range names {
					ks = append(ks, z.keys[n])
				}
				s.AddListeners(ks)
			}
		}
	}
	remount(mounted)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	if r.Intn(2) == 0 {
		iv := int64(2 + r.Intn(5))
		z.same("SetInitialVersion", func(s types.CommitMultiStore) any { return s.SetInitialVersion(iv) })
	}
	pick := func() string { return mounted[r.Intn(len(mounted))] }
	key := func() []byte { return []byte(fmt.Sprintf("k%d", r.Intn(10))) }
	names := func() []string {
		var out []string
		for n := range everNames {
			out = append(out, n)
		}
		sort.Strings(out) // the seed's picks do not depend on map order
		return out
	}
	for step := 0; step < 400; step++ {
		latest := z.c.LastCommitID().Version
		h := int64(r.Intn(int(latest) + 2))
		switch op := r.Intn(18); op {
		case 17:
			if latest == 0 {
				continue
			}
			hh := latest
			if r.Intn(2) == 0 && latest-1 >= lastUpgrade && latest > 1 {
				hh = latest - 1
			}
			var bc, bo bytes.Buffer
			ec := z.c.Snapshot(uint64(hh), protoio.NewDelimitedWriter(&bc))
			eo := z.o.Snapshot(uint64(hh), protoio.NewDelimitedWriter(&bo))
			if (ec == nil) != (eo == nil) || !bytes.Equal(bc.Bytes(), bo.Bytes()) {
				t.Errorf("step %d Snapshot(%d): ours %v %d bytes | rootmulti %v %d bytes", step, hh, ec, bc.Len(), eo, bo.Len())
			}
		case 16:
			first := lastUpgrade
			if first < 1 {
				first = 1
			}
			if latest < 3 || latest-1 < first {
				continue
			}
			target := first + int64(r.Intn(int(latest-first)))
			t.Logf("step %d LoadVersion(%d) of %d", step, target, latest)
			z.loadBoth("LoadVersion older", func(s types.CommitMultiStore) error { return s.LoadVersion(target) })
			z.sameLCID()
			z.same("WorkingHash after LoadVersion", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
			for i := 0; i < 6; i++ {
				all := names()
				n := all[r.Intn(len(all))]
				hh := int64(r.Intn(int(target) + 1))
				q := types.RequestQuery{Path: "/" + n + "/key", Data: key(), Height: hh, Prove: r.Intn(2) == 0}
				z.same(fmt.Sprintf("step %d query after LoadVersion %+v", step, q), func(s types.CommitMultiStore) any { return queryOf(s, q) })
				m := pick()
				z.same(fmt.Sprintf("step %d CMSWV(%d) after LoadVersion %s", step, hh, m), func(s types.CommitMultiStore) any {
					c, err := s.CacheMultiStoreWithVersion(hh)
					if err != nil {
						return "err"
					}
					return panicKind(outcome(func() any { return fmt.Sprintf("%q", c.GetKVStore(z.keys[m]).Get([]byte("k1"))) }))
				})
				z.same(fmt.Sprintf("step %d root read after LoadVersion %s", step, m), func(s types.CommitMultiStore) any { return getByName(s, m, "k2") })
				if hh >= 1 {
					z.same(fmt.Sprintf("step %d GetCommitInfo(%d) after LoadVersion", step, hh), func(s types.CommitMultiStore) any { return commitInfoOf(s, hh) })
				}
			}
			z.loadBoth("LoadLatestVersion back", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			z.sameLCID()
		case 14:
			all := names()
			n := all[r.Intn(len(all))]
			q := types.RequestQuery{Path: "/" + n + "/subspace", Data: []byte("k"), Height: h}
			z.commit()
			z.same(fmt.Sprintf("step %d subspace %s", step, n), func(s types.CommitMultiStore) any { return queryOf(s, q) })
		case 15:
			// upgrade on the loaded instances: mount the new store, keep the removed ones mounted
			if latest == 0 || latest == lastUpgrade {
				continue
			}
			up := &types.StoreUpgrades{}
			switch r.Intn(2) {
			case 0:
				next++
				n := fmt.Sprintf("n%02d", next)
				up.Added = []string{n}
				k := z.keys.key(n, types.StoreTypeIAVL)
				z.c.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
				z.o.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
				mounted = append(mounted, n)
				everNames[n] = true
			case 1:
				if len(mounted) <= 1 {
					continue
				}
				i := r.Intn(len(mounted))
				up.Deleted = []string{mounted[i]}
				mounted = append(append([]string(nil), mounted[:i]...), mounted[i+1:]...)
			}
			t.Logf("step %d in-place upgrade at %d: %+v", step, latest, up)
			z.loadBoth("in-place upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(up) })
			z.same("WorkingHash after in-place upgrade", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
			all := names()
			for _, n := range all {
				q := types.RequestQuery{Path: "/" + n + "/key", Data: []byte("k1"), Height: latest, Prove: true}
				z.same(fmt.Sprintf("step %d query in window %s", step, n), func(s types.CommitMultiStore) any { return queryOf(s, q) })
				k := z.keys[n]
				if k == nil {
					continue
				}
				for _, hh := range []int64{latest, latest - 1} {
					z.same(fmt.Sprintf("step %d CMSWV(%d) in window %s", step, hh, n), func(s types.CommitMultiStore) any {
						c, err := s.CacheMultiStoreWithVersion(hh)
						if err != nil {
							return "err"
						}
						return panicKind(outcome(func() any {
							it := c.GetKVStore(k).Iterator(nil, nil)
							defer it.Close()
							out := ""
							for ; it.Valid(); it.Next() {
								out += fmt.Sprintf("%s=%s,", it.Key(), it.Value())
							}
							return out
						}))
					})
				}
				z.same(fmt.Sprintf("step %d root read in window %s", step, n), func(s types.CommitMultiStore) any {
					return panicKind(outcome(func() any {
						return fmt.Sprintf("%q %v", s.GetKVStore(k).Get([]byte("k1")), s.GetCommitKVStore(k).LastCommitID())
					}))
				})
			}
			z.set(pick(), "u", fmt.Sprint(step))
			z.commit()
			lastUpgrade = z.c.LastCommitID().Version
		case 0, 1, 2:
			n, k, v := pick(), key(), fmt.Sprint(r.Intn(50))
			z.set(n, string(k), v)
		case 3:
			n, k := pick(), key()
			for _, s := range []types.CommitMultiStore{z.c, z.o} {
				s.GetKVStore(z.keys[n]).Delete(k)
			}
		case 4, 5:
			z.commit()
		case 6:
			all := names()
			n := all[r.Intn(len(all))]
			q := types.RequestQuery{Path: "/" + n + "/key", Data: key(), Height: h, Prove: r.Intn(2) == 0}
			if q.Prove && latest == 0 {
				continue
			}
			z.same(fmt.Sprintf("seed %d step %d query %+v", seed, step, q), func(s types.CommitMultiStore) any { return queryOf(s, q) })
		case 7:
			n := pick()
			z.same(fmt.Sprintf("step %d CMSWV(%d) %s", step, h, n), func(s types.CommitMultiStore) any {
				c, err := s.CacheMultiStoreWithVersion(h)
				if err != nil {
					return "err"
				}
				return panicKind(outcome(func() any {
					it := c.GetKVStore(z.keys[n]).Iterator(nil, nil)
					defer it.Close()
					out := ""
					for ; it.Valid(); it.Next() {
						out += fmt.Sprintf("%s=%s,", it.Key(), it.Value())
					}
					return out
				}))
			})
		case 8:
			if h >= 1 && h <= latest {
				z.same(fmt.Sprintf("step %d GetCommitInfo(%d)", step, h), func(s types.CommitMultiStore) any { return commitInfoOf(s, h) })
			}
		case 9:
			// upgrade: fresh instances, new mounts
			if latest == 0 || latest == lastUpgrade {
				continue
			}
			up := &types.StoreUpgrades{}
			newMount := append([]string(nil), mounted...)
			switch r.Intn(3) {
			case 0:
				next++
				n := fmt.Sprintf("n%02d", next)
				up.Added = []string{n}
				newMount = append(newMount, n)
				everNames[n] = true
			case 1:
				if len(newMount) <= 1 {
					continue
				}
				i := r.Intn(len(newMount))
				up.Deleted = []string{newMount[i]}
				newMount = append(newMount[:i], newMount[i+1:]...)
			case 2:
				next++
				n := fmt.Sprintf("n%02d", next)
				i := r.Intn(len(newMount))
				up.Renamed = []types.StoreRename{{OldKey: newMount[i], NewKey: n}}
				newMount = append(newMount[:i], newMount[i+1:]...)
				newMount = append(newMount, n)
				everNames[n] = true
			}
			t.Logf("step %d upgrade at %d: %+v", step, latest, up)
			mounted = newMount
			remount(mounted)
			z.loadBoth("upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(up) })
			z.same("WorkingHash after upgrade", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
			z.set(pick(), "u", fmt.Sprint(step))
			z.commit()
			lastUpgrade = z.c.LastCommitID().Version
		case 10:
			if r.Intn(3) == 0 && latest > 0 {
				t.Logf("step %d reload", step)
				remounted := r.Intn(2) == 0
				if remounted {
					remount(mounted)
				}
				// a branch of the working state taken before the reload
				// (BaseApp's check state) reads the reloaded state, as
				// rootmulti's does; only without uncommitted writes,
				// which rootmulti's old stores go on reading
				var ob, rb types.CacheMultiStore
				if !remounted && bytes.Equal(z.c.WorkingHash(), z.c.LastCommitID().Hash) {
					ob, rb = z.c.CacheMultiStore(), z.o.CacheMultiStore()
				}
				z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
				z.sameLCID()
				for _, m := range mounted {
					if ob == nil {
						break
					}
					ours, oerr := branchPairs(ob, z.keys[m])
					theirs, rerr := branchPairs(rb, z.keys[m])
					if a, b := fmt.Sprintf("%x %v", ours, oerr), fmt.Sprintf("%x %v", theirs, rerr); a != b {
						t.Errorf("step %d store %s through a branch taken before the reload: ours %s | rootmulti %s", step, m, a, b)
					}
				}
			}
		case 11:
			if r.Intn(3) == 0 && latest > lastUpgrade+1 {
				target := latest - int64(r.Intn(int(latest-lastUpgrade)))
				t.Logf("step %d rollback %d", step, target)
				z.same(fmt.Sprintf("step %d rollback(%d)", step, target), func(s types.CommitMultiStore) any { return s.RollbackToVersion(target) != nil })
				z.sameLCID()
			}
		case 12:
			if listen {
				a := fmt.Sprintf("%v", z.c.PopStateCache())
				b := fmt.Sprintf("%v", z.o.PopStateCache())
				if a != b {
					t.Errorf("step %d PopStateCache: ours %s | rootmulti %s", step, a, b)
				}
			}
		case 13:
			n := pick()
			ops := make([][2]int, 6)
			for i := range ops {
				ops[i] = [2]int{r.Intn(10), r.Intn(3)}
			}
			for _, s := range []types.CommitMultiStore{z.c, z.o} {
				cms := s.CacheMultiStore()
				st := cms.GetKVStore(z.keys[n])
				for _, o := range ops {
					k := []byte(fmt.Sprintf("k%d", o[0]))
					if o[1] == 0 {
						st.Delete(k)
					} else {
						st.Set(k, []byte(fmt.Sprint(o[1])))
					}
				}
				cms.Write()
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// panicKind reduces an outcome that is a panic to "panic": where both
// stores panic (a store that does not exist at a version), the messages
// differ.
func panicKind(s string) string {
	if len(s) >= 5 && s[:5] == "panic" {
		return "panic"
	}
	return s
}
