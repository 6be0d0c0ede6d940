package multitree_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// oldFmtReadAll opens dir read-only at each version lo..hi and returns the app
// hash and contents of each.
func oldFmtReadAll(t *testing.T, dir string, lo, hi int64) (map[int64]string, map[int64]string) {
	t.Helper()
	hashes, contents := map[int64]string{}, map[int64]string{}
	for v := lo; v <= hi; v++ {
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v})
		if err != nil {
			t.Fatalf("read-only open at %d: %v", v, err)
		}
		hashes[v] = oldFmtHex(db.LastCommitInfo().Hash())
		view, err := db.View()
		if err != nil {
			t.Fatal(err)
		}
		contents[v] = oldFmtViewContents(t, view)
		view.Release()
		db.Close()
	}
	return hashes, contents
}

func TestOldFormatsReadPaths(t *testing.T) {
	recorded := readFixtureHashes(t)
	ref := filepath.Join(t.TempDir(), "ref")
	testutil.CopyDir(t, fixtureDir, ref)
	_, refContents := oldFmtReadAll(t, ref, fixtureOldest, fixtureLatest)

	dir := oldFmtFixture(t)
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if v, err := multitree.LatestVersion(dir); err != nil || v != fixtureLatest {
		t.Fatalf("LatestVersion %d %v", v, err)
	}
	if s, err := multitree.SnapshotVersions(dir); err != nil || len(s) != 2 {
		t.Fatalf("SnapshotVersions %v %v", s, err)
	}
	hashes, contents := oldFmtReadAll(t, dir, fixtureOldest, fixtureLatest)
	for v := int64(fixtureOldest); v <= fixtureLatest; v++ {
		if hashes[v] != oldFmtHex(recorded[v]) {
			t.Errorf("v%d: app hash %s, recorded %x", v, hashes[v], recorded[v])
		}
		if contents[v] != refContents[v] {
			t.Errorf("v%d: contents differ from the format-2 fixture", v)
		}
	}

	// writer: ViewAt every version, then commit, rewrite, prune
	_, want := fixtureOracle(t, fixtureLatest+6)
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1, SnapshotKeepRecent: 0})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(fixtureOldest); v <= fixtureLatest; v++ {
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", v, err)
		}
		if got := oldFmtHex(view.CommitInfo().Hash()); got != oldFmtHex(recorded[v]) {
			t.Errorf("ViewAt(%d): %s", v, got)
		}
		if c := oldFmtViewContents(t, view); c != refContents[v] {
			t.Errorf("ViewAt(%d): contents differ", v)
		}
		view.Release()
	}
	for v := int64(fixtureLatest + 1); v <= fixtureLatest+3; v++ {
		if got := fixtureCommit(t, db, v); oldFmtHex(got) != oldFmtHex(want[v]) {
			t.Fatalf("v%d: %x want %x", v, got, want[v])
		}
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatalf("rewrite on a format-1 snapshot: %v", err)
	}
	for v := int64(fixtureLatest + 4); v <= fixtureLatest+6; v++ {
		if got := fixtureCommit(t, db, v); oldFmtHex(got) != oldFmtHex(want[v]) {
			t.Fatalf("v%d: %x want %x", v, got, want[v])
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("verify after the upgrade: %v", err)
	}
	snaps, err := multitree.SnapshotVersions(dir)
	t.Logf("snapshots after: %v %v", snaps, err)
	lo := snaps[0]
	h2, _ := oldFmtReadAll(t, dir, lo, fixtureLatest+6)
	for v := lo; v <= fixtureLatest+6; v++ {
		if h2[v] != oldFmtHex(want[v]) {
			t.Errorf("after upgrade v%d: %s want %x", v, h2[v], want[v])
		}
	}
}

// oldFmtUpgraded returns the all-format-1 fixture after this build committed on
// it (versions 13..18, a rewrite at 15, all snapshots kept): format-1
// snapshots 5 and 10, format-2 snapshot 15, log segments of both formats.
func oldFmtUpgraded(t *testing.T, opts multitree.Options) (string, map[int64][]byte) {
	t.Helper()
	_, want := fixtureOracle(t, fixtureLatest+10)
	dir := oldFmtFixture(t)
	opts.SnapshotInterval, opts.SnapshotKeepRecent = -1, 10
	db, err := multitree.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(fixtureLatest + 1); v <= fixtureLatest+6; v++ {
		if got := fixtureCommit(t, db, v); oldFmtHex(got) != oldFmtHex(want[v]) {
			t.Fatalf("v%d: %x want %x", v, got, want[v])
		}
		if v == 15 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

func oldFmtCheckAll(t *testing.T, what, dir string, lo, hi int64, want map[int64][]byte) {
	t.Helper()
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("%s: verify: %v", what, err)
	}
	if v, err := multitree.LatestVersion(dir); err != nil || v != hi {
		t.Fatalf("%s: LatestVersion %d %v, want %d", what, v, err, hi)
	}
	h, _ := oldFmtReadAll(t, dir, lo, hi)
	for v := lo; v <= hi; v++ {
		if h[v] != oldFmtHex(want[v]) {
			t.Errorf("%s: read-only at %d: %s want %x", what, v, h[v], want[v])
		}
	}
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v := lo; v <= hi; v++ {
		view, err := db.ViewAt(v)
		if err != nil {
			t.Errorf("%s: ViewAt(%d): %v", what, v, err)
			continue
		}
		if got := oldFmtHex(view.CommitInfo().Hash()); got != oldFmtHex(want[v]) {
			t.Errorf("%s: ViewAt(%d): %s want %x", what, v, got, want[v])
		}
		oldFmtViewContents(t, view)
		view.Release()
	}
}

func TestOldFormatsMixedRollbacks(t *testing.T) {
	for _, o := range []multitree.Options{{}, {Sync: wal.SyncGrouped}, {AsyncCommitBuffer: 4}} {
		dir, want := oldFmtUpgraded(t, o)
		oldFmtCheckAll(t, "mixed", dir, 5, 18, want)
		// TargetVersion writable open (no rollback) at versions in both formats
		for _, v := range []int64{6, 11, 12, 13, 16} {
			cp := filepath.Join(t.TempDir(), "cp")
			testutil.CopyDir(t, dir, cp)
			db, err := multitree.Open(cp, multitree.Options{TargetVersion: v, SnapshotInterval: -1})
			if err != nil {
				t.Errorf("writable TargetVersion %d: %v", v, err)
				continue
			}
			if got := oldFmtHex(db.LastCommitInfo().Hash()); got != oldFmtHex(want[v]) {
				t.Errorf("writable TargetVersion %d: %s", v, got)
			}
			db.Close()
		}
		// rollbacks across the boundary, then commits again
		for _, target := range []int64{12, 11, 9, 6} {
			cp := filepath.Join(t.TempDir(), "rb")
			testutil.CopyDir(t, dir, cp)
			oo := o
			oo.TargetVersion, oo.Rollback, oo.SnapshotInterval, oo.SnapshotKeepRecent = target, true, -1, 10
			db, err := multitree.Open(cp, oo)
			if err != nil {
				t.Errorf("rollback to %d: %v", target, err)
				continue
			}
			if got := oldFmtHex(db.LastCommitInfo().Hash()); got != oldFmtHex(want[target]) {
				t.Errorf("rollback to %d: %s", target, got)
			}
			hi := target + 3
			if target < 8 {
				hi = 7 // the upgrade at 8 is the fixture's
			}
			for v := target + 1; v <= hi; v++ {
				if got := fixtureCommit(t, db, v); oldFmtHex(got) != oldFmtHex(want[v]) {
					t.Fatalf("after rollback to %d: v%d %x", target, v, got)
				}
			}
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Errorf("rewrite after rollback to %d: %v", target, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			oldFmtCheckAll(t, "after rollback", cp, 5, hi, want)
		}
	}
}

func TestOldFormatsPrunes(t *testing.T) {
	for _, keep := range []int{0, 1, 2} {
		dir, want := oldFmtUpgraded(t, multitree.Options{})
		db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: 2, SnapshotKeepRecent: keep})
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(19); v <= 22; v++ {
			fixtureCommit(t, db, v)
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		snaps, _ := multitree.SnapshotVersions(dir)
		segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
		t.Logf("keep %d: snapshots %v, segments %d", keep, snaps, len(segs))
		oldFmtCheckAll(t, "pruned", dir, snaps[0], 22, want)
	}
}
