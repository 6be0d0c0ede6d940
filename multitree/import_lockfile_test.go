package multitree_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestRefusedImportLeavesNoLockFile: a failed import into an existing
// directory removes the lock file it created, leaving the directory as it
// was, also when it is refused under its lock before it owns the directory
// (a database that lost its current pointer: ErrCorrupt).
func TestRefusedImportLeavesNoLockFile(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "snapshot-00000000000000000003")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "junk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"s": leafSource("k", "v", 2)}, multitree.ImportOptions{})
	if !errors.Is(err, multitree.ErrCorrupt) {
		t.Fatalf("import over an orphaned snapshot: %v, want ErrCorrupt", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "LOCK")); err == nil {
		t.Fatalf("the refused import left the LOCK file it created in %s (it held none before)", dir)
	}
}

// TestRefusedReplaceLeavesNoLockFile: an import with Replace over a
// database that has no lock file (a copied or restored directory), refused
// because the database is at another version, removes the lock file it
// took on the database, leaving the directory as it was.
func TestRefusedReplaceLeavesNoLockFile(t *testing.T) {
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 4; v++ {
		if err := db.Set("s", []byte("k"), []byte{byte(v)}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "LOCK")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	_, err = multitree.Import(dir, 3, map[string]multitree.NodeSource{"s": leafSource("k", "v", 2)}, multitree.ImportOptions{Replace: true})
	if !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("replacing a database at version 4 by an import at 3: %v, want ErrExists", err)
	}
	if _, err := os.Lstat(lock); err == nil {
		t.Fatalf("the refused import left the LOCK file it created in %s (it held none before)", dir)
	}
	db, err = multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v := db.Version(); v != 4 {
		t.Fatalf("version %d after the refused import, want 4", v)
	}
}
