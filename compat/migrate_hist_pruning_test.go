package compat_test

import (
	"os"
	"path/filepath"
	"testing"

	pruningtypes "cosmossdk.io/store/pruning/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// histPrunedScript: rootmulti pruning keep-recent 2 every 3 blocks,
// with a store upgrade midway, and a store written at the first block only
// (its later versions are iavl reference roots to a pruned version's root).
func histPrunedScript(leveldb bool) *histScript {
	p := pruningtypes.NewCustomPruningOptions(2, 3)
	base := []string{"acc", "bank", "oldmod", "legacy", "static", "never"}
	after := []string{"acc", "bank", "newmod", "static", "never", "late"}
	if leveldb {
		base, after = base[:5], after[:4]
		after = append(after, "late")
	}
	s := &histScript{seed: 11, pruning: &p}
	s.steps = make([]histStep, 20)
	s.steps[0] = histStep{reload: true, mount: base}
	s.steps[8] = histStep{reload: true, mount: after, up: &storetypes.StoreUpgrades{
		Added:   []string{"late"},
		Renamed: []storetypes.StoreRename{{OldKey: "oldmod", NewKey: "newmod"}},
		Deleted: []string{"legacy"},
	}}
	for i := range s.steps {
		s.steps[i].quiet = []string{"never"}
		if i > 0 {
			s.steps[i].quiet = append(s.steps[i].quiet, "static")
		}
	}
	return s
}

// histPruned imports at every height of a pruned history: heights
// rootmulti no longer serves must fail with ErrMigrate and leave nothing,
// kept heights must import and continue.
func histPruned(t *testing.T, db dbm.DB, leveldb bool) {
	s := histPrunedScript(leveldb)
	c := histBuild(t, db, s)
	c.queries = !leveldb
	kept, pruned := 0, 0
	for i := range s.steps {
		h := histHeight(s, i)
		_, serr := c.rs.CacheMultiStoreWithVersion(h)
		dir := filepath.Join(t.TempDir(), "db")
		err := compat.ImportIAVL(c.db, h, nil, dir, multitree.Options{})
		if serr != nil {
			pruned++
			if !histIsMigrate(err) {
				t.Fatalf("height %d: rootmulti says %v; import: %v", h, serr, err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("height %d: a refused import left %s", h, dir)
			}
			continue
		}
		kept++
		if err != nil {
			t.Fatalf("height %d: rootmulti serves it, import: %v", h, err)
		}
		histVerify(t, c, h, dir)
		histContinue(t, c, s, h, dir)
	}
	if kept < 2 || pruned < 5 {
		t.Fatalf("kept %d, pruned %d heights: the script does not prune", kept, pruned)
	}
}

func TestMigratePrunedMemDB(t *testing.T) {
	histPruned(t, dbm.NewMemDB(), false)
}

func TestMigratePrunedGoLevelDB(t *testing.T) {
	db, err := dbm.NewGoLevelDB("application", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	histPruned(t, db, true)
}
