package compat_test

import (
	"fmt"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestBoundedMemImportIAVLManyStores: ImportIAVL's memory follows the
// stores imported at once (RewriteConcurrency), not the number of stores: a
// cosmos/iavl exporter reads 32 nodes ahead (values included) from the
// moment it is made, so a store's exporter is made only when the import
// reads the store. Here 24 stores of 24 leaves of 256 KiB, imported one at
// a time, grow the heap by far less than all stores' read-ahead (~100 MiB).
func TestBoundedMemImportIAVLManyStores(t *testing.T) {
	const stores, leaves, valueSize = 24, 24, 256 << 10
	top := testutil.ShmTempDir(t)
	db, err := dbm.NewGoLevelDB("application", top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.SetPruning(pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	var names []string
	for i := 0; i < stores; i++ {
		name := fmt.Sprintf("s%02d", i)
		names = append(names, name)
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, valueSize)
	for _, name := range names {
		st := rs.GetStoreByName(name).(storetypes.KVStore)
		for j := 0; j < leaves; j++ {
			value[0], value[1] = byte(j), name[2]
			st.Set([]byte(fmt.Sprintf("k%03d", j)), value)
		}
	}
	id := rs.Commit()
	rs = nil

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	{ // baseline: one store
		base := testutil.LiveHeap()
		stop := testutil.PeakHeap()
		err := compat.ImportIAVL(histReadOnly{db}, id.Version, names[:1], filepath.Join(top, "one.db"), multitree.Options{RewriteConcurrency: 1})
		peak := stop()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("baseline, a single store imported: peak heap growth %.1f MiB", float64(int64(peak)-int64(base))/(1<<20))
	}
	dir := filepath.Join(top, "memiavl.db")
	base := testutil.LiveHeap()
	stop := testutil.PeakHeap()
	start := time.Now()
	err = compat.ImportIAVL(histReadOnly{db}, id.Version, nil, dir, multitree.Options{RewriteConcurrency: 1})
	peak := stop()
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("%d stores of %d x %d KiB leaves, RewriteConcurrency 1: peak heap growth %.1f MiB in %v",
		stores, leaves, valueSize>>10, float64(grew)/(1<<20), time.Since(start))
	if limit := int64(40 << 20); grew > limit {
		t.Fatalf("importing %d stores one at a time grew the heap by %.1f MiB (limit %.0f MiB): every store's iavl exporter "+
			"reads ahead 32 nodes from the start, not only the store being imported", stores, float64(grew)/(1<<20), float64(limit)/(1<<20))
	}
}
