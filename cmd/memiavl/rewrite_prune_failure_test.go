package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIRewritePruneFailureReportsWrittenSnapshot: when rewrite-snapshot has
// written its snapshot and made it current, and only the prune of the older
// snapshots fails (here a file the prune cannot remove), the command's
// error must say what happened: the new snapshot is in place and the older
// ones were not all pruned, rather than only that the "background snapshot
// rewrite failed" (the library's ErrRewrite), which would have the user
// rerun or restore a database that is already rewritten.
func TestCLIRewritePruneFailureReportsWrittenSnapshot(t *testing.T) {
	for _, written := range []bool{true, false} {
		t.Run(map[bool]string{true: "written", false: "nothing to write"}[written], func(t *testing.T) {
			rewritePruneFailure(t, written)
		})
	}
}

// rewritePruneFailure runs rewrite-snapshot --keep-recent 0 over a database
// whose older snapshot, 6, cannot be pruned; with written unset the current
// snapshot already holds the last version (a rewrite ran first, keeping 6).
func rewritePruneFailure(t *testing.T, written bool) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 6)
	os.Remove(filepath.Join(dir, "LOCK"))
	want := snapshotDirName(12) + " was written and is the current snapshot"
	if !written {
		if code, out, errs := cli(t, "rewrite-snapshot", "--progress", "none", "--keep-recent", "1", dir); code != 0 {
			t.Fatalf("first rewrite: exit %d\n%s\n%s", code, out, errs)
		}
		want = "nothing to write, " + snapshotDirName(12) + " is the current snapshot"
	}
	// a file of the older snapshot that no one may unlink (root included)
	pinned := filepath.Join(dir, snapshotDirName(6), "metadata")
	if out, err := exec.Command("chattr", "+i", pinned).CombinedOutput(); err != nil {
		t.Skipf("chattr +i not available here: %v %s", err, out)
	}
	t.Cleanup(func() {
		// the prune renamed the directory before it failed
		matches, _ := filepath.Glob(filepath.Join(dir, snapshotDirName(6)+"*", "metadata"))
		for _, m := range matches {
			_ = exec.Command("chattr", "-i", m).Run()
		}
	})

	code, out, errs := cli(t, "rewrite-snapshot", "--progress", "none", "--keep-recent", "0", dir)
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	snap := db.SnapshotVersion()
	db.Close()
	if snap != 12 {
		t.Fatalf("exit %d: current snapshot %d, want 12 (the write itself succeeded)\nstdout %q\nstderr %q", code, snap, out, errs)
	}
	if code == 0 {
		return // a prune failure reported as a warning is fine too
	}
	last := errs[strings.LastIndex(strings.TrimRight(errs, "\n"), "\n")+1:]
	if !strings.Contains(last, want) || !strings.Contains(last, "pruning the older snapshots failed") {
		t.Fatalf("exit %d with snapshot %s current, but the error says:\n%s", code, snapshotDirName(12), last)
	}
}
