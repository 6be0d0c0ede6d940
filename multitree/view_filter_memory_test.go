package multitree

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// viewAtBytes makes a database of stores stores of leaves keys each,
// rewritten into a snapshot at version 1, commits versions 2..11 that
// each change one key of one store, and returns the bytes allocated by a
// ViewAt of each of versions 2..9 (the views held, as a query cache holds
// them) and the live heap they keep.
func viewAtBytes(t *testing.T, stores, leaves int) (alloc, live int64) {
	names := make([]string, stores)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d", i)
	}
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: names, SnapshotInterval: -1, Sync: wal.SyncNone,
		OpenCheck: OpenCheckNone, ViewCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range names {
		for j := 0; j < leaves; j++ {
			if err := db.Set(name, []byte(fmt.Sprintf("k%07d", j)), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for v := 2; v <= 11; v++ {
		if err := db.Set(names[0], []byte("hot"), []byte(fmt.Sprint(v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var views []*View
	runtime.GC()
	runtime.GC()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for v := int64(2); v <= 9; v++ {
		vw, err := db.ViewAt(v)
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, vw)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&b)
	for _, vw := range views {
		if got, err := vw.Get(names[0], []byte("hot")); err != nil || string(got) != fmt.Sprint(vw.Version()) {
			t.Fatalf("version %d: %q, %v", vw.Version(), got, err)
		}
		vw.Release()
	}
	return int64(b.TotalAlloc - a.TotalAlloc), int64(b.HeapAlloc) - int64(a.HeapAlloc)
}

// TestViewAtMemoryIndependentOfSnapshotSize: a version rebuilt by ViewAt
// holds "the nodes changed between that snapshot and the version" (doc.go,
// memory model); its other nodes are read from the mapped snapshot. Eight
// views of versions one key apart should then cost the same whether the
// snapshot holds 16k or 128k keys per store.
func TestViewAtMemoryIndependentOfSnapshotSize(t *testing.T) {
	const stores = 4
	small, large := 16<<10, 128<<10
	as, ls := viewAtBytes(t, stores, small)
	al, ll := viewAtBytes(t, stores, large)
	t.Logf("8 views, %d stores of %d keys: %d KiB allocated, %d KiB live; of %d keys: %d KiB allocated, %d KiB live",
		stores, small, as>>10, ls>>10, large, al>>10, ll>>10)
	if ll > 2*ls+256<<10 {
		t.Errorf("8 views rebuilt one version after a snapshot of %d stores keep %d KiB live when the stores hold %d keys each, %d KiB when they hold %d: a rebuilt view holds memory in proportion to its snapshot's size, not to the changes since",
			stores, ll>>10, large, ls>>10, small)
	}
}
