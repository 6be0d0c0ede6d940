package compat_test

// Store upgrades through the adapter beside rootmulti: a store name reused
// by a later upgrade, whose app hashes rootmulti gives when the new store
// has a database of its own; and an upgrade at the first block after a
// state-sync restore, then a rollback to the restore height and the
// upgrade replayed.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"cosmossdk.io/log"
	pruningtypes "cosmossdk.io/store/pruning/types"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// upgradeFlow drives a side (ours and rootmulti) through blocks and upgrades and
// checks every height it committed.
type upgradeFlow struct {
	*side
	r       *rand.Rand
	mounted []string
	hashes  map[int64][]byte
	names   map[int64][]string // stores of the commit info of each height
	keys    map[string][]string
}

func newUpgradeFlow(t *testing.T, cfg compat.Config, mounted []string) *upgradeFlow {
	z := &side{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: cfg}
	u := &upgradeFlow{side: z, r: rand.New(rand.NewSource(7)), hashes: map[int64][]byte{}, names: map[int64][]string{}, keys: map[string][]string{}}
	u.reopen(mounted, nil)
	t.Cleanup(func() {
		if z.c != nil {
			z.c.Close()
		}
	})
	return u
}

// reopen is a restart of both processes with the given mounts and upgrades.
func (u *upgradeFlow) reopen(mounted []string, up *types.StoreUpgrades) {
	u.t.Helper()
	u.mounted = mounted
	u.fresh(mounted, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	ec, eo := u.loadBoth("reopen", func(s types.CommitMultiStore) error {
		if up == nil {
			return s.LoadLatestVersion()
		}
		return s.LoadLatestVersionAndUpgrade(up)
	})
	if ec != nil || eo != nil {
		u.t.Fatalf("reopen %v %+v: ours %v | rootmulti %v", mounted, up, ec, eo)
	}
	u.sameLCID()
}

// write sets and deletes a few keys of every mounted store in both.
func (u *upgradeFlow) write(n int) {
	for _, st := range u.mounted {
		for i := 0; i < n; i++ {
			ks := u.keys[st]
			if len(ks) > 3 && u.r.Intn(4) == 0 {
				k := ks[u.r.Intn(len(ks))]
				u.c.GetStoreByName(st).(types.KVStore).Delete([]byte(k))
				u.o.GetStoreByName(st).(types.KVStore).Delete([]byte(k))
				continue
			}
			k := fmt.Sprintf("k%03d", u.r.Intn(200))
			u.keys[st] = append(u.keys[st], k)
			v := fmt.Sprintf("v%d", u.r.Int())
			if u.cfg.RewriteRateLimit > 0 {
				v += strings.Repeat("x", 2000)
			}
			u.set(st, k, v)
		}
	}
}

// block writes and commits a version on both.
func (u *upgradeFlow) block() int64 {
	u.t.Helper()
	u.write(5)
	id := u.commit()
	u.hashes[id.Version] = id.Hash
	ci, err := u.c.GetCommitInfo(id.Version)
	if err != nil {
		u.t.Fatal(err)
	}
	var names []string
	for _, si := range ci.StoreInfos {
		names = append(names, si.Name)
	}
	u.names[id.Version] = names
	return id.Version
}

// check compares commit infos and proven queries of every height committed
// (the stores of its commit info) with rootmulti's.
func (u *upgradeFlow) check(what string) {
	u.t.Helper()
	var hs []int64
	for h := range u.hashes {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	for _, h := range hs {
		u.same(fmt.Sprintf("%s: commit info %d", what, h), func(s types.CommitMultiStore) any { return commitInfoOf(s, h) })
		stores := append(append([]string{}, u.names[h]...), u.mounted...)
		stores = append(stores, "gov", "mint", "bank", "nope")
		for _, st := range stores {
			for _, k := range []string{"k001", "k050", "k100", "k150", "zz"} {
				for _, prove := range []bool{false, true} {
					q := types.RequestQuery{Path: "/" + st + "/key", Data: []byte(k), Height: h, Prove: prove}
					u.same(fmt.Sprintf("%s: query %s %s@%d prove=%v", what, st, k, h, prove), func(s types.CommitMultiStore) any { return queryOf(s, q) })
				}
			}
			u.same(fmt.Sprintf("%s: subspace %s@%d", what, st, h), func(s types.CommitMultiStore) any {
				return queryOf(s, types.RequestQuery{Path: "/" + st + "/subspace", Data: []byte("k0"), Height: h})
			})
		}
		for _, st := range u.mounted {
			u.samePanicking(fmt.Sprintf("%s: versioned branch %s@%d", what, st, h), func(s types.CommitMultiStore) any {
				cms, err := s.CacheMultiStoreWithVersion(h)
				if err != nil {
					return "err: " + err.Error()
				}
				key := keysByNameOf(s)[st]
				return upgradeFlowDump(cms.GetKVStore(key))
			})
		}
	}
}

// samePanicking is same, with any two panics taken as the same outcome.
func (u *upgradeFlow) samePanicking(what string, f func(s types.CommitMultiStore) any) {
	u.t.Helper()
	a, b := u.both(f)
	if a != b && !(strings.HasPrefix(a, "panic") && strings.HasPrefix(b, "panic")) {
		u.t.Errorf("DIFF %s: ours %s | rootmulti %s", what, a, b)
	}
}

func upgradeFlowConfigs() map[string]compat.Config {
	cfgs := map[string]compat.Config{}
	c := testConfig()
	c.SnapshotInterval = 1
	c.SnapshotKeepRecent = 100
	cfgs["interval=1"] = c
	c = testConfig()
	c.SnapshotInterval = 3
	c.SnapshotKeepRecent = 100
	c.AsyncCommitBuffer = 10
	cfgs["interval=3,async"] = c
	c = testConfig()
	c.SnapshotInterval = 4
	c.SnapshotKeepRecent = 100
	c.ZeroCopy = true
	c.RewriteConcurrency = 1
	cfgs["interval=4,zerocopy"] = c
	c = testConfig()
	c.SnapshotInterval = 5
	c.SnapshotKeepRecent = 100
	c.RewriteRateLimit = 64 << 10 // rewrites run across several blocks and the upgrades
	c.AsyncCommitBuffer = 3
	cfgs["interval=5,slow"] = c
	return cfgs
}

// TestUpgradeReusedNameSideBySide: a store name freed by an upgrade (deleted, or
// renamed away) is used again by a later upgrade that adds it. rootmulti refuses these since its iavl keeps the old versions under
// the name (an accepted difference); its app hashes are reproduced with the
// new store mounted on a database of its own, which rootmulti then loads
// as the new store it is.
func TestUpgradeReusedNameSideBySide(t *testing.T) {
	cases := []struct {
		name   string
		up1    *types.StoreUpgrades
		after1 []string
		up2    *types.StoreUpgrades
		after2 []string
		ownDB  string // the store rootmulti mounts on a database of its own at up2
	}{
		{"delete then add", &types.StoreUpgrades{Deleted: []string{"mint"}}, []string{"bank", "gov"},
			&types.StoreUpgrades{Added: []string{"mint"}}, []string{"bank", "gov", "mint"}, "mint"},
		{"rename away then add", &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "mint", NewKey: "aaa"}}}, []string{"aaa", "bank", "gov"},
			&types.StoreUpgrades{Added: []string{"mint"}}, []string{"aaa", "bank", "gov", "mint"}, "mint"},
	}
	for _, tc := range cases {
		for name, cfg := range upgradeFlowConfigs() {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				u := newUpgradeFlow(t, cfg, []string{"bank", "gov", "mint"})
				for i := 0; i < 4; i++ {
					u.block()
				}
				u.reopen(tc.after1, tc.up1)
				u.block()
				u.block()
				// the second upgrade; rootmulti with the reused name on its own database
				u.mounted = tc.after2
				u.fresh(nil, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
				own := dbm.NewMemDB()
				for _, n := range tc.after2 {
					k := u.side.keys.key(n, types.StoreTypeIAVL)
					u.c.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
					if n == tc.ownDB {
						u.o.MountStoreWithDB(k, types.StoreTypeIAVL, own)
					} else {
						u.o.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
					}
				}
				ec, eo := u.c.LoadLatestVersionAndUpgrade(tc.up2), u.o.LoadLatestVersionAndUpgrade(tc.up2)
				if ec != nil || eo != nil {
					t.Fatalf("second upgrade: ours %v | rootmulti %v", ec, eo)
				}
				u.same("content of "+tc.ownDB, func(s types.CommitMultiStore) any { return upgradeFlowDump(storeByName(s, tc.ownDB)) })
				first := u.block()
				for i := 0; i < 4; i++ {
					u.block()
				}
				for h := first; h <= first+4; h++ {
					for _, st := range tc.after2 {
						for _, k := range []string{"k001", "k050", "k100", "k150", "zz"} {
							q := types.RequestQuery{Path: "/" + st + "/key", Data: []byte(k), Height: h, Prove: true}
							u.same(fmt.Sprintf("query %s %s@%d", st, k, h), func(s types.CommitMultiStore) any { return queryOf(s, q) })
						}
					}
				}
				// a restart of ours
				c, err := compat.NewMultiStore(u.dir, log.NewNopLogger(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				u.c.Close()
				u.c = c
				for _, n := range tc.after2 {
					c.MountStoreWithDB(u.side.keys.key(n, types.StoreTypeIAVL), types.StoreTypeIAVL, nil)
				}
				if err := c.LoadLatestVersion(); err != nil {
					t.Fatal(err)
				}
				u.sameLCID()
				u.block()
			})
		}
	}
}

// TestUpgradeAfterRestoreSideBySide: a node state-syncs at the height before an
// upgrade (from rootmulti), halts there, restarts with the upgrade (the
// first block after the restore), and later rolls back to the restore
// height and replays the upgrade block.
func TestUpgradeAfterRestoreSideBySide(t *testing.T) {
	for name, cfg := range upgradeFlowConfigs() {
		for _, deleteOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deleteOnly=%v", name, deleteOnly), func(t *testing.T) {
				u := newUpgradeFlow(t, cfg, []string{"bank", "gov", "mint"})
				for i := 0; i < 6; i++ {
					u.block()
				}
				var b bytes.Buffer
				if err := u.o.Snapshot(6, protoio.NewDelimitedWriter(&b)); err != nil {
					t.Fatal(err)
				}
				// ours restored from it, in place of our chain's database
				u.c.Close()
				u.dir = t.TempDir()
				u.fresh(u.mounted, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
				if err := u.c.LoadLatestVersion(); err != nil {
					t.Fatal(err)
				}
				if _, err := u.c.Restore(6, snapshottypes.CurrentFormat, protoio.NewDelimitedReader(bytes.NewReader(b.Bytes()), 1<<30)); err != nil {
					t.Fatal(err)
				}
				if err := u.o.LoadLatestVersion(); err != nil {
					t.Fatal(err)
				}
				u.sameLCID()
				for h := range u.hashes {
					if h < 6 {
						delete(u.hashes, h) // ours has no history before the restore
					}
				}
				up := &types.StoreUpgrades{Added: []string{"ibc"}, Renamed: []types.StoreRename{{OldKey: "gov", NewKey: "aaa"}}, Deleted: []string{"mint"}}
				after := []string{"aaa", "bank", "ibc"}
				if deleteOnly {
					up = &types.StoreUpgrades{Deleted: []string{"mint"}}
					after = []string{"bank", "gov"}
				}
				u.reopen(after, up)
				u.write(3)
				u.reopen(after, up) // a crash before the upgrade block's commit
				type kv struct{ st, k, v string }
				var blocks [][]kv
				for i := 0; i < 3; i++ {
					var bl []kv
					for _, st := range after {
						for j := 0; j < 4; j++ {
							bl = append(bl, kv{st, fmt.Sprintf("k%03d", u.r.Intn(200)), fmt.Sprint(u.r.Int())})
						}
					}
					blocks = append(blocks, bl)
					for _, w := range bl {
						u.set(w.st, w.k, w.v)
					}
					id := u.commit()
					u.hashes[id.Version] = id.Hash
				}
				u.reopen(after, nil)
				u.check("after the upgrade on the restored node")
				if !deleteOnly {
					return // a rollback cannot cross the upgrade that added a mounted store
				}
				if err := u.c.RollbackToVersion(6); err != nil {
					t.Fatalf("rollback to the restore height: %v", err)
				}
				if id := u.c.LastCommitID(); id.Version != 6 || !bytes.Equal(id.Hash, u.hashes[6]) {
					t.Fatalf("after the rollback: %d %X, want %X", id.Version, id.Hash, u.hashes[6])
				}
				u.c.Close()
				c, err := compat.NewMultiStore(u.dir, log.NewNopLogger(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				u.c = c
				for _, n := range after {
					c.MountStoreWithDB(types.NewKVStoreKey(n), types.StoreTypeIAVL, nil)
				}
				if err := c.LoadLatestVersionAndUpgrade(up); err != nil {
					t.Fatal(err)
				}
				for i, bl := range blocks {
					for _, w := range bl {
						c.GetStoreByName(w.st).(types.KVStore).Set([]byte(w.k), []byte(w.v))
					}
					id := c.Commit()
					if want := int64(7 + i); id.Version != want || !bytes.Equal(id.Hash, u.hashes[want]) {
						t.Fatalf("replayed %d: %d %X, the chain had %X", want, id.Version, id.Hash, u.hashes[want])
					}
				}
			})
		}
	}
}

// upgradeFlowDump summarizes the pairs of a store.
func upgradeFlowDump(st types.Store) string {
	if st == nil {
		return "<none>"
	}
	it := st.(types.KVStore).Iterator(nil, nil)
	defer it.Close()
	n := 0
	h := sha256.New()
	for ; it.Valid(); it.Next() {
		n++
		fmt.Fprintf(h, "%q=%q,", it.Key(), it.Value())
	}
	return fmt.Sprintf("%d pairs: %X", n, h.Sum(nil))
}
