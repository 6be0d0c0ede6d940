package main

import (
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestRewriteLogCountInitialVersion: a chain started at an initial height
// (SetInitialVersion 100, as an SDK chain restarted from an exported genesis
// with initial_height) has snapshot 0 and log versions 100..102 only.
// rewrite-snapshot reports "N versions in the log after it": it must count
// the 3 versions the log holds after snapshot 0, not 102.
func TestRewriteLogCountInitialVersion(t *testing.T) {
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	mustOK(t, err)
	mustOK(t, db.SetInitialVersion(100))
	for i := 0; i < 3; i++ {
		mustOK(t, db.Set("a", []byte{byte(i)}, []byte("v")))
		_, err := db.Commit()
		mustOK(t, err)
	}
	mustOK(t, db.Close())

	code, _, errs := cli(t, "rewrite-snapshot", dir)
	if code != 0 {
		t.Fatalf("rewrite-snapshot: exit %d\n%s", code, errs)
	}
	if !strings.Contains(errs, "(base snapshot 0, 3 versions in the log after it)") {
		t.Errorf("rewrite-snapshot of a database at versions 100..102 (log 100..102, base snapshot 0) misstates the versions it replays:\n%s", errs)
	}
}
