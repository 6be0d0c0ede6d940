package multitree

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInterruptedRollbackFinishedAtOlderTarget: a writer Open with an
// older TargetVersion (no Rollback) finishes an interrupted rollback to 25
// first, and leaves what the rollback to 25 leaves: current at the newest
// snapshot at or below 25 (20), the snapshots at or below 25 kept, and the
// versions up to 25. It used to point current at the snapshot chosen for
// its own target (10) and remove snapshot 20.
func TestInterruptedRollbackFinishedAtOlderTarget(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores,
		SnapshotInterval: -1, SnapshotKeepRecent: 3})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for i := 0; i < 4; i++ { // snapshots 10, 20, 30 and 40
		for v, h := range commitN(t, db, 3, 10) {
			hashes[v] = h
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	commitN(t, db, 3, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}

	// a rollback to 25 interrupted right after its file was written
	duringRollback = func(*DB, int64) error { return errStop }
	_, err = Open(dir, Options{TargetVersion: 25, Rollback: true})
	duringRollback = nil
	if !errors.Is(err, errStop) {
		t.Fatalf("interrupted rollback: %v", err)
	}

	// the next writer open, with an older target and no rollback,
	// finishes the rollback to 25 first (Options.Rollback)
	db, err = Open(dir, Options{TargetVersion: 12})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, rollbackFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rollback file left: %v", err)
	}
	cur, err := readCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	after, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cur != 20 {
		t.Errorf("after the rollback to 25 was finished by an open at 12: current = %d, want 20 (snapshots before %v, after %v)", cur, before, after)
	}
	if !slices.Contains(after, 20) {
		t.Errorf("snapshot 20, at or below the rollback's target 25, was removed: snapshots %v", after)
	}
	// the database holds version 25, the rollback's target
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 25 {
		t.Fatalf("after the rollback: version %d, want 25", db.Version())
	}
	if h := db.LastCommitInfo().Hash(); !bytes.Equal(h, hashes[25]) {
		t.Fatalf("app hash at 25 after the rollback: %X, want %X", h, hashes[25])
	}
}
