package multitree

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestLatestVersionAfterTornRollback: a power loss inside a rollback's cut
// of the log (TruncateBack) can leave the rollback record and, in a
// synchronous log, a lost page after the target's record with whole
// records after it. Open finishes such a rollback (its log open is told
// that the entries after the target are being discarded); LatestVersion,
// "the version Open would open dir at", must report the target too: the
// compat multistore and the command-line tool call it before they open the
// database, and an error there left a node that could not start.
func TestLatestVersionAfterTornRollback(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 12; v++ {
		if err := db.Set("a", []byte(fmt.Sprint("k", v)), make([]byte, 1500)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const target = 5
	testutil.TearRollback(t, dir, target)
	// the helper writes the record this package writes
	if b, err := os.ReadFile(filepath.Join(dir, rollbackFileName)); err != nil || !bytes.Equal(b, encodeRollback(target)) {
		t.Fatalf("rollback record %x (%v), want %x", b, err, encodeRollback(target))
	}

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	if v := ro.Version(); v != target {
		t.Errorf("read-only open at %d, want %d", v, target)
	}
	ro.Close()
	if latest, err := LatestVersion(dir); err != nil || latest != target {
		t.Errorf("LatestVersion: %d, %v; want %d (what Open opens at)", latest, err, target)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("writer open: %v", err)
	}
	if v := db.Version(); v != target {
		t.Errorf("writer open at %d, want %d", v, target)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if latest, err := LatestVersion(dir); err != nil || latest != target {
		t.Errorf("LatestVersion after the rollback finished: %d, %v", latest, err)
	}
}
