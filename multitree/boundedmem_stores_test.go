package multitree

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

func bmNames(n int) []string {
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("s%03d", i))
	}
	return names
}

// bmFill makes dir a database of stores stores with leaves leaves each of
// size bytes, rewritten into a snapshot, then versions more versions each
// changing one key of every store.
func bmFill(t *testing.T, dir string, stores, leaves, size, versions int) {
	names := bmNames(stores)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: names, SnapshotInterval: -1, RewriteConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		for j := 0; j < leaves; j++ {
			v := make([]byte, size)
			v[0] = byte(j)
			if err := db.Set(name, []byte(fmt.Sprintf("k%05d", j)), v); err != nil {
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
	for v := 0; v < versions; v++ {
		for _, name := range names {
			if err := db.Set(name, []byte(fmt.Sprintf("x%05d", v%7)), []byte{byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBoundedMemManyStoresRewriteVerify: with RewriteConcurrency 1, writing,
// checking and verifying the snapshot of 64 stores takes about the memory
// of 8 (the stores are written one at a time, each with its write buffers
// and a lookup table of at most 8 MiB; see memiavl.Tree.WriteSnapshot and
// snapshot.Writer), not memory per store.
func TestBoundedMemManyStoresRewriteVerify(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	grew := map[string][2]int64{}
	for k, stores := range []int{8, 64} {
		dir := testutil.ShmTempDir(t)
		bmFill(t, dir, stores, 64, 16<<10, 3)
		record := func(what string, f func() error) {
			g := grew[what]
			g[k] = testutil.HeapGrowth(t, fmt.Sprintf("%d stores: %s", stores, what), f)
			grew[what] = g
		}
		var db *DB
		record("Open with OpenCheckSync", func() (err error) {
			db, err = Open(dir, Options{SnapshotInterval: -1, RewriteConcurrency: 1, OpenCheck: OpenCheckSync})
			return err
		})
		record("VerifySnapshot", func() error { return db.VerifySnapshot() })
		record("RewriteSnapshot", func() error { return db.RewriteSnapshot(context.Background()) })
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		record("Verify", func() error { _, err := Verify(dir); return err })
	}
	for what, g := range grew {
		// 56 more stores: a few KiB each for their trees, names and
		// filters (8 KiB at least each) is fine; 64 KiB each is not
		if extra := g[1] - g[0]; extra > 56*64<<10 {
			t.Errorf("%s: 64 stores grew the heap by %.1f MiB more than 8 stores", what, float64(extra)/(1<<20))
		}
	}
}
