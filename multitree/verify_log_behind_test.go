package multitree

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestVerifyLogBehindSnapshot: Verify's snapshot chain check
// (checkSnapshotChain) on a database whose log ends before the current
// snapshot, with an older snapshot kept beside it. Open handles this state
// as a crash leaves it (see the "log ends before the current snapshot"
// branch of open): the next writable Open removes the older snapshots and
// empties the log, with nothing lost. Verify reports it sound: the chain
// check stops where the log does not reach the next snapshot.
func TestVerifyLogBehindSnapshot(t *testing.T) {
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1}
	t.Run("relaxed-fsync-lost-tail", func(t *testing.T) {
		// a machine crash under a relaxed fsync policy lost the log's
		// last entries, which the current snapshot holds
		dir := t.TempDir()
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, db, 1, 10)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		commitN(t, db, 1, 10)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		cutLog(t, dir, 17)
		if _, err := Verify(dir); err != nil {
			t.Errorf("Verify of a database the next Open repairs silently: %v", err)
		}
		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("writable open: %v", err)
		}
		if db.Version() != 20 {
			t.Fatalf("opened at %d, want 20", db.Version())
		}
		db.Close()
		if _, err := Verify(dir); err != nil {
			t.Fatalf("Verify after the open: %v", err)
		}
	})
	t.Run("crash-in-commit-by-snapshot", func(t *testing.T) {
		// a crash inside a version committed by a snapshot, after current
		// names it, before the older snapshots are removed and the log
		// reset (snapshotCommitLocked)
		dir := t.TempDir()
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		SetMaxLoggedEntry(db, 128<<10)
		commitN(t, db, 1, 5)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		commitN(t, db, 1, 4)
		if err := db.log.Flush(); err != nil {
			t.Fatal(err)
		}
		saved := t.TempDir()
		for _, name := range []string{snapshotDirName(5), walDirName} {
			if err := os.CopyFS(filepath.Join(saved, name), os.DirFS(filepath.Join(dir, name))); err != nil {
				t.Fatal(err)
			}
		}
		commitBlock(t, db, largeBlock(10, 160<<10)) // by a snapshot
		if SnapshotCommits(db) != 1 {
			t.Fatal("version 10 was not committed by a snapshot")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{snapshotDirName(5), walDirName} {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join(saved, name))); err != nil {
				t.Fatal(err)
			}
		}
		vs, _ := listSnapshots(dir)
		if _, err := Verify(dir); err != nil {
			t.Errorf("Verify of snapshots %v, current 10, log up to 9: %v", vs, err)
		}
		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("writable open: %v", err)
		}
		if db.Version() != 10 {
			t.Fatalf("opened at %d, want 10", db.Version())
		}
		db.Close()
	})
}
