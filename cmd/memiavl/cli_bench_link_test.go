package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIBenchDirDanglingLink: bench --dir given a symbolic link to a
// missing directory ("With --dir the directory must be empty or absent")
// creates the database at the link's target, as import does through such a
// link, and the database verifies there.
func TestCLIBenchDirDanglingLink(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "target")
	link := filepath.Join(parent, "bench-db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	// an import through the same kind of link creates its target
	src := t.TempDir()
	makeDB(t, src, 0.01, 3)
	stream := filepath.Join(t.TempDir(), "s")
	mustCLI(t, "export", src, stream)
	ilink := filepath.Join(parent, "import-db")
	if err := os.Symlink(filepath.Join(parent, "import-target"), ilink); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "import", "--height", "3", stream, ilink)

	code, out, errs := cli(t, "bench", "--scale", "0.01", "--blocks", "2", "--dir", link)
	if code != 0 {
		if strings.Contains(errs, "file exists") {
			t.Errorf("bench --dir <dangling link>: exit %d with a system call's error on a path the checks took for absent: %s", code, strings.TrimSpace(errs))
		} else {
			t.Errorf("bench --dir <dangling link>: exit %d\nstdout %q\nstderr %q", code, out, errs)
		}
		return
	}
	mustCLI(t, "verify", target)
}
