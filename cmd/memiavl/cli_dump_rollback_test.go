package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIDumpWarnsUnfinishedRollback: on a database whose rollback to
// version 15 is unfinished (what a rollback interrupted after recording its
// target leaves), dump reports version 15 and warns of the rollback, in its
// text report and in its JSON ("rollback_to", as verify --json), since the
// kept snapshots and the log range it lists still hold the versions after
// 15 that the next writable open removes; wal dump warns too.
func TestCLIDumpWarnsUnfinishedRollback(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 30, 10, 20)
	os.Remove(filepath.Join(dir, "LOCK"))
	writeUnfinishedRollback(t, dir, 15)

	if _, _, errs := cli(t, "wal", "dump", "--from", "30", dir); !strings.Contains(errs, "rollback to version 15 is unfinished") {
		t.Fatalf("wal dump does not warn: %q", errs)
	}
	code, out, errs := cli(t, "dump", dir)
	if code != 0 {
		t.Fatalf("dump: exit %d %s", code, errs)
	}
	if !strings.Contains(out, "version        15") {
		t.Fatalf("dump does not report version 15:\n%s", out)
	}
	if !strings.Contains(out, "a rollback to version 15 is unfinished") {
		t.Errorf("dump of a database with an unfinished rollback to 15 (kept snapshots listed with 20, log 1..30) says nothing of the rollback:\n%s%s", out, errs)
	}
	code, out, _ = cli(t, "dump", "--json", dir)
	if code != 0 || !strings.Contains(out, `"rollback_to": 15`) {
		t.Errorf("dump --json of a database with an unfinished rollback has no field for it:\n%s", out)
	}
}
