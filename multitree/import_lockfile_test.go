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
