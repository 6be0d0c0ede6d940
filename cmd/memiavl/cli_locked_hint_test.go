package main

import (
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIRewriteLockedHint: rewrite-snapshot beside a writer fails (exit
// 1) naming the LOCK file and saying why it is held, and changes nothing.
func TestCLIRewriteLockedHint(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 6, 3)
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	code, _, errs := cli(t, "rewrite-snapshot", dir)
	if code != exitFailure || !strings.Contains(errs, "LOCK") || !strings.Contains(errs, "is a node running on it?") {
		t.Errorf("rewrite-snapshot beside a writer: exit %d, stderr %q", code, errs)
	}
	mustOK(t, db.Close())
	if d := dumpJSON(t, dir); d.Version != 6 || d.AppHash != hash {
		t.Errorf("the refused rewrite changed the database: %+v", d)
	}
}
