package multitree

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestRemoveDatabaseKeepsForeignLogDir: RemoveDatabase of a directory that
// holds no database leaves the entries that are not a database's, a "wal"
// directory of other files included, and says there is no database.
func TestRemoveDatabaseKeepsForeignLogDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "wal", "journal.txt")
	if err := os.WriteFile(foreign, []byte("not a log segment"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := RemoveDatabase(dir)
	if _, serr := os.Stat(foreign); serr != nil {
		t.Fatalf("RemoveDatabase of a directory without a database (returned %v) removed %s: %v", err, foreign, serr)
	}
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("RemoveDatabase of a directory without a database and a foreign wal: %v, want ErrNotFound", err)
	}
}

// TestStoreNamesAtAfterUnfinishedRollback: a read-only database opened at
// the target of an unfinished rollback refuses, as ViewAt does, the
// versions after that target, which the rollback discards.
func TestStoreNamesAtAfterUnfinishedRollback(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	edgeCommit(t, db, "a", "k1", "v")
	edgeCommit(t, db, "a", "k2", "v")
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"discarded"}}); err != nil {
		t.Fatal(err)
	}
	edgeCommit(t, db, "a", "k3", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// a rollback to 2 stopped right after it was recorded, as a crash would
	stop := errors.New("stopped")
	duringRollback = func(*DB, int64) error { return stop }
	_, err = Open(dir, Options{TargetVersion: 2, Rollback: true})
	duringRollback = nil
	if !errors.Is(err, stop) {
		t.Fatalf("rollback: %v", err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.Version() != 2 || ro.RollbackTarget() != 2 {
		t.Fatalf("read-only at %d, rollback target %d", ro.Version(), ro.RollbackTarget())
	}
	if _, err := ro.ViewAt(3); !errors.Is(err, ErrVersion) {
		t.Fatalf("ViewAt(3): %v", err)
	}
	if names, err := ro.StoreNamesAt(3); !errors.Is(err, ErrVersion) {
		t.Fatalf("StoreNamesAt(3) of a version the unfinished rollback discards: %v, %v; want ErrVersion", names, err)
	}
}

// TestWorkingCommitInfoAfterLastVersion: once the last version a database
// can have is committed there is no next Commit, and WorkingCommitInfo
// describes none (as WorkingVersion reports 0).
func TestWorkingCommitInfoAfterLastVersion(t *testing.T) {
	db := edgeOpen(t, t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: math.MaxInt64})
	edgeCommit(t, db, "a", "k", "v")
	if _, err := db.Commit(); !errors.Is(err, ErrVersion) {
		t.Fatalf("Commit after the last version: %v", err)
	}
	if info := db.WorkingCommitInfo(); info != nil && info.Version <= db.Version() {
		t.Fatalf("WorkingCommitInfo after the last version: version %d", info.Version)
	}
}

// TestCreateRefusesForeignLogDir: Open with CreateIfMissing in a directory
// whose "wal" holds other files than log segments refuses (ErrExists) and
// creates nothing: the database would write its segments among them, and
// RemoveDatabase, which removes a database's log directory whole, would
// take them with it.
func TestCreateRefusesForeignLogDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "wal", "journal.txt")
	if err := os.WriteFile(foreign, []byte("not a log segment"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err == nil {
		db.Close()
		t.Fatal("a database was created over a foreign wal directory")
	}
	if !errors.Is(err, ErrExists) {
		t.Fatalf("create over a foreign wal directory: %v, want ErrExists", err)
	}
	if ok, _ := hasDatabase(dir); ok {
		t.Fatal("the refused create left a current file")
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatal(err)
	}
}
