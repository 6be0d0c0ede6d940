package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWALDumpUnfinishedImport: a database holding an unfinished
// import (its "import" marker says "finishing") is refused by dump,
// verify and rewrite-snapshot; wal dump still prints its log, but warns
// that the database does not open and why. It used to print the log as
// the database's and exit 0, with not a word that it was not one yet.
func TestWALDumpUnfinishedImport(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 10)
	if err := os.WriteFile(filepath.Join(dir, "import"), []byte("finishing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli(t, "dump", dir); code != exitFailure || !strings.Contains(errs, "import") {
		t.Fatalf("dump of an unfinished import: exit %d %s", code, errs)
	}
	for _, args := range [][]string{
		{"wal", "dump", dir},
		{"wal", "dump", "--json", dir},
		{"wal", "dump", filepath.Join(dir, "wal")},
	} {
		code, out, errs := cli(t, args...)
		if code == exitOK && !strings.Contains(errs, "import") {
			t.Errorf("memiavl %v on a database whose import did not finish: exit 0, no error or warning; stdout starts %q",
				args[:len(args)-1], firstLine(out))
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
