package multitree_test

import (
	"bytes"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestRecommitRenamesInAnotherOrder: a version whose upgrades
// rename two unrelated stores, re-committed (writer at an older
// TargetVersion) with the same renames listed in the other order, gives
// the same stores with the same pairs and the same app hash; Commit
// documents that the same changes may come in any order of stores.
func TestRecommitRenamesInAnotherOrder(t *testing.T) {
	dir := t.TempDir()
	db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1})
	upgApply(t, db, nil, []upgPair{upgSet("a", "k", "va"), upgSet("b", "k", "vb")})
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "x"}, {OldName: "b", NewName: "y"}}}); err != nil {
		t.Fatal(err)
	}
	info2, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ups := range [][]wal.Upgrades{
		{{Renamed: []wal.RenamedStore{{OldName: "b", NewName: "y"}, {OldName: "a", NewName: "x"}}}},
		{{Renamed: []wal.RenamedStore{{OldName: "b", NewName: "y"}}}, {Renamed: []wal.RenamedStore{{OldName: "a", NewName: "x"}}}},
	} {
		db := upgOpen(t, dir, multitree.Options{TargetVersion: 1})
		for _, u := range ups {
			if err := db.ApplyUpgrades(u); err != nil {
				t.Fatal(err)
			}
		}
		// the working state is the logged version's
		if !bytes.Equal(db.WorkingCommitInfo().Hash(), info2.Hash()) {
			t.Fatalf("working hash differs")
		}
		info, err := db.Commit()
		if err != nil || !bytes.Equal(info.Hash(), info2.Hash()) {
			t.Errorf("re-commit of version 2 with renames %+v: %v", ups, err)
		}
		db.Close()
	}
}
