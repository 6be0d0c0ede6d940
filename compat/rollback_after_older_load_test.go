package compat_test

import (
	"errors"
	"fmt"
	"testing"

	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestRollbackAfterOlderLoadPastDeletion: a rollback to a version after
// the loaded one (LoadVersion of an older version) is refused with
// ErrVersion when a mounted store does not exist at it, before anything is
// discarded, as for a target at or before the loaded version: here a
// multistore mounting a and b loads version 3 of a database whose version 5
// deleted b, and a rollback to 6 leaves version 7 and the loaded multistore
// as they were.
func TestRollbackAfterOlderLoadPastDeletion(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 1; i <= 4; i++ {
		p.commit(map[string][][2][]byte{"b": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
	}
	onlyA := mount{iavl: []string{"a"}, transient: "t", memory: "m"}
	rboReopen(t, p, onlyA, &types.StoreUpgrades{Deleted: []string{"b"}})
	for i := 5; i <= 7; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a"}, i)
	}
	ms := rboLoadVersion(t, p, 3)
	err := ms.RollbackToVersion(6)
	latest, lerr := multitree.LatestVersion(p.dir)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if !errors.Is(err, multitree.ErrVersion) || latest != 7 {
		t.Fatalf("rollback to 6 (after store b was deleted) with b mounted: err %v, latest version now %d (want ErrVersion and 7 kept)", err, latest)
	}
	if ms.DB() == nil || ms.LastCommitID().Version != 3 {
		t.Fatalf("the refused rollback did not leave the multistore loaded at 3")
	}
}
