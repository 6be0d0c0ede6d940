package multitree

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// foreignDirWithImportEntry makes a directory that holds no database: a
// "wal" directory of other files and a directory named "import" (neither
// written by the database).
func foreignDirWithImportEntry(t *testing.T) (dir, notes string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, walDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	notes = filepath.Join(dir, walDirName, "notes.txt")
	if err := os.WriteFile(notes, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, importFileName), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, importFileName, "data.csv"), []byte("1,2"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, notes
}

// TestCreateKeepsForeignLogBesideImportDirectory: a create in a directory
// whose wal directory holds other files is refused and removes nothing,
// also when an entry named "import" that is not an import marker (a
// directory) is there.
func TestCreateKeepsForeignLogBesideImportDirectory(t *testing.T) {
	dir, notes := foreignDirWithImportEntry(t)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err == nil {
		db.Close()
	}
	if _, serr := os.Stat(notes); serr != nil {
		t.Fatalf("create (err %v) removed a file of the foreign log directory: %v", err, serr)
	}
}

// TestImportKeepsForeignLogBesideImportDirectory: the same for an import.
func TestImportKeepsForeignLogBesideImportDirectory(t *testing.T) {
	dir, notes := foreignDirWithImportEntry(t)
	im, err := NewImporter(dir, 7, ImportOptions{Stores: []string{"b"}})
	if err == nil {
		im.Close()
	}
	if _, serr := os.Stat(notes); serr != nil {
		t.Fatalf("import (err %v) removed a file of the foreign log directory: %v", err, serr)
	}
}

// TestLostCurrentBesideImportDirectory: a database that lost its current
// file is refused by a create (ErrCorrupt) and keeps its snapshots and log
// also when an entry named "import" that is not an import marker (a
// directory) is beside them: only the marker says an interrupted import
// wrote the files.
func TestLostCurrentBesideImportDirectory(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		edgeCommit(t, db, "a", "k", "v")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, importFileName), 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err == nil {
		db.Close()
		t.Fatal("a create over a database that lost its current file succeeded")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("create over a database that lost its current file: %v, want ErrCorrupt", err)
	}
	if after, _ := listSnapshots(dir); len(after) != len(before) {
		t.Fatalf("snapshots %v before the refused create, %v after", before, after)
	}
}
