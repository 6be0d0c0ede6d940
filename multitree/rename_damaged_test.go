package multitree

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestRenameRefusesDamagedStore: a rename copies the old store's pairs into
// a tree with no snapshot under it, whose next snapshot write checks
// nothing it copies. A value damaged in the old store's kvs file, read
// without Open's check (OpenCheckNone), is refused with ErrCorrupt instead
// of being copied into the renamed store.
func TestRenameRefusesDamagedStore(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := db.Set("a", []byte(fmt.Sprintf("key-%05d", i)), []byte(fmt.Sprintf("value-%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := db.Version()
	closeOK(t, db)

	patchStoreKVs(t, dir, v, "a", "value-00007", "Value-00007")

	db, err = Open(dir, Options{OpenCheck: OpenCheckNone, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.ApplyUpgrades(wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "c"}}})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("rename of a store whose kvs file is damaged: %v, want ErrCorrupt", err)
	}
}
