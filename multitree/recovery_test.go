package multitree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInitialVersionAfterReopen: SetInitialVersion changes the initial
// version after snapshot 0 recorded the one of the database's creation; a
// reopen takes it from the log's first version, so that the next snapshot
// records it and Verify passes.
func TestInitialVersionAfterReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 5}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetInitialVersion(100); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 3) // 100..102
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 2, 2) // 103, 104
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, snapshotDirName(104), metadataFileName))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeMetadata("metadata", b); err != nil || m.InitialVersion != 100 {
		t.Errorf("snapshot 104 records initial version %d (%v), want 100", m.InitialVersion, err)
	}
	if _, err := Verify(dir); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// TestWriterOpenKeepsForeignTmp: a writer Open removes the temporary
// entries the database writes, not every name ending in ".tmp".
func TestWriterOpenKeepsForeignTmp(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "backup.tmp", "precious")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	own := []string{snapshotDirName(7) + tmpSuffix, snapshotDirName(0) + prunedSuffix + tmpSuffix, currentFileName + tmpSuffix,
		rollbackFileName + tmpSuffix, rollbacksName + tmpSuffix}
	for _, name := range own {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if db, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("the writer Open removed another's entry: %v", err)
	}
	for _, name := range own {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the writer Open left %s: %v", name, err)
		}
	}
}

// TestCreateOverLeftoverSnapshotZero: a snapshot 0 without current (an
// import at version 0 interrupted before it wrote current) is not adopted
// by a create, which writes the database it was asked for.
func TestCreateOverLeftoverSnapshotZero(t *testing.T) {
	dir := t.TempDir()
	if _, err := Import(dir, 0, nil, ImportOptions{Stores: []string{"x"}, InitialVersion: 77}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := slices.Sorted(slices.Values(crashStores))
	if got := db.StoreNames(); !slices.Equal(got, want) || db.WorkingVersion() != 1 {
		t.Errorf("created database has stores %s, working version %d; want %s, 1", got, db.WorkingVersion(), want)
	}
}

// TestSnapshotNamesExact: only the database's own spelling of a snapshot
// directory's name is one; a signed number would sort before the others
// and be taken for the oldest kept snapshot by the prune.
func TestSnapshotNamesExact(t *testing.T) {
	for _, name := range []string{"snapshot-+0000000000000000012", "snapshot--000000000000000012", "snapshot-0000000000000000012x",
		"snapshot-000000000000000012", "snapshot-99999999999999999999"} {
		if v, ok := parseSnapshotDirName(name); ok {
			t.Errorf("%s taken for the snapshot of version %d", name, v)
		}
	}
	if v, ok := parseSnapshotDirName(snapshotDirName(12)); !ok || v != 12 {
		t.Errorf("%s: %d, %v", snapshotDirName(12), v, ok)
	}
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "snapshot-+0000000000000000012"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ { // snapshots 5, 10, 15, 20
		commitN(t, db, 1, 5)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	commitN(t, db, 1, 2) // the prune after RewriteSnapshot's next commit
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "snapshot-+0000000000000000012")); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if db, err = Open(dir, Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := db.ViewAt(7)
	if err != nil {
		t.Fatalf("ViewAt(7) with snapshot 5 kept: %v", err)
	}
	v.Release()
}

// TestTargetBelowCurrentWithShortLog: snapshots 10 and 20 kept, current
// names 20, and the log ends at 17 (what a crash inside a commit by a
// snapshot leaves, or a power loss under a relaxed fsync policy). A writer
// Open at 15 without a rollback is refused and changes nothing: it would
// commit versions 18-20 again beside the current snapshot of the old ones,
// and the next Open would land on the old 20. A rollback to 15 works, and
// a plain Open repairs the state and lands on 20.
func TestTargetBelowCurrentWithShortLog(t *testing.T) {
	build := func(t *testing.T) (string, map[int64][]byte) {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1})
		if err != nil {
			t.Fatal(err)
		}
		hashes := commitN(t, db, 1, 10)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		for k, v := range commitN(t, db, 1, 10) {
			hashes[k] = v
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if versions, _ := listSnapshots(dir); fmt.Sprint(versions) != "[10 20]" {
			t.Fatalf("snapshots %v", versions)
		}
		cutLog(t, dir, 17)
		return dir, hashes
	}
	dir, hashes := build(t)
	before := dirFingerprint(t, dir)
	if db, err := Open(dir, Options{TargetVersion: 15}); !errors.Is(err, ErrVersion) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("writer Open at 15 without a rollback: %v, want ErrVersion", err)
	}
	if dirFingerprint(t, dir) != before {
		t.Fatal("the refused Open changed the directory")
	}
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 20 || string(db.LastCommitInfo().Hash()) != string(hashes[20]) {
		t.Errorf("plain Open: version %d, want 20 with its hash", db.Version())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	dir, hashes = build(t)
	if db, err = Open(dir, Options{TargetVersion: 15, Rollback: true}); err != nil {
		t.Fatal(err)
	}
	if db.Version() != 15 || string(db.LastCommitInfo().Hash()) != string(hashes[15]) {
		t.Errorf("rollback to 15: version %d", db.Version())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Errorf("Verify after the rollback: %v", err)
	}
}
