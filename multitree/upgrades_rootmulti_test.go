package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// upgRM is a rootmulti store over cosmos/iavl in memory, reloaded on
// upgrades as an SDK app does.
type upgRM struct {
	db     dbm.DB
	rs     *rootmulti.Store
	stores []string
}

func upgNewRM(t testing.TB, stores []string, initial int64) *upgRM {
	o := &upgRM{db: dbm.NewMemDB()}
	o.load(t, stores, nil, 0)
	if initial > 1 {
		if err := o.rs.SetInitialVersion(initial); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func (o *upgRM) load(t testing.TB, stores []string, up *storetypes.StoreUpgrades, initial int64) {
	t.Helper()
	rs := rootmulti.NewStore(o.db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.SetPruning(pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	for _, s := range stores {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(s), storetypes.StoreTypeIAVL, nil)
	}
	var err error
	if up != nil {
		err = rs.LoadLatestVersionAndUpgrade(up)
	} else {
		err = rs.LoadLatestVersion()
	}
	if err != nil {
		t.Fatal(err)
	}
	if initial > 1 {
		if err := rs.SetInitialVersion(initial); err != nil {
			t.Fatal(err)
		}
	}
	o.rs, o.stores = rs, append([]string(nil), stores...)
}

func (o *upgRM) kv(name string) storetypes.KVStore {
	return o.rs.GetCommitKVStore(o.rs.StoreKeysByName()[name]).(storetypes.KVStore)
}

// upgPair is a write of a block: store, key, value (nil value deletes).
type upgPair struct {
	store, key string
	value      *string
}

func upgSet(store, key, value string) upgPair {
	return upgPair{store: store, key: key, value: &value}
}

func upgApply(t *testing.T, db *multitree.DB, o *upgRM, pairs []upgPair) {
	t.Helper()
	for _, p := range pairs {
		if p.value == nil {
			if err := db.Delete(p.store, []byte(p.key)); err != nil {
				t.Fatal(err)
			}
			if o != nil {
				o.kv(p.store).Delete([]byte(p.key))
			}
			continue
		}
		if err := db.Set(p.store, []byte(p.key), []byte(*p.value)); err != nil {
			t.Fatal(err)
		}
		if o != nil {
			o.kv(p.store).Set([]byte(p.key), []byte(*p.value))
		}
	}
}

func upgToWal(up *storetypes.StoreUpgrades) wal.Upgrades {
	var u wal.Upgrades
	u.Added = append(u.Added, up.Added...)
	u.Deleted = append(u.Deleted, up.Deleted...)
	for _, r := range up.Renamed {
		u.Renamed = append(u.Renamed, wal.RenamedStore{OldName: r.OldKey, NewName: r.NewKey})
	}
	return u
}

// upgCommitBoth commits db and the oracle and compares the app hashes
// and the stores.
func upgCommitBoth(t *testing.T, db *multitree.DB, o *upgRM) *storetypes.CommitInfo {
	t.Helper()
	working := db.WorkingCommitInfo().Hash()
	if want := o.rs.WorkingHash(); !bytes.Equal(working, want) {
		t.Fatalf("working hash at %d: %X, rootmulti %X", db.WorkingVersion(), working, want)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	cid := o.rs.Commit()
	if info.Version != cid.Version || !bytes.Equal(info.Hash(), cid.Hash) {
		t.Fatalf("version %d app hash %X, rootmulti version %d %X", info.Version, info.Hash(), cid.Version, cid.Hash)
	}
	upgCompareStores(t, db, o)
	return info
}

func upgCompareStores(t *testing.T, db *multitree.DB, o *upgRM) {
	t.Helper()
	vw, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer vw.Release()
	want := append([]string(nil), o.stores...)
	sort.Strings(want)
	if got := vw.StoreNames(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stores %q, rootmulti %q", got, want)
	}
	for _, name := range want {
		tr := vw.Tree(name)
		it := tr.Iterator(nil, nil, true)
		oit := o.kv(name).Iterator(nil, nil)
		for ; oit.Valid(); oit.Next() {
			if !it.Valid() || !bytes.Equal(it.Key(), oit.Key()) || !bytes.Equal(it.Value(), oit.Value()) {
				t.Fatalf("store %q differs at key %q", name, oit.Key())
			}
			it.Next()
		}
		oit.Close()
		if it.Valid() {
			t.Fatalf("store %q has extra key %q", name, it.Key())
		}
	}
}

func upgOpen(t *testing.T, dir string, opts multitree.Options) *multitree.DB {
	t.Helper()
	db, err := multitree.Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s %+v: %v", dir, opts, err)
	}
	return db
}

// TestUpgradeInFirstCommit: store upgrades applied before the very
// first commit, with and without an initial version above 1, give
// rootmulti's app hash, survive a reopen (replay from snapshot 0), a
// rewrite, and are what ViewAt and read-only TargetVersion opens see.
func TestUpgradeInFirstCommit(t *testing.T) {
	for _, iv := range []int64{0, 1, 7} {
		t.Run(fmt.Sprint("iv", iv), func(t *testing.T) {
			dir := t.TempDir()
			initial := []string{"a", "b", "c"}
			db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: initial, InitialVersion: iv, SnapshotInterval: -1, SnapshotKeepRecent: 10})
			defer func() { db.Close() }()
			up := &storetypes.StoreUpgrades{Added: []string{"x"}, Renamed: []storetypes.StoreRename{{OldKey: "a", NewKey: "a2"}}, Deleted: []string{"c"}}
			if err := db.ApplyUpgrades(upgToWal(up)); err != nil {
				t.Fatal(err)
			}
			o := &upgRM{db: dbm.NewMemDB()}
			o.load(t, []string{"a2", "b", "x"}, up, iv)
			upgApply(t, db, o, []upgPair{upgSet("x", "k1", "v1"), upgSet("a2", "k", "v"), upgSet("b", "k", "v")})
			hashes := map[int64][]byte{}
			info := upgCommitBoth(t, db, o)
			first := info.Version
			hashes[info.Version] = info.Hash()
			for i := 0; i < 3; i++ {
				upgApply(t, db, o, []upgPair{upgSet("x", fmt.Sprint("k", i), "w"), upgSet("b", fmt.Sprint("q", i), "w")})
				info = upgCommitBoth(t, db, o)
				hashes[info.Version] = info.Hash()
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = upgOpen(t, dir, multitree.Options{OpenCheck: multitree.OpenCheckSync, SnapshotKeepRecent: 10})
			if !bytes.Equal(db.LastCommitInfo().Hash(), hashes[db.Version()]) {
				t.Fatalf("reopened at %d with another hash", db.Version())
			}
			upgCompareStores(t, db, o)
			vw, err := db.ViewAt(first)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(vw.CommitInfo().Hash(), hashes[first]) {
				t.Fatalf("ViewAt(%d) hash differs", first)
			}
			vw.Release()
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			upgApply(t, db, o, []upgPair{upgSet("a2", "z", "z")})
			info = upgCommitBoth(t, db, o)
			hashes[info.Version] = info.Hash()
			for v := first; v <= info.Version; v++ {
				ro, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v})
				if err != nil {
					t.Fatalf("read-only at %d: %v", v, err)
				}
				if ro.Version() != v || !bytes.Equal(ro.LastCommitInfo().Hash(), hashes[v]) {
					t.Errorf("read-only at %d: version %d, another hash", v, ro.Version())
				}
				ro.Close()
			}
		})
	}
}

// TestUpgradeThenTargetRecommit: a writer reopened before a
// version with store upgrades re-commits it with the same upgrades to the
// same hash; other upgrades are refused with ErrConflict and change
// nothing; a rollback then commits other upgrades like rootmulti.
func TestUpgradeThenTargetRecommit(t *testing.T) {
	dir := t.TempDir()
	stores := []string{"a", "b", "c"}
	db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 2, SnapshotKeepRecent: 10})
	defer func() { db.Close() }()
	o := upgNewRM(t, stores, 0)
	hashes := map[int64][]byte{}
	for i := 0; i < 3; i++ {
		upgApply(t, db, o, []upgPair{upgSet("a", fmt.Sprint("k", i), "v"), upgSet("b", fmt.Sprint("k", i), "v"), upgSet("c", fmt.Sprint("k", i), "v")})
		info := upgCommitBoth(t, db, o)
		hashes[info.Version] = info.Hash()
	}
	// version 4: rename a->d, delete b, add e
	up := &storetypes.StoreUpgrades{Added: []string{"e"}, Renamed: []storetypes.StoreRename{{OldKey: "a", NewKey: "d"}}, Deleted: []string{"b"}}
	if err := db.ApplyUpgrades(upgToWal(up)); err != nil {
		t.Fatal(err)
	}
	o.load(t, []string{"c", "d", "e"}, up, 0)
	block4 := []upgPair{upgSet("e", "k", "v"), upgSet("d", "k0", "new")}
	upgApply(t, db, o, block4)
	info := upgCommitBoth(t, db, o)
	hashes[4] = info.Hash()
	for i := 0; i < 3; i++ {
		upgApply(t, db, o, []upgPair{upgSet("d", fmt.Sprint("m", i), "v"), upgSet("e", fmt.Sprint("m", i), "v")})
		info = upgCommitBoth(t, db, o)
		hashes[info.Version] = info.Hash()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// other upgrades at version 4 are refused and change nothing
	db = upgOpen(t, dir, multitree.Options{TargetVersion: 3})
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"e"}, Renamed: []wal.RenamedStore{{OldName: "a", NewName: "d"}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Set("e", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := db.Set("d", []byte("k0"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); !errors.Is(err, multitree.ErrConflict) {
		t.Fatalf("re-commit of 4 without the deletion: %v, want ErrConflict", err)
	}
	if db.Version() != 3 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[3]) {
		t.Fatalf("after the refused re-commit: version %d", db.Version())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// the same upgrades in another order within the set are the same
	db = upgOpen(t, dir, multitree.Options{TargetVersion: 3})
	if err := db.ApplyUpgrades(wal.Upgrades{Deleted: []string{"b"}, Renamed: []wal.RenamedStore{{OldName: "a", NewName: "d"}}, Added: []string{"e"}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range block4 {
		if err := db.Set(p.store, []byte(p.key), []byte(*p.value)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := db.Commit()
	if err != nil || !bytes.Equal(info.Hash(), hashes[4]) {
		t.Fatalf("re-commit of 4: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db2 := upgOpen(t, dir, multitree.Options{}); db2.Version() != 7 || !bytes.Equal(db2.LastCommitInfo().Hash(), hashes[7]) {
		t.Fatalf("latest after the re-commit: %d", db2.Version())
	} else {
		db2.Close()
	}

	// roll back before the upgrade and upgrade differently
	db = upgOpen(t, dir, multitree.Options{TargetVersion: 3, Rollback: true})
	o2 := &upgRM{db: dbm.NewMemDB()}
	o2.load(t, stores, nil, 0)
	for i := 0; i < 3; i++ {
		upgApply(t, db, nil, nil)
		for _, s := range stores {
			o2.kv(s).Set([]byte(fmt.Sprint("k", i)), []byte("v"))
		}
		if cid := o2.rs.Commit(); !bytes.Equal(cid.Hash, hashes[cid.Version]) {
			t.Fatalf("oracle replay differs at %d", cid.Version)
		}
	}
	up2 := &storetypes.StoreUpgrades{Renamed: []storetypes.StoreRename{{OldKey: "b", NewKey: "a2"}}, Deleted: []string{"a"}}
	if err := db.ApplyUpgrades(upgToWal(up2)); err != nil {
		t.Fatal(err)
	}
	o2.load(t, []string{"a2", "c"}, up2, 0)
	upgApply(t, db, o2, []upgPair{upgSet("a2", "k9", "v9")})
	upgCommitBoth(t, db, o2)
	for i := 0; i < 4; i++ {
		upgApply(t, db, o2, []upgPair{upgSet("c", fmt.Sprint("r", i), "v")})
		upgCommitBoth(t, db, o2)
	}
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = upgOpen(t, dir, multitree.Options{OpenCheck: multitree.OpenCheckSync})
	if db.Version() != 8 || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened after rollback+upgrade at %d", db.Version())
	}
	upgCompareStores(t, db, o2)
	for v := int64(1); v <= 8; v++ {
		vw, err := db.ViewAt(v)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", v, err)
		}
		if v == 4 {
			if names := fmt.Sprint(vw.StoreNames()); names != "[a2 c]" {
				t.Fatalf("ViewAt(4) stores %s", names)
			}
		}
		vw.Release()
	}
}

// TestUpgradeThenSetInitialVersion: upgrades before the first
// commit followed by SetInitialVersion (raising and lowering the initial
// version the database was created with), and the reverse order, commit
// at the new initial version with rootmulti's app hash, and reopen (log
// replay over snapshot 0) to the same hash.
func TestUpgradeThenSetInitialVersion(t *testing.T) {
	for _, tc := range []struct {
		created, set int64
		upFirst      bool
	}{{100, 5, true}, {1, 40, true}, {100, 5, false}, {0, 40, false}} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			dir := t.TempDir()
			db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, InitialVersion: tc.created, SnapshotInterval: -1})
			defer func() { db.Close() }()
			up := &storetypes.StoreUpgrades{Added: []string{"x"}, Renamed: []storetypes.StoreRename{{OldKey: "a", NewKey: "a2"}}}
			o := &upgRM{db: dbm.NewMemDB()}
			o.load(t, []string{"a2", "b", "x"}, up, 0)
			if !tc.upFirst {
				if err := db.SetInitialVersion(tc.set); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.ApplyUpgrades(upgToWal(up)); err != nil {
				t.Fatal(err)
			}
			if tc.upFirst {
				if err := db.SetInitialVersion(tc.set); err != nil {
					t.Fatal(err)
				}
			}
			if err := o.rs.SetInitialVersion(tc.set); err != nil {
				t.Fatal(err)
			}
			upgApply(t, db, o, []upgPair{upgSet("x", "k", "v"), upgSet("a2", "k", "v")})
			info := upgCommitBoth(t, db, o)
			if info.Version != tc.set {
				t.Fatalf("first version %d, want %d", info.Version, tc.set)
			}
			upgApply(t, db, o, []upgPair{upgSet("x", "k2", "v"), upgSet("b", "k", "v")})
			info = upgCommitBoth(t, db, o)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = upgOpen(t, dir, multitree.Options{SnapshotInterval: -1})
			if db.Version() != info.Version || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
				t.Fatalf("reopened at %d with another hash", db.Version())
			}
			upgCompareStores(t, db, o)
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			upgApply(t, db, o, []upgPair{upgSet("x", "k3", "v")})
			upgCommitBoth(t, db, o)
		})
	}
}
