package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIRewriteNothingToWriteVerifiesBeforePruning: when the latest
// version already has the current snapshot, rewrite-snapshot writes
// nothing but still prunes the older snapshots beyond --keep-recent. They
// could be the only good copies ("A damaged snapshot stops the command
// before anything is written or pruned", rewrite-snapshot --help), so a
// damaged current snapshot fails the command and every snapshot stays,
// older versions still readable.
func TestCLIRewriteNothingToWriteVerifiesBeforePruning(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 30, 10, 20, 30)
	os.Remove(filepath.Join(dir, "LOCK"))
	// damage that only the checksums find (as TestRewriteSnapshotDamaged)
	lookup := filepath.Join(dir, snapshotDirName(30), "s-bank", "lookup")
	fi, err := os.Stat(lookup)
	if err != nil {
		t.Fatal(err)
	}
	testutil.DamageByte(t, lookup, fi.Size()/2)
	if code, _, _ := cli(t, "verify", dir); code != exitFailure {
		t.Fatalf("verify of the damaged snapshot: exit %d", code)
	}

	code, out, errs := cli(t, "rewrite-snapshot", "--progress", "none", "--keep-recent", "0", dir)
	kept, kerr := multitree.SnapshotVersions(dir)
	if kerr != nil {
		t.Fatal(kerr)
	}
	if code != exitFailure || !strings.Contains(errs, "lookup") {
		t.Errorf("rewrite-snapshot --keep-recent 0 over a damaged current snapshot: exit %d, want %d naming the damaged file\nstdout %q\nstderr %q",
			code, exitFailure, out, errs)
	}
	if !slices.Equal(kept, []int64{0, 10, 20, 30}) {
		t.Errorf("kept snapshots %v after the refused prune, want [0 10 20 30]: the good older snapshots were pruned", kept)
	}
	// the older snapshot 20 and the log after it still serve version 25
	if v, h := dbStateAt(t, dir, 25); v != 25 || h == "" {
		t.Errorf("version 25 (from snapshot 20) no longer readable: %d %q", v, h)
	}
}

// dbStateAt opens dir read-only at version and returns its version and app
// hash, (0, "") when it cannot be opened.
func dbStateAt(t *testing.T, dir string, version int64) (int64, string) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: version, SnapshotInterval: -1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		t.Logf("open %s at %d: %v", dir, version, err)
		return 0, ""
	}
	defer db.Close()
	return db.Version(), string(db.LastCommitInfo().Hash())
}
