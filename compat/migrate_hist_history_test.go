package compat_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"
	"cosmossdk.io/store/wrapper"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/iavl"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// histUpgradeScript: stores added at later heights (their trees start
// there), a rename and a delete (the old prefix's data stays in the
// database), a store never written, a store emptied at a height and written
// again later, an added store that stays empty for a while.
//
// With leveldb, no store is empty at a reload: rootmulti over goleveldb
// cannot load a store whose version is empty (cosmos/iavl#939), so "never"
// is written and "clr" is empty at 11..12 only.
func histUpgradeScript(initial int64, leveldb bool) *histScript {
	base := []string{"acc", "bank", "oldmod", "legacy", "never", "clr"}
	afterUp := []string{"acc", "bank", "newmod", "never", "clr", "late"}
	afterUp2 := append(append([]string(nil), afterUp...), "late2")
	s := &histScript{seed: 7, initial: initial}
	s.steps = make([]histStep, 16)
	s.steps[0] = histStep{reload: true, mount: base}
	s.steps[4] = histStep{reload: true, mount: afterUp, up: &storetypes.StoreUpgrades{
		Added:   []string{"late"},
		Renamed: []storetypes.StoreRename{{OldKey: "oldmod", NewKey: "newmod"}},
		Deleted: []string{"legacy"},
	}}
	s.steps[9] = histStep{reload: true, mount: afterUp2, up: &storetypes.StoreUpgrades{Added: []string{"late2"}}}
	clr := 6
	if leveldb {
		clr = 10
	}
	for i := range s.steps {
		if !leveldb {
			s.steps[i].quiet = append(s.steps[i].quiet, "never")
		}
		if i >= 9 && i <= 11 {
			s.steps[i].quiet = append(s.steps[i].quiet, "late2") // empty at its first heights
		}
		if i > clr && i <= clr+2 {
			s.steps[i].quiet = append(s.steps[i].quiet, "clr")
		}
	}
	s.steps[clr].clear = []string{"clr"} // empty for 3 blocks, then written again
	if leveldb {
		s.steps[12].quiet = nil // every store written before the restart at 13
	}
	s.steps[13].reload = true // a plain restart
	s.steps[13].mount = afterUp2
	return s
}

// histBackend returns a new in-memory cosmos-db, or with leveldb a new
// goleveldb one closed at the end of the test.
func histBackend(t *testing.T, leveldb bool) dbm.DB {
	if leveldb {
		return migLevelDB(t)
	}
	return dbm.NewMemDB()
}

// histImportEvery imports at the height of every step of s and continues
// each import with the chain's next blocks on our multistore.
func histImportEvery(t *testing.T, c *histChain, s *histScript) {
	t.Helper()
	for i := range s.steps {
		h := histHeight(s, i)
		dir := histImport(t, c, h)
		histContinue(t, c, s, h, dir)
	}
}

func histRunUpgrades(t *testing.T, db dbm.DB, initial int64, leveldb bool) {
	s := histUpgradeScript(initial, leveldb)
	c := histBuild(t, db, s)
	c.queries = !leveldb // rootmulti over goleveldb cannot serve empty stores' past versions
	for _, h := range []int64{1, initial - 1} {
		if h < 1 || initial <= 1 {
			continue
		}
		dir := filepath.Join(t.TempDir(), "db")
		if err := compat.ImportIAVL(histReadOnly{db}, h, nil, dir, multitree.Options{}); !histIsMigrate(err) {
			t.Fatalf("import at %d, before the initial version %d: %v", h, initial, err)
		}
	}
	c.db = histReadOnly{db} // the import only reads
	histImportEvery(t, c, s)
}

// TestMigrateUpgradeHistoryMemDB imports at every height of a history with
// store upgrades, empty stores and restarts (in-memory cosmos-db), and
// continues each import with the chain's next blocks on our multistore.
func TestMigrateUpgradeHistoryMemDB(t *testing.T) {
	histRunUpgrades(t, dbm.NewMemDB(), 0, false)
}

// TestMigrateUpgradeHistoryGoLevelDB is the same over goleveldb, where
// iavl's empty roots read back as absent.
func TestMigrateUpgradeHistoryGoLevelDB(t *testing.T) {
	histRunUpgrades(t, migLevelDB(t), 0, true)
}

// TestMigrateUpgradeHistoryInitialVersion: the same with SetInitialVersion
// (the chain's initial height 20).
func TestMigrateUpgradeHistoryInitialVersion(t *testing.T) {
	histRunUpgrades(t, dbm.NewMemDB(), 20, false)
}

// TestMigrateAfterRollback: rootmulti rolled back from 12 to 7
// (RollbackToVersion, iavl's LoadVersionForOverwriting), then other blocks
// 8..10 committed: every height up to 10 imports the new history and
// continues; 11 and 12, whose commit infos the rollback left, are refused.
func TestMigrateAfterRollback(t *testing.T) {
	for _, leveldb := range []bool{false, true} {
		db := histBackend(t, leveldb)
		stores := []string{"acc", "bank", "gov"}
		s := &histScript{seed: 21}
		s.steps = make([]histStep, 12)
		s.steps[0] = histStep{reload: true, mount: stores}
		c := histBuild(t, db, s)
		if err := c.rs.RollbackToVersion(7); err != nil {
			t.Fatal(err)
		}
		s2 := &histScript{seed: 99, steps: append(append([]histStep(nil), s.steps[:7]...), make([]histStep, 3)...)}
		s2.steps[7] = histStep{reload: true, mount: stores}
		old10 := c.infos[10].Hash()
		histBuildFrom(t, c, s2, 7)
		if bytes.Equal(old10, c.infos[10].Hash()) {
			t.Fatal("the blocks after the rollback did not change the app hash")
		}
		histImportEvery(t, c, s2)
		for _, h := range []int64{11, 12} {
			dir := filepath.Join(t.TempDir(), "db")
			if err := compat.ImportIAVL(db, h, nil, dir, multitree.Options{}); !histIsMigrate(err) {
				t.Fatalf("leveldb %v: import at %d after the rollback: %v", leveldb, h, err)
			}
		}
	}
}

// TestMigrateIAVLOverwritten: the stores' trees rolled back by iavl itself
// (LoadVersionForOverwriting, which deletes the versions after its target)
// without rootmulti's metadata (s/latest and the commit infos stay): a
// height whose trees are gone, an empty store's included, is refused and
// leaves nothing; the target still imports.
func TestMigrateIAVLOverwritten(t *testing.T) {
	for _, leveldb := range []bool{false, true} {
		db := histBackend(t, leveldb)
		s := &histScript{seed: 31}
		s.steps = make([]histStep, 10)
		s.steps[0] = histStep{reload: true, mount: []string{"acc", "bank", "never"}}
		for i := range s.steps {
			s.steps[i].quiet = []string{"never"}
		}
		c := histBuild(t, db, s)
		for _, name := range []string{"acc", "bank", "never"} {
			tree := iavl.NewMutableTree(wrapper.NewDBWrapper(dbm.NewPrefixDB(db, []byte("s/k:"+name+"/"))), 0, true, log.NewNopLogger())
			if err := tree.LoadVersionForOverwriting(6); err != nil {
				if leveldb && name == "never" {
					continue // iavl cannot load an empty version from goleveldb (cosmos/iavl#939)
				}
				t.Fatalf("%s: %v", name, err)
			}
		}
		for _, tc := range []struct {
			h      int64
			stores []string
		}{{7, nil}, {9, []string{"acc"}}, {8, []string{"never"}}} {
			if leveldb && tc.stores != nil && tc.stores[0] == "never" {
				continue
			}
			dir := filepath.Join(t.TempDir(), "db")
			err := compat.ImportIAVL(db, tc.h, tc.stores, dir, multitree.Options{})
			if !histIsMigrate(err) {
				t.Fatalf("leveldb %v: import at %d (%v) after iavl deleted it: %v", leveldb, tc.h, tc.stores, err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("a refused import left %s", dir)
			}
		}
		histImport(t, c, 6)
	}
}
