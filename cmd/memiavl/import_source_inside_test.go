package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestCLIImportSourceInsideReplacedDatabase: the imports only read their
// source ("is only read", import-iavl and import-memiavl --help). An
// import over a database that has committed nothing replaces <dir> as a
// whole, so a source inside such a <dir> would go with it: the command
// refuses it (a usage error, exit 2) and changes nothing. Into a <dir>
// without a database the import writes beside the source, which stays.
func TestCLIImportSourceInsideReplacedDatabase(t *testing.T) {
	for _, c := range []struct {
		name    string
		prepare func(dst string) string // puts the source inside dst, returns it
		args    func(src, dst string) []string
	}{
		{"import-iavl", func(dst string) string {
			makeIAVLApp(t, dst, 5)
			return filepath.Join(dst, "application.db")
		}, func(src, dst string) []string { return []string{"import-iavl", src, dst} }},
		{"import-memiavl", func(dst string) string {
			src := filepath.Join(dst, "ref")
			copyDir(t, refFixture, src)
			return src
		}, func(src, dst string) []string { return []string{"import-memiavl", src, dst} }},
		{"import", func(dst string) string {
			db := t.TempDir()
			makeDB(t, db, 0.01, 5)
			exported := filepath.Join(t.TempDir(), "state.bin")
			mustCLI(t, "export", db, exported)
			data, err := os.ReadFile(exported)
			if err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dst, "state.bin")
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return src
		}, func(src, dst string) []string { return []string{"import", "--height", "5", src, dst} }},
	} {
		t.Run(c.name+"/database", func(t *testing.T) {
			dst := makeEmptyDB(t) // version 0: an import replaces it
			src := c.prepare(dst)
			sum := testutil.DirDigest(t, dst)
			code, out, errs := cli(t, c.args(src, dst)...)
			if code != 2 || !strings.Contains(errs, "move the source outside") {
				t.Fatalf("memiavl %s %s %s: exit %d, want 2 (usage)\nstdout %q\nstderr %q", c.name, src, dst, code, out, errs)
			}
			if testutil.DirDigest(t, dst) != sum {
				t.Errorf("memiavl %s changed %s though refused", c.name, dst)
			}
		})
		t.Run(c.name+"/plain-directory", func(t *testing.T) {
			dst := t.TempDir() // no database: the import writes beside the source
			src := c.prepare(dst)
			sum := testutil.DirDigest(t, src)
			mustCLI(t, c.args(src, dst)...)
			if testutil.DirDigest(t, src) != sum {
				t.Errorf("memiavl %s changed its source", c.name)
			}
			mustCLI(t, "verify", dst)
		})
	}
}
