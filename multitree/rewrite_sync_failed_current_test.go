package multitree

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSyncRewriteFailedCurrentRemovesSnapshot makes the synchronous
// RewriteSnapshot fail at writing current, after its snapshot directory is
// in place: the directory, which nothing names, goes with the failure (as
// after a failed background rewrite), the database keeps working from the
// old snapshot, and once the failure ends a rewrite succeeds and a reopen
// gives the last app hash.
func TestSyncRewriteFailedCurrentRemovesSnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"},
		SnapshotInterval: 1000, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	step := 0
	commit := func() {
		t.Helper()
		step++
		setStepKeys(t, db, step)
		if _, err := db.Commit(); err != nil {
			t.Fatalf("commit %d: %v", step, err)
		}
	}
	commit()
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := db.SnapshotVersion()

	// current's temporary file cannot be written
	if err := os.MkdirAll(filepath.Join(dir, currentFileName+tmpSuffix, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	failures := 0
	for i := 0; i < 4; i++ {
		commit()
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			failures++
		}
	}
	if failures != 4 {
		t.Fatalf("%d of 4 rewrites failed", failures)
	}
	if got := db.SnapshotVersion(); got != base {
		t.Fatalf("snapshot version %d after failed rewrites, %d before", got, base)
	}
	versions, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if v > base {
			t.Errorf("snapshot directory of version %d stays after its rewrite failed to make it current (current names %d; on disk %v)", v, base, versions)
		}
	}
	commit()
	if err := os.RemoveAll(filepath.Join(dir, currentFileName+tmpSuffix)); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := db.SnapshotVersion(); got != db.LastCommitInfo().Version {
		t.Errorf("snapshot version %d after the failure ended, last version %d", got, db.LastCommitInfo().Version)
	}
	commit()
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if got := db2.LastCommitInfo().Hash(); !bytes.Equal(got, want) {
		t.Errorf("app hash after reopen %X, committed %X", got, want)
	}
}
