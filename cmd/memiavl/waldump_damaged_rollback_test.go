package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWALDumpDamagedRollbackFile: with an unfinished rollback to 15
// recorded, wal dump warns that the entries after 15 are not the
// database's. When that record is damaged (dump, verify and
// rewrite-snapshot all fail on it as a corrupt database), wal dump warns
// that the database does not open, naming the rollback record. It used to
// read the log as if there were no rollback: it printed versions 16..25
// as the database's, exited 0 and said nothing.
func TestWALDumpDamagedRollbackFile(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 25, 10)
	writeUnfinishedRollback(t, dir, 15)
	rb := filepath.Join(dir, "rollback")
	b, err := os.ReadFile(rb)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // its checksum no longer matches
	if err := os.WriteFile(rb, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli(t, "dump", dir); code != exitFailure || !strings.Contains(errs, "rollback") {
		t.Fatalf("dump with a damaged rollback record: exit %d %s", code, errs)
	}
	code, out, errs := cli(t, "wal", "dump", dir)
	if code == exitOK && !strings.Contains(errs, "rollback") {
		t.Errorf("wal dump with a damaged rollback record: exit 0, no error or warning (stderr %q); stdout starts %q", errs, firstLine(out))
	}
}
