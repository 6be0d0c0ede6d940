package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIMidSwap: an import replacing a database by two renames (a file
// system without RENAME_EXCHANGE) killed between them leaves the old
// database at <dir>.replaced.tmp, the whole new one at <dir>.import.tmp and
// no <dir>. The read-only commands read the database the next writable
// open moves in, and the writing ones finish the swap, as LatestVersion
// already reports; none says <dir> holds no database.
func TestCLIMidSwap(t *testing.T) {
	src := t.TempDir()
	hash := makeDB(t, src, 0.01, 5)
	for _, args := range [][]string{
		{"verify"},
		{"dump", "--json"},
		{"rewrite-snapshot", "--progress", "none"},
	} {
		t.Run(args[0], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			copyDir(t, makeEmptyDB(t), dir+".replaced.tmp")
			copyDir(t, src, dir+".import.tmp")
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if v, err := multitree.LatestVersion(dir); err != nil || v != 5 {
				t.Fatalf("LatestVersion = %d, %v; want 5", v, err)
			}
			code, out, errs := cli(t, append(args, dir)...)
			if code != 0 {
				t.Errorf("memiavl %v on a swap interrupted between its renames: exit %d\n%s%s", args, code, out, errs)
			}
			// a writable open finishes the swap: then every command works
			db, err := multitree.Open(dir, multitree.Options{})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			if v, h := dbState(t, dir); v != 5 || h != hash {
				t.Fatalf("after the writable open: version %d, hash %s, want 5 %s", v, h, hash)
			}
		})
	}
}
