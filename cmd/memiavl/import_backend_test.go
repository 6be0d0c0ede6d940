package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/internal/workload"
)

// TestImportIAVLWrongBackendRefused: a running node writes a goleveldb
// application database and keeps it open (goleveldb's flock on LOCK).
// import-iavl refuses it with the default backend ("locked") and with
// --backend pebbledb too: pebble would read a young goleveldb database's
// log, and its lock (fcntl) does not see goleveldb's, so the live files
// would be imported against the documented "a running node's lock
// refuses". The refusal names goleveldb and leaves no target behind.
func TestImportIAVLWrongBackendRefused(t *testing.T) {
	parent := t.TempDir()
	node, err := dbm.NewDB("application", dbm.GoLevelDBBackend, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	gen, _ := workload.New(workload.Config{Seed: 5, Scale: 0.01})
	rs := rootmulti.NewStore(node, log.NewNopLogger(), metrics.NewNoOpMetrics())
	for _, name := range gen.Stores() {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 5; v++ {
		for _, cs := range gen.Block(v) {
			st := rs.GetStoreByName(cs.Name).(storetypes.KVStore)
			for _, p := range cs.Pairs {
				if p.Delete {
					st.Delete(p.Key)
				} else {
					st.Set(p.Key, p.Value)
				}
			}
		}
		rs.Commit()
	}
	src := filepath.Join(parent, "application.db")
	// the default backend sees the node's lock
	if code, _, errs := cli(t, "import-iavl", src, filepath.Join(t.TempDir(), "memiavl.db")); code != exitFailure || !strings.Contains(errs, "locked") {
		t.Fatalf("default backend: exit %d %q, want the lock refusal", code, errs)
	}
	dst := filepath.Join(t.TempDir(), "memiavl.db")
	code, out, errs := cli(t, "import-iavl", "--backend", "pebbledb", src, dst)
	if code == exitOK {
		t.Fatalf("import-iavl --backend pebbledb of a goleveldb database held open by a running node: exit 0, stdout %q", out)
	}
	if !strings.Contains(errs, "--backend goleveldb") {
		t.Errorf("stderr %q: want a refusal that names the goleveldb backend", errs)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused import left %s: %v", dst, err)
	}
}
