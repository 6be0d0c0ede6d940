package compat_test

import (
	"bytes"
	"math"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestLoadAtLastVersion: a multistore that committed up to the last
// version a database can have (math.MaxInt64, reached from an initial
// version near it) must load that database again, as multitree.Open does
// (for writing and read-only): its committed state is to be read by
// queries and branches even though no further version can be committed.
// The load applies the (empty) store upgrades through DB.ApplyUpgrades,
// which refuses every call at the last version, so the multistore cannot
// be loaded at all: neither by a restart nor by a reload of the same
// instance (which then leaves it unloaded).
func TestLoadAtLastVersion(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotInterval = -1
	dir := t.TempDir()
	key := types.NewKVStoreKey("a")
	newMS := func() *compat.MultiStore {
		ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ms.MountStoreWithDB(key, types.StoreTypeIAVL, nil)
		return ms
	}
	ms := newMS()
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	if err := ms.SetInitialVersion(math.MaxInt64 - 1); err != nil {
		t.Fatal(err)
	}
	var last types.CommitID
	for i := byte(1); i <= 2; i++ {
		ms.GetKVStore(key).Set([]byte{i}, []byte("v"))
		last = ms.Commit()
	}
	if last.Version != math.MaxInt64 {
		t.Fatalf("committed up to %d", last.Version)
	}

	// the database itself opens at the last version
	db := ms.DB()
	if db.Version() != math.MaxInt64 {
		t.Fatalf("database at %d", db.Version())
	}

	// a reload of the same instance
	if err := ms.LoadLatestVersion(); err != nil {
		t.Errorf("reload of a multistore at the last version: %v", err)
	} else if id := ms.LastCommitID(); id.Version != math.MaxInt64 || !bytes.Equal(id.Hash, last.Hash) {
		t.Errorf("reloaded at %d %X, want %d %X", id.Version, id.Hash, last.Version, last.Hash)
	}
	ms.Close()

	// a restart
	ro, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("multitree read-only open: %v", err)
	}
	ro.Close()
	ms = newMS()
	defer ms.Close()
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatalf("load after a restart at the last version: %v", err)
	}
	if id := ms.LastCommitID(); id.Version != math.MaxInt64 || !bytes.Equal(id.Hash, last.Hash) {
		t.Fatalf("loaded at %d %X, want %d %X", id.Version, id.Hash, last.Version, last.Hash)
	}
	if v := ms.GetKVStore(key).Get([]byte{2}); string(v) != "v" {
		t.Fatalf("a/02 = %q", v)
	}
}
