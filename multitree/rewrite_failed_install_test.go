package multitree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestFailedInstallRemovesSnapshot: a background rewrite whose
// snapshot was renamed into place but could not be made current (here the
// temporary file of "current" cannot be created: a directory stands where
// it goes; EIO/ENOSPC on that small file or the fsyncs after the rename
// fail the same step) is reported by the next Commit, and the database
// keeps working from its previous snapshot. The complete snapshot
// directory the failed rewrite wrote must not stay behind: nothing names
// it, nothing maps it, and no prune removes it (the prune only removes
// snapshots older than the current one). Left behind, every interval adds
// one full copy of the state to the disk for as long as the failure
// lasts.
func TestFailedInstallRemovesSnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"},
		SnapshotInterval: 2, SnapshotKeepRecent: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	step := 0
	commit := func() error {
		t.Helper()
		step++
		setStepKeys(t, db, step)
		info, err := db.Commit()
		if info == nil {
			t.Fatalf("commit %d: %v", step, err)
		}
		return err
	}
	for i := 0; i < 5; i++ {
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(db)
	}
	waitForPrune(t, db)

	// every later rewrite fails once its snapshot directory is in place
	if err := os.MkdirAll(filepath.Join(dir, currentFileName+tmpSuffix, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	failures := 0
	for i := 0; i < 20; i++ {
		err := commit()
		if err != nil {
			if !errors.Is(err, ErrRewrite) {
				t.Fatalf("commit %d: %v", step, err)
			}
			failures++
		}
		waitRewrite(db)
	}
	if failures == 0 {
		t.Fatal("no background rewrite failed")
	}
	cur, err := readCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stale []int64
	var size int64
	for _, v := range versions {
		if v > cur {
			stale = append(stale, v)
			_ = filepath.Walk(filepath.Join(dir, snapshotDirName(v)), func(_ string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					size += fi.Size()
				}
				return nil
			})
		}
	}
	t.Logf("%d failed rewrites; current snapshot %d; snapshots on disk %v", failures, cur, versions)
	if len(stale) > 0 {
		t.Errorf("%d complete snapshot directories newer than the current snapshot %d stay on disk after %d failed rewrites (%d bytes, unreferenced, never pruned while the failure lasts): %v",
			len(stale), cur, failures, size, stale)
	}
	// once the failure ends, the rewrites succeed again and a reopen
	// gives the last commit's app hash
	if err := os.RemoveAll(filepath.Join(dir, currentFileName+tmpSuffix)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := commit(); err != nil && !errors.Is(err, ErrRewrite) {
			t.Fatal(err)
		}
		waitRewrite(db)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if got := db.SnapshotVersion(); got <= cur {
		t.Errorf("snapshot version %d after the failure ended, %d before", got, cur)
	}
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

// setStepKeys sets 20 keys of stores "a" and "b" of db, which step
// chooses, to values naming step.
func setStepKeys(t *testing.T, db *DB, step int) {
	t.Helper()
	for _, s := range []string{"a", "b"} {
		for j := 0; j < 20; j++ {
			if err := db.Set(s, []byte(fmt.Sprintf("k%03d", (step*7+j)%100)), []byte(fmt.Sprintf("v%d-%d", step, j))); err != nil {
				t.Fatal(err)
			}
		}
	}
}
