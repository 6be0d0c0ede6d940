package multitree

import (
	"testing"
)

// TestCheckedSnapshotsBoundedAcrossSnapshotCommits: the snapshots a
// snapshot commit (a version too large for the log) removes leave the
// record of checked snapshots too: after 40 such commits it holds about as
// many entries as there are snapshots on disk.
func TestCheckedSnapshotsBoundedAcrossSnapshotCommits(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	SetMaxLoggedEntry(db, 64<<10)
	const commits = 40
	for v := int64(1); v <= commits; v++ {
		commitBlock(t, db, largeBlock(v, 80<<10)) // each committed by a snapshot
	}
	waitForPrune(t, db)
	if n := SnapshotCommits(db); n != commits {
		t.Fatalf("%d snapshot commits, want %d", n, commits)
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.snapsChecked.Lock()
	n := len(db.snapsChecked.m)
	db.snapsChecked.Unlock()
	if n > len(snaps)+2 {
		t.Errorf("the record of checked snapshots holds %d entries after %d snapshot commits, with %d snapshots on disk %v: the snapshots a snapshot commit removes are never forgotten",
			n, commits, len(snaps), snaps)
	}
}
