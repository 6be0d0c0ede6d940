package compat_test

import (
	"errors"
	"fmt"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// rboReopen closes p.ours and opens it again mounting m, with the store
// upgrades up.
func rboReopen(t *testing.T, p *pair, m mount, up *types.StoreUpgrades) {
	t.Helper()
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, m, up)
}

// rboLoadVersion closes p.ours and replaces it with a new multistore on
// p.dir that mounts smallMount and loads version v (LoadVersion of a
// version older than the latest).
func rboLoadVersion(t *testing.T, p *pair, v int64) *compat.MultiStore {
	t.Helper()
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	ms, err := compat.NewMultiStore(p.dir, log.NewNopLogger(), p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.ours = ms
	mountAll(ms, p.keys, smallMount)
	if err := ms.LoadVersion(v); err != nil {
		t.Fatalf("load %d with a and b mounted: %v", v, err)
	}
	return ms
}

// rboCommit sets k<i> to "v" in each of stores of ms and commits.
func rboCommit(t *testing.T, ms *compat.MultiStore, keys keyring, stores []string, i int) {
	for _, s := range stores {
		ms.GetKVStore(keys[s]).Set(fmt.Appendf(nil, "k%d", i), []byte("v"))
	}
	ms.Commit()
}

// a rename between the loaded version and the target: refused, nothing lost
func TestRollbackAfterOlderLoadPastRename(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 1; i <= 4; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a", "b"}, i)
	}
	ac := mount{iavl: []string{"a", "c"}, transient: "t", memory: "m"}
	p.keys.key("c", types.StoreTypeIAVL)
	rboReopen(t, p, ac, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "b", NewKey: "c"}}})
	for i := 5; i <= 7; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a", "c"}, i)
	}
	ms := rboLoadVersion(t, p, 3)
	err := ms.RollbackToVersion(6)
	latest, _ := multitree.LatestVersion(p.dir)
	if !errors.Is(err, multitree.ErrVersion) || latest != 7 || ms.LastCommitID().Version != 3 {
		t.Fatalf("rollback to 6 past a rename of b: %v, latest %d, loaded %d", err, latest, ms.LastCommitID().Version)
	}
	// at 5 (the rename's version) too; at 4 it is allowed
	if err := ms.RollbackToVersion(5); !errors.Is(err, multitree.ErrVersion) {
		t.Fatalf("rollback to 5: %v", err)
	}
	if err := ms.RollbackToVersion(4); err != nil {
		t.Fatalf("rollback to 4: %v", err)
	}
	if ms.LastCommitID().Version != 4 {
		t.Fatalf("loaded %d", ms.LastCommitID().Version)
	}
}

// deleted at 5 and added again at 6: the target 6 holds b; allowed
func TestRollbackAfterOlderLoadDeletedReadded(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 1; i <= 4; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a", "b"}, i)
	}
	onlyA := mount{iavl: []string{"a"}, transient: "t", memory: "m"}
	rboReopen(t, p, onlyA, &types.StoreUpgrades{Deleted: []string{"b"}})
	rboCommit(t, p.ours, p.keys, []string{"a"}, 5)
	rboReopen(t, p, smallMount, &types.StoreUpgrades{Added: []string{"b"}})
	for i := 6; i <= 8; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a", "b"}, i)
	}
	ms := rboLoadVersion(t, p, 3)
	if err := ms.RollbackToVersion(5); !errors.Is(err, multitree.ErrVersion) {
		t.Fatalf("rollback to 5 (b deleted): %v", err)
	}
	if err := ms.RollbackToVersion(7); err != nil {
		t.Fatalf("rollback to 7 (b re-added at 6): %v", err)
	}
	if ms.LastCommitID().Version != 7 {
		t.Fatalf("loaded %d", ms.LastCommitID().Version)
	}
	if got := ms.GetKVStore(p.keys["b"]).Get([]byte("k6")); string(got) != "v" {
		t.Fatalf("b k6 %q", got)
	}
	if got := ms.GetKVStore(p.keys["b"]).Get([]byte("k1")); got != nil {
		t.Fatalf("b k1 %q after re-add", got)
	}
}
