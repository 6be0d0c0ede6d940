package multitree

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
)

// TestReaderRacesSwapFirstRename: a read-only Open (and Verify) that began
// while dir held the old database, and during which an import's swap made
// its first rename (dir -> dir.replaced.tmp; the importer then slow, or
// killed, before the second), tries again and reads the staged database,
// instead of reporting the database it was reading as corrupt.
func TestReaderRacesSwapFirstRename(t *testing.T) {
	for _, which := range []string{"Open", "Verify"} {
		t.Run(which, func(t *testing.T) {
			dir := osfile.RealDir(filepath.Join(t.TempDir(), "db"))
			swapMakeStores(t, dir, "old", []string{"s"}, 5)
			swapMakeStores(t, besidePath(dir, stagingSuffix), "new", []string{"s"}, 5)
			moved := false
			afterReadCurrent = func(d string, _ int64) {
				if d == dir && !moved {
					moved = true
					// the import's first rename (renameSwap)
					if err := os.Rename(dir, besidePath(dir, replacedSuffix)); err != nil {
						t.Error(err)
					}
				}
			}
			defer func() { afterReadCurrent = nil }()
			var err error
			if which == "Open" {
				var db *DB
				db, err = Open(dir, Options{ReadOnly: true})
				if err == nil {
					v, _ := db.Get("s", []byte("k"))
					t.Logf("read %q from %s", v, db.Dir())
					db.Close()
				}
			} else {
				_, err = Verify(dir)
			}
			if !moved {
				t.Fatal("hook not reached")
			}
			if err != nil {
				t.Errorf("read-only %s across the swap's first rename (reported as ErrCorrupt: %v): %v", which, errors.Is(err, ErrCorrupt), err)
			}
			// what a fresh reader does right after: fine
			db, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("fresh read-only Open mid-swap: %v", err)
			}
			db.Close()
		})
	}
}

// TestReaderOutlivesSwap: a read-only DB opened mid-swap reads the staged
// database. Once the next writable open has moved that database to dir,
// the reader still serves what it holds (its latest version), and a
// rebuild of an older version from files (ViewAt) either gives that
// version or fails (Options.ReadOnly: reopen), never other data; a reader
// opened on dir then serves it.
func TestReaderOutlivesSwap(t *testing.T) {
	dir := osfile.RealDir(filepath.Join(t.TempDir(), "db"))
	swapMakeStores(t, besidePath(dir, replacedSuffix), "old", []string{"s"}, 5)
	swapMakeStores(t, besidePath(dir, stagingSuffix), "new", []string{"s"}, 5)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	t.Logf("read-only DB reads %s", ro.Dir())
	rw, err := Open(dir, Options{}) // finishes the swap
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	// control: a reader of dir serves it
	ctl, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ctl.ViewAt(3); err != nil {
		t.Fatalf("control ViewAt(3): %v", err)
	} else {
		v.Release()
	}
	ctl.Close()

	latest, err := ro.View()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := latest.Get("s", []byte("k")); string(got) != "new@5" {
		t.Errorf("latest view of the reader opened mid-swap: %q, want new@5", got)
	}
	latest.Release()
	if v, err := ro.ViewAt(3); err == nil {
		got, _ := v.Get("s", []byte("k"))
		v.Release()
		if string(got) != "new@3" {
			t.Errorf("ViewAt(3) = %q, want new@3", got)
		}
	}
}
