package multitree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSyncRewriteFailedCurrentKeepsPreexistingSnapshot: a database opened
// at an older TargetVersion (no rollback) re-commits versions whose snapshot
// directory an earlier session wrote and keeps. A synchronous
// RewriteSnapshot at such a version finds the directory in place (it
// writes nothing); when writing current then fails, the directory it did
// not write must stay (as installRewrite keeps one it did not stage).
func TestSyncRewriteFailedCurrentKeepsPreexistingSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 1000, SnapshotKeepRecent: 10}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(db *DB, v int) {
		t.Helper()
		if err := db.Set("a", []byte(fmt.Sprintf("k%d", v%5)), []byte(fmt.Sprint(v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
	}
	for v := 1; v <= 9; v++ {
		commit(db, v)
		if v%3 == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(before, 6) {
		t.Fatalf("setup: snapshots %v", before)
	}
	opts.TargetVersion = 4 // base: the snapshot of 3
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit(db, 5)
	commit(db, 6)
	// current's temporary file cannot be written
	if err := os.MkdirAll(filepath.Join(dir, currentFileName+tmpSuffix, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err == nil {
		t.Fatal("setup: the rewrite did not fail")
	} else {
		t.Logf("rewrite at 6: %v", err)
	}
	after, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(after, 6) {
		t.Errorf("the kept snapshot of version 6, written by the earlier session, is removed by a failed synchronous rewrite that wrote nothing: before %v, after %v", before, after)
	}
}
