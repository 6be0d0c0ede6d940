package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLostCurrentIsDamage: a directory that lost its current file but
// holds snapshots or log entries is a damaged database, as the library's
// Verify, LatestVersion and Open report it ("a database that lost its
// current file"), not "no memiavl database": the commands say so, and fail.
func TestLostCurrentIsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	makeDB(t, dir, 0.01, 12, 6)
	if err := os.Remove(filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", dir}, {"dump", dir}, {"rewrite-snapshot", dir}} {
		code, _, errs := cli(t, args...)
		if code != exitFailure {
			t.Errorf("memiavl %v: exit %d, want %d", args, code, exitFailure)
		}
		if strings.Contains(errs, "holds no memiavl database") || !strings.Contains(errs, "lost its current file") {
			t.Errorf("memiavl %v: %q: reports a database that lost its current file as no database", args, strings.TrimSpace(errs))
		}
	}
}
