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

// TestCLIDanglingLinkIntoDatabase: bench --dir and import refuse a
// destination inside a database directory, also when the destination is a
// symbolic link to a missing directory there (the commands create the
// database at the link's target): nothing is written inside the other
// database.
func TestCLIDanglingLinkIntoDatabase(t *testing.T) {
	outer := filepath.Join(t.TempDir(), "outer")
	makeDB(t, outer, 0.01, 2)

	// the same destination without the link is refused
	if code, _, _ := cli(t, "bench", "--scale", "0.01", "--blocks", "1", "--dir", filepath.Join(outer, "direct")); code == 0 {
		t.Fatalf("bench --dir inside a database accepted")
	}

	links := t.TempDir()
	link := filepath.Join(links, "bench-db")
	if err := os.Symlink(filepath.Join(outer, "inner"), link); err != nil {
		t.Fatal(err)
	}
	code, _, errs := cli(t, "bench", "--scale", "0.01", "--blocks", "1", "--dir", link)
	if _, err := os.Stat(filepath.Join(outer, "inner", currentName)); err == nil {
		t.Errorf("bench --dir <link to %s/inner> wrote a database inside the database %s (exit %d)", outer, outer, code)
	} else if code == 0 {
		t.Errorf("bench --dir <link into a database>: exit 0, stderr %q", errs)
	}

	src := t.TempDir()
	makeDB(t, src, 0.01, 3)
	stream := filepath.Join(t.TempDir(), "s")
	mustCLI(t, "export", src, stream)
	ilink := filepath.Join(links, "import-db")
	if err := os.Symlink(filepath.Join(outer, "imported"), ilink); err != nil {
		t.Fatal(err)
	}
	code, _, _ = cli(t, "import", "--height", "3", stream, ilink)
	if _, err := os.Stat(filepath.Join(outer, "imported", currentName)); err == nil {
		t.Errorf("import into <link to %s/imported> wrote a database inside the database %s (exit %d)", outer, outer, code)
	}
}
