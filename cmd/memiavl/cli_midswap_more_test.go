package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// midSwapDB builds the state an import swapping by two renames leaves when
// killed between them: no <dir>, the old database at <dir>.replaced.tmp and
// the whole new one (version 5) at <dir>.import.tmp.
func midSwapDB(t *testing.T) (dir, hash string) {
	t.Helper()
	src := t.TempDir()
	hash = makeDB(t, src, 0.01, 5)
	dir = filepath.Join(t.TempDir(), "db")
	copyDir(t, makeEmptyDB(t), dir+".replaced.tmp")
	copyDir(t, src, dir+".import.tmp")
	if v, err := multitree.LatestVersion(dir); err != nil || v != 5 {
		t.Fatalf("LatestVersion = %d, %v; want 5", v, err)
	}
	return dir, hash
}

// TestCLIMidSwapDumpStoreSizes: mid-swap, dump reports each store's
// snapshot size from the database it read, the same as once the swap is
// finished.
func TestCLIMidSwapDumpStoreSizes(t *testing.T) {
	dir, _ := midSwapDB(t)
	sizes := func(when string) map[string]int64 {
		code, out, errs := cli(t, "dump", "--json", dir)
		if code != 0 {
			t.Fatalf("dump %s: exit %d\n%s%s", when, code, out, errs)
		}
		var res DumpResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, s := range res.Stores {
			m[s.Name] = s.SnapshotBytes
		}
		return m
	}
	mid := sizes("mid-swap")
	db, err := multitree.Open(dir, multitree.Options{}) // finishes the swap
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	after := sizes("after the swap")
	for name, n := range after {
		if n == 0 {
			continue
		}
		if mid[name] != n {
			t.Errorf("store %s: snapshot_bytes %d mid-swap, %d once the same database is moved to %s", name, mid[name], n, dir)
		}
	}
}

// TestCLIMidSwapWALDump: mid-swap, 'wal dump' reads the log of the
// database the next writable open moves in, as the other read-only
// commands do.
func TestCLIMidSwapWALDump(t *testing.T) {
	dir, _ := midSwapDB(t)
	code, out, errs := cli(t, "wal", "dump", dir)
	if code != 0 {
		t.Errorf("memiavl wal dump on a swap interrupted between its renames: exit %d\n%s%s", code, out, errs)
	}
}

// TestCLIMidSwapEmptyDir: mid-swap with <dir> recreated empty (a
// deployment's mkdir -p, say), verify reads the database beside it, as
// multitree.Verify does (the writable open moves it onto the empty dir).
func TestCLIMidSwapEmptyDir(t *testing.T) {
	dir, _ := midSwapDB(t)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("multitree.Verify: %v", err)
	}
	code, out, errs := cli(t, "verify", dir)
	if code != 0 {
		t.Errorf("memiavl verify (multitree.Verify succeeds): exit %d\n%s%s", code, out, errs)
	}
}

// TestCLIMidSwapExportImport: export reads, and import replaces, the
// database of a swap interrupted between its renames.
func TestCLIMidSwapExportImport(t *testing.T) {
	dir, _ := midSwapDB(t)
	file := filepath.Join(t.TempDir(), "s.stream")
	code, out, errs := cli(t, "export", dir, file)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errs)
	}
	dir2, _ := midSwapDB(t)
	code, out, errs = cli(t, "import", "--height", "5", file, dir2)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	for _, s := range []string{".import.tmp", ".replaced.tmp"} {
		if _, err := os.Lstat(dir2 + s); err == nil {
			t.Errorf("%s left after import", s)
		}
	}
}
