package multitree

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestStoreNamesAtLogDamage: StoreNamesAt of a later version, read from the
// log by a writer opened at an older version (TargetVersion), that meets a
// damaged record fails with ErrCorrupt, as every other DB call classifies
// the log's damage.
func TestStoreNamesAtLogDamage(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{TargetVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)*3/4] ^= 0x5a // inside version 8 or so, after the open scanned it
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[len(b)*3/4:len(b)*3/4+1], int64(len(b)*3/4)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = db.StoreNamesAt(10)
	if err == nil {
		t.Skip("the damaged record was not read")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("StoreNamesAt(10) over a damaged log record: %v, want an error wrapping multitree.ErrCorrupt", err)
	}
}
