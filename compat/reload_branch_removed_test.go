package compat_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
)

// TestBranchBeforeUpgradeReloadReadsRemovedStore: as
// TestBranchBeforeReloadReads, for a reload whose store upgrades remove a
// mounted store (deleted, or renamed to another mounted store). rootmulti's
// store of the load before stays readable (its tree reads the same
// database); ours must not panic on the database the reload closed.
func TestBranchBeforeUpgradeReloadReadsRemovedStore(t *testing.T) {
	for _, mode := range []string{"deleted", "renamed"} {
		t.Run(mode, func(t *testing.T) {
			keys := keyring{}
			m := mount{iavl: []string{"a", "b"}}
			rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
			ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
			defer ms.Close()
			for i := 0; i < 3; i++ {
				for _, s := range []storetypes.CommitMultiStore{rs, ms} {
					s.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
					s.Commit()
				}
			}
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
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
				if strings.HasPrefix(o, "panic") && !strings.HasPrefix(r, "panic") {
					t.Errorf("%s of store a through a branch taken before the reload (a %s): ours %s | rootmulti %s", name, mode, o, r)
				}
			}
		})
	}
}
