package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func histSmallChain(t *testing.T) (*histChain, *histScript) {
	s := &histScript{seed: 3}
	s.steps = make([]histStep, 8)
	s.steps[0] = histStep{reload: true, mount: []string{"acc", "bank", "gov", "never"}}
	for i := range s.steps {
		s.steps[i].quiet = []string{"never"}
	}
	return histBuild(t, dbm.NewMemDB(), s), s
}

func histList(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestMigrateDirStates: dir a file, an existing directory of other files
// (kept), a database with commits (refused, unchanged).
func TestMigrateDirStates(t *testing.T) {
	c, s := histSmallChain(t)
	latest := histHeight(s, len(s.steps)-1)

	// a file
	file := filepath.Join(t.TempDir(), "memiavl.db")
	if err := os.WriteFile(file, []byte("not a db"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compat.ImportIAVL(c.db, latest, nil, file, multitree.Options{}); !histIsMigrate(err) {
		t.Fatalf("import onto a file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "not a db" {
		t.Fatalf("the file changed: %q", b)
	}

	// an existing directory of other files: kept by the import
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compat.ImportIAVL(c.db, latest, nil, dir, multitree.Options{}); err != nil {
		t.Fatalf("import into a directory of other files: %v", err)
	}
	histVerify(t, c, latest, dir)
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "x" {
		t.Fatalf("the import removed or changed a file of the directory: %q %v", b, err)
	}

	// a database with commits, at another height and at the same height
	for _, h := range []int64{latest - 2, latest} {
		err := compat.ImportIAVL(c.db, h, nil, dir, multitree.Options{})
		if !histIsMigrate(err) || !errors.Is(err, multitree.ErrExists) {
			t.Fatalf("import at %d over a database at %d: %v", h, latest, err)
		}
		histVerify(t, c, latest, dir)
	}
}

// TestMigrateStoresSelection: the stores argument (a subset, unknown,
// transient and memory store names, duplicates, empty names) and heights
// that were never committed.
func TestMigrateStoresSelection(t *testing.T) {
	c, s := histSmallChain(t)
	latest := histHeight(s, len(s.steps)-1)
	for name, tc := range map[string]struct {
		h      int64
		stores []string
	}{
		"zero":          {0, nil},
		"negative":      {-1, nil},
		"latest+1":      {latest + 1, nil},
		"far future":    {1 << 40, nil},
		"unknown":       {latest, []string{"acc", "nope"}},
		"transient":     {latest, []string{"tstore"}},
		"memory":        {latest, []string{"mstore"}},
		"empty name":    {latest, []string{""}},
		"empty and acc": {latest, []string{"acc", ""}},
		"twice":         {latest, []string{"bank", "acc", "bank"}},
	} {
		dir := filepath.Join(t.TempDir(), "db")
		err := compat.ImportIAVL(c.db, tc.h, tc.stores, dir, multitree.Options{})
		if !histIsMigrate(err) {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused import left %s", name, dir)
		}
	}
	// a subset, the empty store included, and the whole list given
	for _, stores := range [][]string{{"never", "bank"}, {"gov", "bank", "acc", "never"}} {
		dir := filepath.Join(t.TempDir(), "db")
		if err := compat.ImportIAVL(c.db, latest-1, stores, dir, multitree.Options{}); err != nil {
			t.Fatalf("stores %v: %v", stores, err)
		}
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(stores)
		sort.Strings(want)
		if !slices.Equal(db.StoreNames(), want) || db.Version() != latest-1 {
			t.Fatalf("stores %v: imported %v at %d", stores, db.StoreNames(), db.Version())
		}
		for _, si := range db.LastCommitInfo().StoreInfos {
			for _, rsi := range c.infos[latest-1].StoreInfos {
				if rsi.Name == si.Name && !bytes.Equal(rsi.CommitId.Hash, si.CommitId.Hash) {
					t.Fatalf("store %s: hash %X, rootmulti %X", si.Name, si.CommitId.Hash, rsi.CommitId.Hash)
				}
			}
		}
		if len(stores) == 4 && !bytes.Equal(db.LastCommitInfo().Hash(), c.infos[latest-1].Hash()) {
			t.Fatal("every store listed: app hash differs")
		}
		db.Close()
	}
}

// histBigChain is a history whose trees are large enough that an
// import is stopped while it writes them.
func histBigChain(t *testing.T) (*histChain, int64) {
	s := &histScript{seed: 5}
	s.steps = make([]histStep, 3)
	s.steps[0] = histStep{reload: true, mount: []string{"acc", "bank"}}
	for i := range s.steps {
		for _, name := range []string{"acc", "bank"} {
			cs := wal.ChangeSet{Name: name}
			for k := 0; k < 3000; k++ {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte(fmt.Sprintf("key-%d-%05d", i, k)), Value: []byte("value")})
			}
			s.steps[i].css = append(s.steps[i].css, cs)
		}
	}
	return histBuild(t, dbm.NewMemDB(), s), histHeight(s, len(s.steps)-1)
}

// TestMigrateFailedImportKeepsExistingDir: an import into an existing
// directory (empty, or holding other files) that fails after it started
// writing (stopped by its context mid-import, or a root hash that does not
// match the commit info) must leave the directory as it was: "otherwise
// nothing is left in dir" (ImportIAVL), "leaves dir as a failed ImportIAVL
// does" (ImportIAVLContext).
func TestMigrateFailedImportKeepsExistingDir(t *testing.T) {
	c, latest := histBigChain(t)
	bad := dbm.NewMemDB()
	it, err := c.db.Iterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ; it.Valid(); it.Next() {
		if err := bad.Set(it.Key(), it.Value()); err != nil {
			t.Fatal(err)
		}
	}
	it.Close()
	info := *c.infos[latest]
	info.StoreInfos = slices.Clone(info.StoreInfos)
	info.StoreInfos[0].CommitId.Hash = bytes.Repeat([]byte{1}, 32)
	bz, err := info.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Set([]byte(fmt.Sprintf("s/%d", latest)), bz); err != nil {
		t.Fatal(err)
	}
	for _, withFiles := range []bool{false, true} {
		for _, how := range []string{"stopped", "hash mismatch"} {
			dir := filepath.Join(t.TempDir(), "memiavl.db")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if withFiles {
				if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := histList(t, dir)
			var err error
			if how == "stopped" {
				ctx, cancel := context.WithCancel(context.Background())
				src := &cancelingDB{DB: c.db, after: 4000, cancel: cancel}
				err = compat.ImportIAVLContext(ctx, src, latest, nil, dir, multitree.Options{RewriteConcurrency: 1})
				cancel()
				if !errors.Is(err, context.Canceled) || !histIsMigrate(err) {
					t.Fatalf("stopped import: %v", err)
				}
			} else {
				err = compat.ImportIAVL(bad, latest, nil, dir, multitree.Options{})
				if !histIsMigrate(err) {
					t.Fatalf("import with a mismatching commit info: %v", err)
				}
			}
			if after := histList(t, dir); !slices.Equal(after, before) {
				t.Errorf("%s import into an existing directory (other files: %v) left %v in it, it had %v", how, withFiles, after, before)
			}
			// the retry succeeds
			if err := compat.ImportIAVL(c.db, latest, nil, dir, multitree.Options{RewriteConcurrency: 1}); err != nil {
				t.Fatalf("retry after a %s import: %v", how, err)
			}
			histVerify(t, c, latest, dir)
		}
	}
}
