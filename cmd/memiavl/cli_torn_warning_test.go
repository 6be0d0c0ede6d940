package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLITornTailWarningNamesDatabaseVersion: the torn-tail warning
// ("the database is at version N, and any version the tail held is lost")
// gives the database's latest version, also from dump --version V and
// rewrite-snapshot --version V (without --rollback, which keeps every
// later version), where V is only the version inspected or written.
func TestCLITornTailWarningNamesDatabaseVersion(t *testing.T) {
	base := t.TempDir()
	makeDB(t, base, 0.01, 30, 10, 20)
	os.Remove(filepath.Join(base, "LOCK"))
	segs := segmentFiles(t, base)
	last := segs[len(segs)-1]
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	// the last record (version 30) loses its end: the database is at 29
	if err := os.Truncate(last, fi.Size()-50); err != nil {
		t.Fatal(err)
	}
	if d := dumpJSON(t, base); d.Version != 29 || d.WALTornTail == nil {
		t.Fatalf("dump of the torn log: version %d, torn tail %v; want 29 and a torn tail", d.Version, d.WALTornTail)
	}
	// the commands that report it at the latest version say 29
	if _, _, errs := cli(t, "wal", "dump", base); !strings.Contains(errs, "the database is at version 29") {
		t.Fatalf("wal dump: %s", errs)
	}

	dir := filepath.Join(t.TempDir(), "db")
	copyDir(t, base, dir)
	for _, c := range []struct {
		args   []string
		output func(out, errs string) string
	}{
		{[]string{"dump", "--version", "15", dir}, func(out, _ string) string { return out }},
		{[]string{"rewrite-snapshot", "--progress", "none", "--version", "15", dir}, func(_, errs string) string { return errs }},
	} {
		code, out, errs := cli(t, c.args...)
		if code != 0 {
			t.Fatalf("memiavl %v: exit %d\n%s%s", c.args, code, out, errs)
		}
		text := c.output(out, errs)
		if !strings.Contains(text, "torn tail") {
			t.Fatalf("memiavl %v: no torn-tail warning:\n%s", c.args, text)
		}
		if !strings.Contains(text, "the database is at version 29") {
			t.Errorf("memiavl %v: the warning does not give the database's version 29:\n%s", c.args, text)
		}
	}
	// the database is still at 29 after rewrite-snapshot --version 15
	if d := dumpJSON(t, dir); d.Version != 29 {
		t.Errorf("after rewrite-snapshot --version 15: version %d, want 29", d.Version)
	}
}
