package multitree_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestEdgeImporterOutOfOrder: the importer's methods called out of order
// or twice fail cleanly, and a Close after a successful Commit keeps the
// database.
func TestEdgeImporterOutOfOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	im, err := multitree.NewImporter(dir, 3, multitree.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	si, err := im.AddStore("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.AddStore("a"); !errors.Is(err, multitree.ErrStoreExists) {
		t.Fatalf("second AddStore: %v", err)
	}
	if _, err := im.AddStore(""); err == nil {
		t.Fatal("empty store name accepted")
	}
	if err := si.Add(&memiavl.ExportNode{Key: []byte("k"), Value: []byte("v"), Version: 3}); err != nil {
		t.Fatal(err)
	}
	if err := si.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := si.Commit(); err == nil {
		t.Fatal("store importer committed twice")
	}
	if err := si.Add(&memiavl.ExportNode{Key: []byte("l"), Value: []byte("v"), Version: 3}); err == nil {
		t.Fatal("Add after the store's Commit")
	}
	info, err := im.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.Commit(); err == nil {
		t.Fatal("importer committed twice")
	}
	if _, err := im.AddStore("b"); err == nil {
		t.Fatal("AddStore after Commit")
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	_ = si.Close()
	db := impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) || db.Version() != 3 {
		t.Fatalf("database after Close following Commit: version %d", db.Version())
	}
	if v, _ := db.Get("a", []byte("k")); string(v) != "v" {
		t.Fatalf("value %q", v)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == "import" {
			t.Fatal("import marker left after a successful import")
		}
	}

	// a store added and never committed fails the Commit, which leaves nothing
	dir2 := filepath.Join(t.TempDir(), "db2")
	im2, err := multitree.NewImporter(dir2, 3, multitree.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im2.AddStore("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := im2.Commit(); err == nil {
		t.Fatal("Commit with an uncommitted store")
	}
	if _, err := os.Stat(dir2); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed Commit left %s: %v", dir2, err)
	}
	if _, err := im2.AddStore("b"); err == nil {
		t.Fatal("AddStore after a failed Commit")
	}
	_ = im2.Close()

	// Commit after Close
	dir3 := filepath.Join(t.TempDir(), "db3")
	im3, err := multitree.NewImporter(dir3, 3, multitree.ImportOptions{Stores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = im3.Close()
	if _, err := im3.Commit(); err == nil {
		t.Fatal("Commit after Close")
	}
	if _, err := os.Stat(dir3); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("closed import left %s: %v", dir3, err)
	}
}

// TestEdgeImportVersionBounds: version 0 with nodes, negative, and the
// last version a database can have.
func TestEdgeImportVersionBounds(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "zero")
	if _, err := multitree.Import(dir, 0, map[string]multitree.NodeSource{"a": leafSource("k", "v", 1)}, multitree.ImportOptions{}); err == nil {
		t.Fatal("nodes imported at version 0")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("left %v", err)
	}
	if _, err := multitree.Import(filepath.Join(base, "neg"), -1, nil, multitree.ImportOptions{Stores: []string{"a"}}); !errors.Is(err, multitree.ErrInvalidOptions) {
		t.Fatalf("negative version: %v", err)
	}
	for _, stores := range [][]string{nil, {"a"}} {
		// a database at the last version could commit nothing
		d := filepath.Join(base, fmt.Sprint("max", len(stores)))
		_, err := multitree.Import(d, math.MaxInt64, nil, multitree.ImportOptions{Stores: stores})
		if !errors.Is(err, multitree.ErrInvalidOptions) {
			t.Fatalf("import at MaxInt64 with stores %v: %v, want ErrInvalidOptions", stores, err)
		}
		if _, serr := os.Stat(d); !errors.Is(serr, fs.ErrNotExist) {
			t.Fatalf("failed import at MaxInt64 left %s", d)
		}
	}
}

// TestEdgeImportInitialVersionAboveVersion: an import at version 5 that
// records an initial version 10 opens and commits 6.
func TestEdgeImportInitialVersionAboveVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	info, err := multitree.Import(dir, 5, map[string]multitree.NodeSource{"a": leafSource("k", "v", 5)}, multitree.ImportOptions{InitialVersion: 10})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	db, err := multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatalf("imported database (hash %X) does not open: %v", info.Hash(), err)
	}
	defer db.Close()
	ci, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if ci.Version != 6 {
		t.Fatalf("commit after the import at 5: version %d", ci.Version)
	}
}

// TestEdgeExportOlderViewImports: the export of an older version through
// ViewAt imports to the same app hash and contents, and the imported
// database continues with the source's hashes.
func TestEdgeExportOlderViewImports(t *testing.T) {
	r := testutil.Rand(t)
	gen := testutil.NewKeyGen(r)
	stores := []string{"acc", "bank", "gov"}
	src := impOpen(t, filepath.Join(t.TempDir(), "src"), multitree.Options{
		CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 4, SnapshotKeepRecent: 10,
	})
	defer src.Close()
	keys := map[string][][]byte{}
	var blocks [][]wal.ChangeSet
	hashes := map[int64][]byte{}
	for i := 0; i < 25; i++ {
		css := impBlock(r, gen, stores, keys)
		blocks = append(blocks, css)
		hashes[int64(i+1)] = impCommit(t, src, css)
	}
	for _, h := range []int64{1, 6, 8, 13, 24} {
		view, err := src.ViewAt(h)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), fmt.Sprint("dst", h))
		info, err := multitree.Import(dir, h, impSources(view), multitree.ImportOptions{})
		if err != nil {
			view.Release()
			t.Fatal(err)
		}
		if !bytes.Equal(info.Hash(), hashes[h]) {
			t.Fatalf("import of %d: hash %X, want %X", h, info.Hash(), hashes[h])
		}
		dst := impOpen(t, dir, multitree.Options{})
		dv, err := dst.View()
		if err != nil {
			t.Fatal(err)
		}
		impSameData(t, view, dv)
		dv.Release()
		view.Release()
		for v := h + 1; v <= 25; v++ {
			if got := impCommit(t, dst, blocks[v-1]); !bytes.Equal(got, hashes[v]) {
				t.Fatalf("import of %d, block %d: hash %X, want %X", h, v, got, hashes[v])
			}
		}
		dst.Close()
	}
}

// TestEdgeRollbackToImportedVersion: an imported database at h that
// committed h+1..h+4 rolls back to h (whose log starts at h+1) and to
// h+2; the discarded versions are gone, the kept ones readable, and new
// versions commit and reopen.
func TestEdgeRollbackToImportedVersion(t *testing.T) {
	const h = 10
	for _, cut := range []int64{h, h + 2} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			if _, err := multitree.Import(dir, h, map[string]multitree.NodeSource{"s": leafSource("k", "v", h)}, multitree.ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			db := impOpen(t, dir, multitree.Options{SnapshotInterval: -1})
			hashes := map[int64][]byte{h: db.LastCommitInfo().Hash()}
			for v := int64(h + 1); v <= h+4; v++ {
				hashes[v] = impCommit(t, db, []wal.ChangeSet{{Name: "s", Pairs: []wal.KVPair{{Key: []byte(fmt.Sprint("k", v)), Value: []byte("old")}}}})
			}
			db.Close()
			db = impOpen(t, dir, multitree.Options{TargetVersion: cut, Rollback: true, SnapshotInterval: -1})
			if db.Version() != cut || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[cut]) {
				t.Fatalf("rolled back to %d", db.Version())
			}
			if _, err := db.ViewAt(cut + 1); !errors.Is(err, multitree.ErrVersion) {
				t.Fatalf("discarded version %d viewable: %v", cut+1, err)
			}
			if v, err := db.ViewAt(h); err != nil {
				t.Fatalf("kept version %d: %v", h, err)
			} else {
				v.Release()
			}
			newHash := impCommit(t, db, []wal.ChangeSet{{Name: "s", Pairs: []wal.KVPair{{Key: []byte("new"), Value: []byte("new")}}}})
			db.Close()
			if lv, err := multitree.LatestVersion(dir); err != nil || lv != cut+1 {
				t.Fatalf("LatestVersion %d %v", lv, err)
			}
			db = impOpen(t, dir, multitree.Options{})
			defer db.Close()
			if db.Version() != cut+1 || !bytes.Equal(db.LastCommitInfo().Hash(), newHash) {
				t.Fatalf("reopened at %d", db.Version())
			}
			if v, _ := db.Get("s", []byte(fmt.Sprint("k", cut+1))); v != nil {
				t.Fatalf("a discarded key is back: %q", v)
			}
			if _, err := db.ViewAt(h - 1); !errors.Is(err, multitree.ErrBeforeFirstVersion) {
				t.Fatalf("before the import: %v", err)
			}
			if _, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: h - 1}); !errors.Is(err, multitree.ErrVersion) {
				t.Fatalf("open before the import: %v", err)
			}
		})
	}
}

// TestEdgeRemoveDatabaseThenImport: RemoveDatabase leaves a directory
// that takes an import and a create, keeping user files.
func TestEdgeRemoveDatabaseThenImport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}})
	for i := 0; i < 5; i++ {
		impCommit(t, db, []wal.ChangeSet{{Name: "s", Pairs: []wal.KVPair{{Key: []byte{byte(i)}, Value: []byte("v")}}}})
	}
	if err := multitree.RemoveDatabase(dir); !errors.Is(err, multitree.ErrLocked) {
		t.Fatalf("RemoveDatabase of an open database: %v", err)
	}
	db.Close()
	if err := os.WriteFile(filepath.Join(dir, "user"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// with a rollback left unfinished
	if err := multitree.RemoveDatabase(dir); err != nil {
		t.Fatal(err)
	}
	if err := multitree.RemoveDatabase(dir); err != nil {
		t.Fatalf("RemoveDatabase twice: %v", err)
	}
	if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("open after RemoveDatabase: %v", err)
	}
	if lv, err := multitree.LatestVersion(dir); err != nil || lv != 0 {
		t.Fatalf("LatestVersion %d %v", lv, err)
	}
	if _, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"s": leafSource("k", "v", 3)}, multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "user")); err != nil {
		t.Fatal(err)
	}
	db = impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if db.Version() != 3 {
		t.Fatalf("version %d", db.Version())
	}
	if err := multitree.RemoveDatabase(filepath.Join(t.TempDir(), "missing")); err != nil {
		t.Logf("RemoveDatabase of a missing directory: %v", err)
	}
}

// TestEdgeRollbackModel: a database with background rewrites and kept
// snapshots rolls back to several versions; every version up to the cut
// reads its own hash or is refused, none after it is readable, and the
// versions committed after the rollback read their new hashes, also after
// a reopen and at a read-only open of them.
func TestEdgeRollbackModel(t *testing.T) {
	r := testutil.Rand(t)
	gen := testutil.NewKeyGen(r)
	stores := []string{"a", "b"}
	src := filepath.Join(t.TempDir(), "src")
	opts := multitree.Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 3, SnapshotKeepRecent: 4}
	db := impOpen(t, src, opts)
	keys := map[string][][]byte{}
	hashes := map[int64][]byte{}
	for i := 0; i < 30; i++ {
		info := impCommit(t, db, impBlock(r, gen, stores, keys))
		hashes[db.Version()] = info
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{29, 27, 24, 22, 19} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			testutil.CopyDir(t, src, dir)
			db, err := multitree.Open(dir, multitree.Options{TargetVersion: cut, Rollback: true, SnapshotInterval: 3, SnapshotKeepRecent: 4})
			if err != nil {
				t.Logf("rollback to %d: %v", cut, err)
				return
			}
			if db.Version() != cut || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[cut]) {
				t.Fatalf("rolled back to %d", db.Version())
			}
			for v := int64(1); v <= 30; v++ {
				view, err := db.ViewAt(v)
				if v > cut {
					if err == nil {
						view.Release()
						t.Fatalf("discarded version %d readable", v)
					}
					continue
				}
				if err != nil {
					continue
				}
				if !bytes.Equal(view.CommitInfo().Hash(), hashes[v]) {
					t.Fatalf("version %d after the rollback has another hash", v)
				}
				view.Release()
			}
			newHashes := map[int64][]byte{}
			for i := 0; i < 5; i++ {
				newHashes[db.Version()+1] = impCommit(t, db, []wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: []byte(fmt.Sprint("new", i)), Value: []byte("n")}}}})
			}
			check := func(db *multitree.DB, stage string) {
				for v, h := range newHashes {
					view, err := db.ViewAt(v)
					if err != nil {
						t.Fatalf("%s: new version %d: %v", stage, v, err)
					}
					if !bytes.Equal(view.CommitInfo().Hash(), h) {
						t.Fatalf("%s: version %d reads the discarded state", stage, v)
					}
					view.Release()
				}
				for v := int64(1); v <= cut; v++ {
					view, err := db.ViewAt(v)
					if err != nil {
						continue
					}
					if !bytes.Equal(view.CommitInfo().Hash(), hashes[v]) {
						t.Fatalf("%s: kept version %d has another hash", stage, v)
					}
					view.Release()
				}
			}
			check(db, "after commits")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = impOpen(t, dir, multitree.Options{SnapshotInterval: 3, SnapshotKeepRecent: 4})
			check(db, "reopened")
			db.Close()
			for v, h := range newHashes {
				ro, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v})
				if err != nil {
					t.Fatalf("read-only open at %d: %v", v, err)
				}
				if !bytes.Equal(ro.LastCommitInfo().Hash(), h) {
					t.Fatalf("read-only open at %d: discarded state", v)
				}
				ro.Close()
			}
			if rep, err := multitree.Verify(dir); err != nil {
				t.Fatalf("verify: %v (%+v)", err, rep)
			}
		})
	}
}
