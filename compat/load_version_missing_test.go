package compat_test

import (
	"fmt"
	"testing"

	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/types"
)

// TestLoadVersionNeverCommitted: LoadVersion of a version the chain never
// had (before its initial version 10, after its latest, negative) fails as
// rootmulti's does ("no commit info found"), on a loaded instance and on a
// fresh one (a restart), and a loaded instance goes on at its version.
// Before, only a loaded instance's load before the first version gave
// rootmulti's error; the others gave the database's own.
func TestLoadVersionNeverCommitted(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.same("SetInitialVersion", func(s types.CommitMultiStore) any { return s.SetInitialVersion(10) })
	z.set("store1", "k", "v")
	z.commit()
	z.set("store1", "k", "w")
	z.commit()
	for _, v := range []int64{3, 9, 12, -1} {
		z.same(fmt.Sprintf("LoadVersion(%d) loaded", v), func(s types.CommitMultiStore) any { return s.LoadVersion(v) })
		z.same("LastCommitID after", func(s types.CommitMultiStore) any { return s.LastCommitID() })
	}
	z.set("store1", "k", "x")
	z.commit()
	for _, v := range []int64{3, 9, 13, -1} {
		z.fresh(sideStores, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
		z.same(fmt.Sprintf("LoadVersion(%d) fresh", v), func(s types.CommitMultiStore) any { return s.LoadVersion(v) })
	}
}
