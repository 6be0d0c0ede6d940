package multitree

import (
	"os"
	"path/filepath"
	"testing"
)

// removalInterruptedWithStrayLogFile leaves dir as a RemoveDatabase stopped
// after it removed current (giveUp: marker, current, then the log) leaves a
// database whose log directory also held a file that is not a segment (the
// database opens and commits beside such a file, and a whole RemoveDatabase
// removes it with the log).
func removalInterruptedWithStrayLogFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, walDirName, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		edgeCommit(t, db, "a", "k", "v")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// the first two steps of giveUp, as an interruption leaves them
	if err := writeImportMarker(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRemoveDatabaseFinishesInterruptedRemoval: RemoveDatabase run again
// over an interrupted removal finishes it, whatever the removed database's
// log directory held.
func TestRemoveDatabaseFinishesInterruptedRemoval(t *testing.T) {
	dir := removalInterruptedWithStrayLogFile(t)
	if err := RemoveDatabase(dir); err != nil {
		t.Fatalf("RemoveDatabase over an interrupted removal: %v", err)
	}
	if vs, _ := listSnapshots(dir); len(vs) != 0 {
		t.Fatalf("snapshots %v left", vs)
	}
}

// TestCreateClearsInterruptedRemoval: Open with CreateIfMissing clears what
// an interrupted removal left, as RemoveDatabase's doc says.
func TestCreateClearsInterruptedRemoval(t *testing.T) {
	dir := removalInterruptedWithStrayLogFile(t)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatalf("create over an interrupted removal: %v", err)
	}
	defer db.Close()
	if db.Version() != 0 {
		t.Fatalf("created at version %d", db.Version())
	}
}

// TestImportClearsInterruptedRemoval: an import into a directory that an
// interrupted removal left clears it, as RemoveDatabase's doc says.
func TestImportClearsInterruptedRemoval(t *testing.T) {
	dir := removalInterruptedWithStrayLogFile(t)
	im, err := NewImporter(dir, 7, ImportOptions{Stores: []string{"b"}})
	if err != nil {
		t.Fatalf("import over an interrupted removal: %v", err)
	}
	defer im.Close()
	if _, err := im.Commit(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 7 {
		t.Fatalf("imported database at version %d", db.Version())
	}
}
