package compat_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

type mceCancelAfter struct {
	dbm.DB
	n      atomic.Int64
	after  int64
	cancel func()
}

func (d *mceCancelAfter) Get(k []byte) ([]byte, error) {
	if d.n.Add(1) == d.after {
		d.cancel()
	}
	return d.DB.Get(k)
}

// ImportIAVLContext cancelled while stores are being read, with stores
// still unread and some exporters made: every iavl exporter goroutine ends.
func TestImportIAVLCancelledLeavesNoExporter(t *testing.T) {
	db := dbm.NewMemDB()
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.SetPruning(pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	var names []string
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("s%02d", i)
		names = append(names, name)
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		st := rs.GetStoreByName(name).(storetypes.KVStore)
		for j := 0; j < 4000; j++ {
			st.Set([]byte(fmt.Sprintf("k%05d", j)), []byte("v"))
		}
	}
	id := rs.Commit()
	for _, after := range []int64{3000, 9000, 20000} {
		base := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		src := &mceCancelAfter{DB: db, after: after, cancel: cancel}
		err := compat.ImportIAVLContext(ctx, src, id.Version, nil, filepath.Join(t.TempDir(), "m.db"), multitree.Options{RewriteConcurrency: 2})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after %d reads (of %d): %v", after, src.n.Load(), err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("goroutines %d > %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
