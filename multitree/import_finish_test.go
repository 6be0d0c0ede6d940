package multitree_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// finishCommits returns a Finish step that commits n versions, each
// setting key "k<version>" of store s, and calls during(db, i) before the
// i-th (from 0).
func finishCommits(t *testing.T, n int, during func(db *multitree.DB, i int)) func(db *multitree.DB) error {
	return func(db *multitree.DB) error {
		for i := 0; i < n; i++ {
			if during != nil {
				during(db, i)
			}
			v := db.WorkingVersion()
			k := []byte(fmt.Sprintf("k%d", v))
			if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "s", Pairs: []wal.KVPair{{Key: k, Value: k}}}}); err != nil {
				return err
			}
			if _, err := db.Commit(); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestImportFinish: an import's Finish step commits versions on the
// imported database before it is in place; while it runs, and in a copy
// of the directory taken then (what a process killed during it leaves),
// the database is refused (ErrUnfinishedImport: by Open, read-only or not,
// also with CreateIfMissing, and by LatestVersion) until an import into
// the directory, or RemoveDatabase, removes it.
func TestImportFinish(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	crashed := filepath.Join(t.TempDir(), "crashed")
	during := func(db *multitree.DB, i int) {
		if i != 2 {
			return
		}
		if db.Version() != 9 || db.Dir() != dir {
			t.Errorf("Finish's database: version %d in %s", db.Version(), db.Dir())
		}
		for _, opts := range []multitree.Options{{ReadOnly: true}, {}, {CreateIfMissing: true}} {
			if _, err := multitree.Open(dir, opts); !errors.Is(err, multitree.ErrUnfinishedImport) {
				t.Errorf("Open %+v during Finish: %v, want ErrUnfinishedImport", opts, err)
			}
		}
		if _, err := multitree.LatestVersion(dir); !errors.Is(err, multitree.ErrUnfinishedImport) {
			t.Errorf("LatestVersion during Finish: %v", err)
		}
		testutil.CopyDir(t, dir, crashed)
	}
	info, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "v", 7)},
		multitree.ImportOptions{Finish: finishCommits(t, 5, during), FinishOptions: multitree.Options{Sync: wal.SyncNone}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 7 {
		t.Fatalf("Import returned the commit info of version %d, want the imported 7", info.Version)
	}
	db := impOpen(t, dir, multitree.Options{})
	if db.Version() != 12 {
		t.Fatalf("after the import: version %d, want 12", db.Version())
	}
	for _, k := range []string{"k", "k8", "k12"} {
		if v, err := db.Get("s", []byte(k)); err != nil || v == nil {
			t.Fatalf("key %s after the import: %q %v", k, v, err)
		}
	}
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "import")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the import marker stayed: %v", err)
	}
	// a second import is refused: the database stands
	if _, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "v", 7)}, multitree.ImportOptions{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("import over the finished import: %v", err)
	}

	// the copy taken during Finish: refused, then removed by an import
	removed := filepath.Join(t.TempDir(), "removed")
	testutil.CopyDir(t, crashed, removed)
	for _, opts := range []multitree.Options{{ReadOnly: true}, {CreateIfMissing: true}} {
		_, err := multitree.Open(crashed, opts)
		if !errors.Is(err, multitree.ErrUnfinishedImport) {
			t.Fatalf("Open %+v of the unfinished import: %v", opts, err)
		}
		t.Log(err)
	}
	if _, err := multitree.LatestVersion(crashed); !errors.Is(err, multitree.ErrUnfinishedImport) {
		t.Fatalf("LatestVersion of the unfinished import: %v", err)
	}
	if _, err := multitree.Import(crashed, 7, map[string]multitree.NodeSource{"s": leafSource("k", "v", 7)},
		multitree.ImportOptions{Finish: finishCommits(t, 5, nil)}); err != nil {
		t.Fatalf("import into the unfinished import: %v", err)
	}
	db = impOpen(t, crashed, multitree.Options{ReadOnly: true})
	if db.Version() != 12 || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("the import over the unfinished one: version %d", db.Version())
	}
	db.Close()

	// or by RemoveDatabase
	if err := multitree.RemoveDatabase(removed); err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Open(removed, multitree.Options{ReadOnly: true}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("Open after RemoveDatabase of the unfinished import: %v", err)
	}
}

// TestImportFinishFails: a failing Finish step fails the import, which
// leaves no database (and not the directories it created), or the
// database it was to replace as it was; invalid FinishOptions are refused
// before anything is written.
func TestImportFinishFails(t *testing.T) {
	broke := errors.New("finish broke")
	failing := func(db *multitree.DB) error {
		if err := finishCommits(t, 2, nil)(db); err != nil {
			return err
		}
		return broke
	}
	src := func() map[string]multitree.NodeSource {
		return map[string]multitree.NodeSource{"s": leafSource("k", "v", 7)}
	}
	top := t.TempDir()
	dir := filepath.Join(top, "new", "db")
	if _, err := multitree.Import(dir, 7, src(), multitree.ImportOptions{Finish: failing}); !errors.Is(err, broke) {
		t.Fatalf("failing Finish: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(top, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed Finish left the directories the import made: %v", err)
	}

	// replacing a database at version 0
	for _, exchange := range []bool{true, false} {
		t.Run(fmt.Sprintf("replace exchange=%v", exchange), func(t *testing.T) {
			if !exchange {
				multitree.RefuseExchange(t)
			}
			dir := filepath.Join(t.TempDir(), "db")
			db := impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"old"}})
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := multitree.Import(dir, 7, src(), multitree.ImportOptions{Replace: true, Finish: failing}); !errors.Is(err, broke) {
				t.Fatalf("failing Finish: %v", err)
			}
			db = impOpen(t, dir, multitree.Options{})
			if db.Version() != 0 || fmt.Sprint(db.StoreNames()) != "[old]" {
				t.Fatalf("the database a failed import was to replace: version %d stores %v", db.Version(), db.StoreNames())
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := multitree.Import(dir, 7, src(), multitree.ImportOptions{Replace: true, Finish: finishCommits(t, 3, nil)}); err != nil {
				t.Fatal(err)
			}
			db = impOpen(t, dir, multitree.Options{ReadOnly: true})
			defer db.Close()
			if db.Version() != 10 || fmt.Sprint(db.StoreNames()) != "[s]" {
				t.Fatalf("after the replacing import: version %d stores %v", db.Version(), db.StoreNames())
			}
		})
	}

	// invalid FinishOptions
	dir = filepath.Join(t.TempDir(), "db")
	_, err := multitree.Import(dir, 7, src(), multitree.ImportOptions{
		Finish: finishCommits(t, 1, nil), FinishOptions: multitree.Options{SnapshotKeepRecent: -1},
	})
	if !errors.Is(err, multitree.ErrInvalidOptions) {
		t.Fatalf("invalid FinishOptions: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an import with invalid FinishOptions made %s: %v", dir, err)
	}
}
