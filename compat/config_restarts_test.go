package compat_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// randRestartConfig returns a random enabled [memiavl] configuration.
func randRestartConfig(r *rand.Rand) compat.Config {
	cfg := compat.DefaultConfig()
	cfg.Enable = true
	cfg.SnapshotInterval = []int64{-1, 1, 2, 5, 1000}[r.Intn(5)]
	cfg.SnapshotKeepRecent = []int{0, 1, 3, 50}[r.Intn(4)]
	cfg.AsyncCommitBuffer = []int{0, 1, 4}[r.Intn(3)]
	cfg.Fsync = []string{"every-commit", "grouped", "none"}[r.Intn(3)]
	cfg.ZeroCopy = r.Intn(2) == 0
	cfg.RewriteConcurrency = r.Intn(3)
	cfg.OpenCheck = []string{"background", "sync", "none"}[r.Intn(3)]
	cfg.QueryViews = 1 + r.Intn(5)
	return cfg
}

// TestConfigChangesAcrossRestarts restarts the multistore with another
// [memiavl] configuration each time (snapshot interval and keep-recent,
// async log and fsync policy, zero copy, rewrite concurrency, open check,
// query views), beside rootmulti: the loaded and committed app hashes stay
// rootmulti's, and a query of any height either answers as rootmulti does
// (with its proof) or fails, the height not being kept.
func TestConfigChangesAcrossRestarts(t *testing.T) {
	r := testutil.Rand(t)
	keys := keyring{}
	m := mount{iavl: []string{"bank", "acc", "gov"}, transient: "tr", memory: "mem"}
	odb := dbm.NewMemDB()
	o := newOracle(t, odb, keys, m, nil)
	dir := t.TempDir()
	rounds := scale(30, 10)
	for round := 0; round < rounds; round++ {
		cfg := randRestartConfig(r)
		c := newOurs(t, dir, cfg, keys, m, nil)
		if c.LastCommitID().Version != o.LastCommitID().Version || !bytes.Equal(c.LastCommitID().Hash, o.LastCommitID().Hash) {
			t.Fatalf("round %d %+v: loaded %v, rootmulti at %v", round, cfg, c.LastCommitID(), o.LastCommitID())
		}
		for b := 0; b < 1+r.Intn(12); b++ {
			for i := 0; i < 1+r.Intn(10); i++ {
				sk := keys[m.iavl[r.Intn(3)]]
				k := []byte(fmt.Sprintf("k%02d", r.Intn(40)))
				if r.Intn(4) == 0 {
					c.GetKVStore(sk).Delete(k)
					o.GetKVStore(sk).Delete(k)
				} else {
					v := []byte(fmt.Sprintf("v%d", r.Int()))
					c.GetKVStore(sk).Set(k, v)
					o.GetKVStore(sk).Set(k, v)
				}
			}
			cid, oid := c.Commit(), o.Commit()
			if cid.Version != oid.Version || !bytes.Equal(cid.Hash, oid.Hash) {
				t.Fatalf("round %d %+v: commit %v, rootmulti %v", round, cfg, cid, oid)
			}
		}
		latest := o.LastCommitID().Version
		answered := 0
		for h := int64(1); h <= latest; h++ {
			q := types.RequestQuery{Path: "/" + m.iavl[r.Intn(3)] + "/key", Data: []byte(fmt.Sprintf("k%02d", r.Intn(40))), Height: h, Prove: true}
			q2 := q
			ours, err := c.Query(&q2)
			if err != nil {
				continue // not kept
			}
			answered++
			theirs, terr := o.Query(&q)
			if e := sameResponse(ours, err, theirs, terr); e != nil {
				t.Fatalf("round %d %+v: query at %d: %v", round, cfg, h, e)
			}
		}
		if latest > 0 && answered == 0 {
			t.Fatalf("round %d: no height answered", round)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("round %d close: %v", round, err)
		}
	}
}
