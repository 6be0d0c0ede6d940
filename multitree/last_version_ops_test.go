package multitree

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// lastVersionDB builds a database at math.MaxInt64: by a snapshot commit
// (snap) or through the log, optionally rewritten.
func lastVersionDB(t *testing.T, snap, rewrite bool, keep int) string {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: math.MaxInt64 - 2, SnapshotInterval: -1, SnapshotKeepRecent: keep})
	if err != nil {
		t.Fatal(err)
	}
	edgeCommit(t, db, "a", "k0", "v0")
	edgeCommit(t, db, "a", "k1", "v1")
	if snap {
		SetMaxLoggedEntry(db, 1)
	}
	edgeCommit(t, db, "a", "k2", "v2")
	if rewrite {
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLastVersionOps: a database at math.MaxInt64 (committed by a snapshot
// or through the log, rewritten or not) opens for writing and read-only,
// rewrites its snapshot and verifies as any other, and refuses a rollback
// to a version no kept snapshot reaches.
func TestLastVersionOps(t *testing.T) {
	for _, c := range []struct {
		snap, rewrite bool
		keep          int
	}{{true, false, 0}, {true, true, 0}, {false, false, 0}, {false, true, 0}, {false, true, 2}, {true, false, 2}} {
		t.Run(fmt.Sprintf("snap%v_rewrite%v_keep%d", c.snap, c.rewrite, c.keep), func(t *testing.T) {
			dir := lastVersionDB(t, c.snap, c.rewrite, c.keep)
			edgeNoPanic(t, "ops", func() {
				for i := 0; i < 2; i++ {
					db, err := Open(dir, Options{})
					if err != nil {
						t.Fatalf("open %d: %v", i, err)
					}
					if db.Version() != math.MaxInt64 {
						t.Errorf("version %d", db.Version())
					}
					if err := db.RewriteSnapshot(context.Background()); err != nil {
						t.Errorf("rewrite: %v", err)
					}
					if err := db.Close(); err != nil {
						t.Errorf("close: %v", err)
					}
				}
				ro, err := Open(dir, Options{ReadOnly: true})
				if err != nil {
					t.Fatalf("read-only: %v", err)
				}
				if ro.Version() != math.MaxInt64 {
					t.Errorf("ro version %d", ro.Version())
				}
				ro.Close()
				rep, err := Verify(dir)
				if err != nil {
					t.Fatalf("verify: %v", err)
				}
				if rep.Version != math.MaxInt64 {
					t.Errorf("verify reports version %d", rep.Version)
				}
				db, err := Open(dir, Options{TargetVersion: math.MaxInt64})
				if err != nil {
					t.Fatalf("target max: %v", err)
				}
				db.Close()
				// each writable open above rewrote the snapshot at
				// math.MaxInt64 and pruned the older ones (keep-recent 0)
				if _, err := Open(dir, Options{Rollback: true, TargetVersion: math.MaxInt64 - 1}); !errors.Is(err, ErrVersion) {
					t.Fatalf("rollback to max-1 with no older snapshot: %v, want ErrVersion", err)
				}
			})
		})
	}
}

// TestLastVersionRollbackFirst: a rollback of a database at math.MaxInt64
// to the version before, where a kept snapshot and the log reach back to
// it (ErrVersion after a commit by a snapshot, which removed the older
// ones), the version committed again, and a rollback further back.
func TestLastVersionRollbackFirst(t *testing.T) {
	for _, c := range []struct {
		snap, rewrite bool
		keep          int
	}{{false, false, 0}, {false, true, 2}, {true, false, 2}} {
		t.Run(fmt.Sprintf("snap%v_rewrite%v_keep%d", c.snap, c.rewrite, c.keep), func(t *testing.T) {
			dir := lastVersionDB(t, c.snap, c.rewrite, c.keep)
			edgeNoPanic(t, "ops", func() {
				db, err := Open(dir, Options{Rollback: true, TargetVersion: math.MaxInt64 - 1, SnapshotKeepRecent: c.keep})
				if c.snap {
					// the commit by a snapshot removed the older ones
					if !errors.Is(err, ErrVersion) {
						t.Fatalf("rollback to max-1 after a commit by a snapshot: %v, want ErrVersion", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("rollback to max-1: %v", err)
				}
				{
					if db.Version() != math.MaxInt64-1 {
						t.Errorf("rolled back to %d", db.Version())
					}
					edgeCommit(t, db, "a", "k3", "v3")
					if err := db.RewriteSnapshot(context.Background()); err != nil {
						t.Errorf("rewrite: %v", err)
					}
					db.Close()
					db, err = Open(dir, Options{SnapshotKeepRecent: c.keep})
					if err != nil {
						t.Fatalf("reopen after rollback: %v", err)
					}
					if db.Version() != math.MaxInt64 {
						t.Errorf("after rollback+commit: %d", db.Version())
					}
					db.Close()
					if _, err := Verify(dir); err != nil {
						t.Fatalf("verify after rollback: %v", err)
					}
					// the rewrite above kept c.keep older snapshots
					db, err = Open(dir, Options{Rollback: true, TargetVersion: math.MaxInt64 - 2, SnapshotKeepRecent: c.keep})
					if c.keep == 0 {
						if !errors.Is(err, ErrVersion) {
							t.Fatalf("rollback to max-2 with no older snapshot: %v, want ErrVersion", err)
						}
					} else if err != nil {
						t.Fatalf("rollback to max-2: %v", err)
					} else {
						if db.Version() != math.MaxInt64-2 {
							t.Errorf("rolled back to %d", db.Version())
						}
						db.Close()
					}
				}
			})
		})
	}
}

// TestLastVersionLogBehindSnapshot: the log lost its last entry
// (math.MaxInt64), which the current snapshot holds: Open empties the log
// (logResumeAt) and serves the version.
func TestLastVersionLogBehindSnapshot(t *testing.T) {
	dir := lastVersionDB(t, false, true, 2)
	l, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBack(math.MaxInt64 - 1); err != nil {
		t.Fatal(err)
	}
	l.Close()
	edgeNoPanic(t, "ops", func() {
		for _, ro := range []bool{true, false, false, true} {
			db, err := Open(dir, Options{ReadOnly: ro})
			if err != nil {
				t.Fatalf("open ro=%v: %v", ro, err)
			}
			if db.Version() != math.MaxInt64 {
				t.Errorf("version %d", db.Version())
			}
			db.Close()
		}
		if _, err := Verify(dir); err != nil {
			t.Fatalf("verify: %v", err)
		}
	})
}
