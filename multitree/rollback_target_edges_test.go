package multitree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRollbackTargetEdges: a rollback to the latest version changes nothing (not
// even the rollback count that read-only opens beside watch); targets
// before the oldest kept snapshot, or before the first version, are refused
// with ErrVersion (never ErrBusy) by writer rollbacks and read-only opens
// alike; a target after the latest too; a create with a target creates
// nothing; RewriteSnapshot after a TargetVersion open without Rollback
// keeps the later versions of the log, which a plain reopen lands on.
func TestRollbackTargetEdges(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 0, InitialVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 1, 10) // 3..12
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k, v := range commitN(t, db, 1, 5) { // 13..17
		hashes[k] = v
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rb0, _ := readRollbacks(dir)

	// rollback to the latest: nothing changes
	db, err = Open(dir, Options{TargetVersion: 17, Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 17 || db.SnapshotVersion() != 12 {
		t.Errorf("rollback to latest: %d snap %d", db.Version(), db.SnapshotVersion())
	}
	db.Close()
	if rb, _ := readRollbacks(dir); rb != rb0 {
		t.Errorf("no-op rollback counted: %d -> %d", rb0, rb)
	}
	// below the oldest kept snapshot
	for _, ro := range []bool{false, true} {
		for _, tv := range []int64{1, 2, 5, 11} {
			o := Options{TargetVersion: tv, ReadOnly: ro, Rollback: !ro}
			if db, err := Open(dir, o); !errors.Is(err, ErrVersion) || errors.Is(err, ErrBusy) {
				if db != nil {
					db.Close()
				}
				t.Errorf("%+v: %v", o, err)
			}
		}
		o := Options{TargetVersion: 18, ReadOnly: ro}
		if _, err := Open(dir, o); !errors.Is(err, ErrVersion) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if lv, _ := LatestVersion(dir); lv != 17 {
		t.Errorf("latest %d", lv)
	}
	// a missing dir with CreateIfMissing and a target
	missing := filepath.Join(t.TempDir(), "x")
	if _, err := Open(missing, Options{CreateIfMissing: true, TargetVersion: 3, Rollback: true, InitialStores: crashStores}); !errors.Is(err, ErrVersion) {
		t.Errorf("create with target: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("created %v", err)
	}
	// target open (no rollback) at 14, rewrite there, reopen plain
	db, err = Open(dir, Options{TargetVersion: 14, SnapshotKeepRecent: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if db.SnapshotVersion() != 14 || db.Version() != 14 {
		t.Errorf("after rewrite: snap %d version %d", db.SnapshotVersion(), db.Version())
	}
	if lv, _ := LatestVersion(dir); lv != 17 {
		t.Errorf("latest %d after rewrite at 14", lv)
	}
	commitN(t, db, 1, 1)
	db.Close()
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 17 || string(db.LastCommitInfo().Hash()) != string(hashes[17]) {
		t.Errorf("reopen at %d", db.Version())
	}
	for v := int64(12); v <= 17; v++ {
		view, err := db.ViewAt(v)
		if v < 14 {
			if !errors.Is(err, ErrVersion) {
				t.Errorf("ViewAt %d, before the only kept snapshot: %v", v, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ViewAt %d: %v", v, err)
		}
		if string(view.CommitInfo().Hash()) != string(hashes[v]) {
			t.Errorf("ViewAt %d hash", v)
		}
		view.Release()
	}
	db.Close()
	if _, err := Verify(dir); err != nil {
		t.Errorf("verify: %v", err)
	}
}
