package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCLIExportThroughLinkDotDot: export refuses a <file> inside a
// database directory also when the path enters the database through a
// symbolic link and leaves the link with ".." (link/../name): the system
// resolves the link first, so the file is inside the database. A check
// on the path cleaned as text (which drops the link with the "..") let
// it through, and --force replaced the database's own current file.
func TestCLIExportThroughLinkDotDot(t *testing.T) {
	db, link := dbWithLogLink(t)
	current, err := os.ReadFile(filepath.Join(db, currentName))
	if err != nil {
		t.Fatal(err)
	}

	// link/../state.bin is <db>/state.bin for the system
	code, out, errs := cli(t, "export", db, link+"/../state.bin")
	if _, err := os.Stat(filepath.Join(db, "state.bin")); err == nil || code != exitFailure {
		t.Errorf("export to %s: exit %d (want %d, refused), %s inside the database: %v\nstdout: %s\nstderr: %s",
			link+"/../state.bin", code, exitFailure, filepath.Join(db, "state.bin"), err == nil, out, errs)
	}

	// link/../current is the database's current file
	code, out, errs = cli(t, "export", "--force", db, link+"/../current")
	after, _ := os.ReadFile(filepath.Join(db, currentName))
	if code != exitFailure || !bytes.Equal(after, current) {
		t.Errorf("export --force to %s: exit %d (want %d, refused); database's current file changed: %v (%d bytes, was %d)\nstdout: %s\nstderr: %s",
			link+"/../current", code, exitFailure, !bytes.Equal(after, current), len(after), len(current), out, errs)
	}
	if code, _, errs := cli(t, "verify", db); code != exitOK {
		t.Errorf("verify after the export: exit %d: %s", code, errs)
	}
}

// TestCLIImportSourceThroughLinkDotDot: import refuses a stream file
// inside a <dir> holding a database it replaces as a whole (the file would
// go with it), also as link/../file with the link inside <dir>; a check
// on the path cleaned as text let it through, and the import removed the
// stream file with the database it replaced.
func TestCLIImportSourceThroughLinkDotDot(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src.db")
	makeDB(t, src, 0.01, 5, 3)
	stream := filepath.Join(root, "state.bin")
	mustCLI(t, "export", src, stream)
	db := filepath.Join(root, "memiavl.db")
	mustCLI(t, "import", "--height", "5", stream, db)
	inside := filepath.Join(db, "state.bin")
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inside, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// the direct path is refused
	if code, _, _ := cli(t, "import", "--height", "5", inside, db); code == exitOK {
		t.Fatalf("import of %s into %s: exit 0, want a refusal", inside, db)
	}
	link := filepath.Join(root, "wal-link")
	if err := os.Symlink(filepath.Join(db, walDirName), link); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "import", "--height", "5", link+"/../state.bin", db)
	_, serr := os.Stat(inside)
	if code == exitOK || serr != nil {
		t.Errorf("import of %s (= %s) into %s: exit %d (want a refusal); the stream file is still there: %v\nstdout: %s\nstderr: %s",
			link+"/../state.bin", inside, db, code, serr == nil, out, errs)
	}
}

// TestCLIDotDotAfterLinkNamesTheTarget: a database directory given as
// link/.. is the parent of the link's target for every command, as for
// the system: verify and dump read the database there (a path cleaned as
// text named the directory holding the link, which holds no database).
func TestCLIDotDotAfterLinkNamesTheTarget(t *testing.T) {
	_, link := dbWithLogLink(t)
	for _, args := range [][]string{{"verify", link + "/.."}, {"dump", link + "/.."}, {"wal", "dump", link + "/../wal"}} {
		if code, out, errs := cli(t, args...); code != exitOK {
			t.Errorf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, exitOK, out, errs)
		}
	}
}

// dbWithLogLink makes a database in a temporary directory and a link
// beside it to its log directory (the help of import-iavl and
// enclosingDatabase mention a log directory linked to another disk); it
// returns the database's path and the link's.
func dbWithLogLink(t *testing.T) (db, link string) {
	t.Helper()
	root := t.TempDir()
	db = filepath.Join(root, "memiavl.db")
	makeDB(t, db, 0.01, 5, 3)
	link = filepath.Join(root, "wal-link")
	if err := os.Symlink(filepath.Join(db, walDirName), link); err != nil {
		t.Fatal(err)
	}
	return db, link
}
