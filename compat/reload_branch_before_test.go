package compat_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// branchReloadPair returns rootmulti and ours, both mounting IAVL stores a
// and b, with versions 1-3 each writing a pair to a; ours has them in a
// snapshot file, not only in memory.
func branchReloadPair(t *testing.T) (keyring, *rootmulti.Store, *compat.MultiStore) {
	t.Helper()
	keys := keyring{}
	m := mount{iavl: []string{"a", "b"}}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
	t.Cleanup(func() { ms.Close() })
	for i := 0; i < 3; i++ {
		for _, s := range []storetypes.CommitMultiStore{rs, ms} {
			s.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
			s.Commit()
		}
	}
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	return keys, rs, ms
}

// checkBranchReads reads store a through ours' branch ob and rootmulti's rb
// (Get, Has, an iteration): ours must not panic where rootmulti's reads,
// and with same set must read what rootmulti's reads.
func checkBranchReads(t *testing.T, keys keyring, ob, rb storetypes.CacheMultiStore, what string, same bool) {
	t.Helper()
	reads := map[string]func(b storetypes.CacheMultiStore) any{
		"get": func(b storetypes.CacheMultiStore) any { return string(b.GetKVStore(keys["a"]).Get([]byte("k0"))) },
		"has": func(b storetypes.CacheMultiStore) any { return b.GetKVStore(keys["a"]).Has([]byte("k1")) },
		"iterate": func(b storetypes.CacheMultiStore) any {
			pairs, err := branchPairs(b, keys["a"])
			if err != nil {
				panic(err)
			}
			return len(pairs)
		},
	}
	for name, f := range reads {
		o := outcome(func() any { return f(ob) })
		r := outcome(func() any { return f(rb) })
		if strings.HasPrefix(o, "panic") && !strings.HasPrefix(r, "panic") || same && o != r {
			t.Errorf("%s of store a through a branch taken before %s: ours %s | rootmulti %s", name, what, o, r)
		}
	}
}

// TestBranchBeforeReloadReads: a branch of the working state taken before
// a reload (LoadLatestVersion, LoadVersion of an older version,
// RollbackToVersion) and read after it. rootmulti's stores of the load
// before stay readable (their trees read the same database), so such a
// branch returns data. Ours must not panic on the database the reload
// closed; after LoadLatestVersion it reads what rootmulti's reads.
func TestBranchBeforeReloadReads(t *testing.T) {
	for _, mode := range []string{"LoadLatestVersion", "LoadVersion", "RollbackToVersion"} {
		t.Run(mode, func(t *testing.T) {
			keys, rs, ms := branchReloadPair(t)
			rb, ob := rs.CacheMultiStore(), ms.CacheMultiStore()
			for _, s := range []storetypes.CommitMultiStore{rs, ms} {
				var err error
				switch mode {
				case "LoadLatestVersion":
					err = s.LoadLatestVersion()
				case "LoadVersion":
					err = s.LoadVersion(2)
				case "RollbackToVersion":
					err = s.RollbackToVersion(2)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			checkBranchReads(t, keys, ob, rb, mode, mode == "LoadLatestVersion")
		})
	}
}

// TestBranchBeforeUpgradeReloadReadsRemovedStore: as
// TestBranchBeforeReloadReads, for a reload whose store upgrades remove a
// mounted store (deleted, or renamed to another mounted store). rootmulti's
// store of the load before stays readable (its tree reads the same
// database); ours must not panic on the database the reload closed.
func TestBranchBeforeUpgradeReloadReadsRemovedStore(t *testing.T) {
	for _, mode := range []string{"deleted", "renamed"} {
		t.Run(mode, func(t *testing.T) {
			keys, rs, ms := branchReloadPair(t)
			up := &storetypes.StoreUpgrades{Deleted: []string{"a"}}
			if mode == "renamed" {
				// c, mounted now, takes a's pairs
				up = &storetypes.StoreUpgrades{Renamed: []storetypes.StoreRename{{OldKey: "a", NewKey: "c"}}}
			}
			rb, ob := rs.CacheMultiStore(), ms.CacheMultiStore()
			for _, s := range []storetypes.CommitMultiStore{rs, ms} {
				if mode == "renamed" {
					s.MountStoreWithDB(keys.key("c", storetypes.StoreTypeIAVL), storetypes.StoreTypeIAVL, nil)
				}
				if err := s.LoadLatestVersionAndUpgrade(up); err != nil {
					t.Fatal(err)
				}
			}
			checkBranchReads(t, keys, ob, rb, "the reload (a "+mode+")", false)
		})
	}
}
