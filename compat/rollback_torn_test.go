package compat_test

import (
	"bytes"
	"fmt"
	"testing"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestLoadAfterTornRollback: a rollback (RollbackToVersion, the node's
// rollback command) that a power loss interrupted inside the cut of the log
// leaves the rollback file and, in a synchronous log, a lost page after the
// target's record with whole records after it. multitree.Open finishes such
// a rollback; the multistore's load must too, at the target with
// rootmulti's app hash, instead of failing before it opens the database.
func TestLoadAfterTornRollback(t *testing.T) {
	keys := keyring{}
	m := mount{iavl: []string{"bank"}}
	o := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SnapshotInterval = -1
	c := newOurs(t, dir, cfg, keys, m, nil)
	hashes := map[int64][]byte{}
	for v := 1; v <= 12; v++ {
		for _, s := range []types.CommitMultiStore{c, o} {
			s.GetKVStore(keys["bank"]).Set([]byte(fmt.Sprint("k", v)), make([]byte, 1500))
		}
		cid, oid := c.Commit(), o.Commit()
		if !bytes.Equal(cid.Hash, oid.Hash) {
			t.Fatal("app hash differs")
		}
		hashes[oid.Version] = oid.Hash
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	const target = 5
	testutil.TearRollback(t, dir, target)
	if db, err := multitree.Open(dir, multitree.Options{ReadOnly: true}); err != nil || db.Version() != target {
		t.Fatalf("the database opens at %d: %v", target, err)
	} else {
		db.Close()
	}

	ms, err := compat.NewMultiStore(dir, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mountAll(ms, keys, m)
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatalf("load after a rollback a power loss interrupted: %v", err)
	}
	defer ms.Close()
	if cid := ms.LastCommitID(); cid.Version != target || !bytes.Equal(cid.Hash, hashes[target]) {
		t.Fatalf("loaded %d %X, want %d %X", cid.Version, cid.Hash, target, hashes[target])
	}
}
