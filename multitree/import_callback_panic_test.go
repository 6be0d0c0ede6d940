package multitree_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestImporterCallbackPanic: a Check or Finish that panics inside
// Importer.Commit gives the import up as a failure does, and the panic goes
// on: the importer is finished (a second Commit is refused; it ran the
// commit again, with the staged snapshot's path already cleared, and wrote
// a metadata file into the working directory, replacing one there), what
// the import wrote is gone, a database it was to replace is left as it was,
// and the directory is free for a rerun.
func TestImporterCallbackPanic(t *testing.T) {
	for _, replace := range []bool{false, true} {
		for _, step := range []string{"check", "finish"} {
			t.Run(fmt.Sprintf("replace=%v/%s", replace, step), func(t *testing.T) {
				cwd := t.TempDir()
				wd, err := os.Getwd()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Chdir(cwd); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.Chdir(wd) })
				precious := filepath.Join(cwd, "metadata")
				if err := os.WriteFile(precious, []byte("user data"), 0o644); err != nil {
					t.Fatal(err)
				}
				dir := filepath.Join(t.TempDir(), "db")
				if replace {
					db := impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"old"}})
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
				}
				opts := multitree.ImportOptions{Replace: replace}
				if step == "check" {
					opts.Check = func(*storetypes.CommitInfo) error { panic("check broke") }
				} else {
					opts.Finish = func(*multitree.DB) error { panic("finish broke") }
				}
				im, err := multitree.NewImporter(dir, 7, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer im.Close()
				si, err := im.AddStore("s")
				if err != nil {
					t.Fatal(err)
				}
				if err := si.Add(&memiavl.ExportNode{Key: []byte("k"), Value: []byte("v"), Version: 7}); err != nil {
					t.Fatal(err)
				}
				if err := si.Commit(); err != nil {
					t.Fatal(err)
				}
				if p := catchPanic(func() { _, _ = im.Commit() }); p == nil {
					t.Fatalf("the %s's panic did not go on", step)
				}
				var err2 error
				if p := catchPanic(func() { _, err2 = im.Commit() }); p != nil || err2 == nil {
					t.Errorf("a second Commit after the panic: panic %v, error %v; want it refused", p, err2)
				}
				if got, _ := os.ReadFile(precious); string(got) != "user data" {
					t.Errorf("the working directory's metadata file was overwritten: %q", got)
				}
				if replace {
					db := impOpen(t, dir, multitree.Options{ReadOnly: true})
					if v, names := db.Version(), db.StoreNames(); v != 0 || len(names) != 1 || names[0] != "old" {
						t.Errorf("the database the import was to replace is at version %d with stores %v", v, names)
					}
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
				} else if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the given-up import left %s: %v", dir, err)
				}
				// the lock is free: the import runs again
				im2, err := multitree.NewImporter(dir, 7, multitree.ImportOptions{Replace: replace})
				if err != nil {
					t.Fatalf("rerun: %v", err)
				}
				defer im2.Close()
				if _, err := im2.Commit(); err != nil {
					t.Fatalf("rerun: %v", err)
				}
			})
		}
	}
}

func catchPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
