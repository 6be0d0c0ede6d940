package multitree

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestOlderOpenKeepsNewerSnapshotsBesideDamagedCurrent: a writer Open at
// an older snapshot (TargetVersion) whose current names a snapshot that
// does not open (damaged, or restored stale) leaves the snapshots newer
// than current in place (db.go: "the newest of them could be the only
// whole state left"); an Open that does not need current's snapshot does
// not decide that they are an interrupted rewrite's leftovers.
func TestOlderOpenKeepsNewerSnapshotsBesideDamagedCurrent(t *testing.T) {
	dir := t.TempDir()
	writeVetFixture(t, dir, 5) // versions 1..4, snapshots 2 and 4
	db, err := Open(dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(5); v <= 6; v++ {
		commitVetValue(t, db, v, 5)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// current restored stale (naming 4), and snapshot 4 damaged
	if err := writeFileAtomic(dir, currentFileName, encodeCurrent(4)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapshotDirName(4), metadataFileName), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{TargetVersion: 2, SnapshotInterval: -1, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatalf("open at version 2: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(6))); err != nil {
		t.Fatalf("snapshot 6, newer than the damaged current's 4, was removed by an open at version 2: %v", err)
	}
}
