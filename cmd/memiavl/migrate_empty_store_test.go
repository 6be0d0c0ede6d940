package main

import (
	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	dbm "github.com/cosmos/cosmos-db"
)

// TestCLIImportIAVLPebbleEmptyStore: import-iavl of a pebble and a goleveldb
// application database with a store that stays empty, at the latest and an
// older --height, prints the source's app hash.
func TestCLIImportIAVLPebbleEmptyStore(t *testing.T) {
	for _, backend := range []dbm.BackendType{dbm.PebbleDBBackend, dbm.GoLevelDBBackend} {
		parent := t.TempDir()
		db, err := dbm.NewDB("application", backend, parent)
		if err != nil {
			t.Fatal(err)
		}
		rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
		for _, name := range []string{"acc", "empty"} {
			rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
		}
		if err := rs.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
		var ids []storetypes.CommitID
		for v := 0; v < 5; v++ {
			rs.GetStoreByName("acc").(storetypes.KVStore).Set([]byte{byte(v)}, []byte{1})
			ids = append(ids, rs.Commit())
		}
		db.Close()
		src := filepath.Join(parent, "application.db")
		for _, h := range []int64{0, 3} {
			dst := filepath.Join(t.TempDir(), "memiavl.db")
			args := []string{"import-iavl", "--backend", string(backend), src, dst}
			if h != 0 {
				args = append(args, "--height", fmt.Sprint(h))
			}
			code, out, errs := cli(t, args...)
			want := ids[len(ids)-1]
			if h != 0 {
				want = ids[h-1]
			}
			if code != 0 || !strings.Contains(out, hex.EncodeToString(want.Hash)) {
				t.Errorf("%s height %d: exit %d %q %q", backend, h, code, out, errs)
			}
		}
	}
}
