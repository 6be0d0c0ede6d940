package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWALDumpMissingLogDir: a database whose wal directory is
// missing (or is a file) is a damaged database, as dump and verify say.
// wal dump says so too. It used to say the directory was "neither a
// memiavl database nor its log directory (no current, ...)", though its
// current file is right there: it looked for current in the parent.
func TestWALDumpMissingLogDir(t *testing.T) {
	for _, how := range []string{"missing", "file"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			makeDB(t, dir, 0.01, 12, 10)
			wdir := filepath.Join(dir, "wal")
			if err := os.RemoveAll(wdir); err != nil {
				t.Fatal(err)
			}
			if how == "file" {
				if err := os.WriteFile(wdir, []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, _, errs := cli(t, "wal", "dump", dir)
			if code != exitFailure {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if strings.Contains(errs, "neither a memiavl database") || strings.Contains(errs, "no current") {
				t.Errorf("wal dump of a database (it has %s) whose log directory is %s: %s", currentName, how, errs)
			}
		})
	}
}
