package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIDumpDamagedSnapshot: dump of a database whose snapshot has a
// damaged branch record (the root's hash) must not exit 0 with a root hash
// and app hash the database never had. verify and export find the damage;
// dump must too (or print the right hashes), for the latest version (the
// current snapshot) and for --version (an older kept snapshot).
func TestCLIDumpDamagedSnapshot(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 6, 12) // snapshots 6 and 12 kept, 12 current
	os.Remove(filepath.Join(dir, "LOCK"))
	dump := func(args ...string) (int, DumpResult, string) { return tryDumpJSON(t, args...) }
	_, latest, _ := dump(dir)
	_, at6, _ := dump("--version", "6", dir)
	for _, v := range []int64{6, 12} {
		p := filepath.Join(dir, snapshotDirName(v), treeDirName("bank"), "branches")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-64] ^= 0xff // the first byte of the root's hash (the root is the last branch)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, _ := cli(t, "verify", dir); code != exitFailure {
		t.Fatalf("verify: exit %d on a damaged snapshot", code)
	}
	for _, c := range []struct {
		args []string
		want DumpResult
	}{{[]string{dir}, latest}, {[]string{"--version", "6", dir}, at6}} {
		code, got, errs := dump(c.args...)
		if code == exitOK && got.AppHash != c.want.AppHash {
			t.Errorf("dump %v: exit 0 with app hash %s, the database's is %s (stderr %q)", c.args, got.AppHash, c.want.AppHash, errs)
		} else if code != exitFailure || !strings.Contains(errs, "corrupt") || !strings.Contains(errs, treeDirName("bank")) {
			t.Errorf("dump %v: exit %d, stderr %q; want exit %d naming the damaged tree", c.args, code, errs, exitFailure)
		}
	}
}

// tryDumpJSON runs dump --json with args and returns its exit code, its
// report (when it exits 0) and its stderr, where dumpJSON requires exit 0.
func tryDumpJSON(t *testing.T, args ...string) (int, DumpResult, string) {
	t.Helper()
	code, out, errs := cli(t, append([]string{"dump", "--json"}, args...)...)
	var r DumpResult
	if code == exitOK {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
	}
	return code, r, errs
}
