package multitree

import (
	"bytes"
	"math"
	"testing"
)

// TestSnapshotCommitAtLastVersion: the last version a database can have
// (math.MaxInt64) committed by a snapshot, as a version too large for the
// log is, commits like any other version: Commit succeeds, and a reopen
// serves the version. (The log emptied after it expects no next version:
// logResumeAt; v+1 would wrap around, and the log refuse it.)
func TestSnapshotCommitAtLastVersion(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: math.MaxInt64 - 1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	edgeCommit(t, db, "a", "k0", "v0")
	SetMaxLoggedEntry(db, 1) // every later version is "too large for the log"
	if err := db.Set("a", []byte("k1"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		_ = db.Close()
		var reopen error
		if db2, err := Open(dir, Options{}); err != nil {
			reopen = err
		} else {
			_ = db2.Close()
		}
		t.Fatalf("commit of version %d by a snapshot: %v (reopen: %v)", int64(math.MaxInt64), err, reopen)
	}
	want := info.Hash()
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	db2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db2.Close()
	if db2.Version() != math.MaxInt64 || !bytes.Equal(db2.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened at %d", db2.Version())
	}
}
