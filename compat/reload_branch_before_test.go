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

// TestBranchBeforeReloadReads: a branch of the working state taken before
// a reload (LoadLatestVersion, LoadVersion of an older version,
// RollbackToVersion) and read after it. rootmulti's stores of the load
// before stay readable (their trees read the same database), so such a
// branch returns data. Ours must not panic on the database the reload
// closed; after LoadLatestVersion it reads what rootmulti's reads.
func TestBranchBeforeReloadReads(t *testing.T) {
	for _, mode := range []string{"LoadLatestVersion", "LoadVersion", "RollbackToVersion"} {
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
			// the pairs in a snapshot file, not only in memory
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
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
					t.Errorf("%s through a branch taken before %s: ours %s | rootmulti %s", name, mode, o, r)
				} else if mode == "LoadLatestVersion" && o != r {
					t.Errorf("%s through a branch taken before %s: ours %s | rootmulti %s", name, mode, o, r)
				}
			}
		})
	}
}
