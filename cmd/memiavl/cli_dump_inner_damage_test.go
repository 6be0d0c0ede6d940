package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCLIDumpDamagedInnerHashes: dump of a version rebuilt from a snapshot
// whose inner records' hashes are damaged (the root record intact) must not
// exit 0 with an app hash the database never had: the log replayed over the
// snapshot rehashes the changed paths from the stored hashes of the
// subtrees beside them.
func TestCLIDumpDamagedInnerHashes(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 6, 12) // snapshots 6 and 12 kept, 12 current
	os.Remove(filepath.Join(dir, "LOCK"))
	dump := func(args ...string) (int, DumpResult, string) { return tryDumpJSON(t, args...) }
	code, at9, errs := dump("--version", "9", dir)
	if code != exitOK {
		t.Fatalf("dump --version 9: exit %d: %s", code, errs)
	}
	p := filepath.Join(dir, snapshotDirName(6), treeDirName("bank"), "branches")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 3*64 {
		t.Fatalf("store bank has %d branch records", len(b)/64)
	}
	for off := 0; off+64 < len(b); off += 64 { // every branch's hash but the root's (the last)
		b[off] ^= 0xff
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, got, errs := dump("--version", "9", dir)
	if code == exitOK && got.AppHash != at9.AppHash {
		t.Fatalf("dump --version 9: exit 0 with app hash %s, the database's is %s", got.AppHash, at9.AppHash)
	}
	if code != exitFailure {
		t.Fatalf("dump --version 9 over damaged inner hashes: exit %d (stderr %q), want %d", code, errs, exitFailure)
	}
}
