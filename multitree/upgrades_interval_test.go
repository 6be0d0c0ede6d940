package multitree_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestIntervalOneKeepZeroWithUpgrades: SnapshotInterval 1 and
// SnapshotKeepRecent 0 (a rewrite after every commit, nothing older kept)
// with store upgrades every few versions: every commit matches rootmulti,
// ViewAt of an older version either gives that version's hash or fails
// with ErrVersion, and reopens land on the last hash.
func TestIntervalOneKeepZeroWithUpgrades(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	stores := []string{"a", "b"}
	opts := multitree.Options{SnapshotInterval: 1, SnapshotKeepRecent: 0}
	copts := opts
	copts.CreateIfMissing, copts.InitialStores = true, stores
	db := upgOpen(t, dir, copts)
	defer func() { db.Close() }()
	multitree.DelayRewrites(db, 1)
	o := upgNewRM(t, stores, 0)
	hashes := map[int64][]byte{}
	next := 0
	for v := 1; v <= 60; v++ {
		if v%7 == 0 {
			cur := append([]string(nil), o.stores...)
			next++
			up := &storetypes.StoreUpgrades{}
			var after []string
			switch next % 3 {
			case 0:
				up.Added = []string{fmt.Sprint("n", next)}
				after = append(cur, up.Added...)
			case 1:
				old := cur[0]
				nn := fmt.Sprint("r", next)
				up.Renamed = []storetypes.StoreRename{{OldKey: old, NewKey: nn}}
				after = append(append([]string(nil), cur[1:]...), nn)
			case 2:
				if len(cur) > 1 {
					up.Deleted = []string{cur[len(cur)-1]}
					after = cur[:len(cur)-1]
				} else {
					up.Added = []string{fmt.Sprint("n", next)}
					after = append(cur, up.Added...)
				}
			}
			if err := db.ApplyUpgrades(upgToWal(up)); err != nil {
				t.Fatal(err)
			}
			o.load(t, after, up, 0)
		}
		var pairs []upgPair
		for _, s := range o.stores {
			for i := 0; i < 1+r.Intn(5); i++ {
				pairs = append(pairs, upgSet(s, fmt.Sprint("k", r.Intn(40)), fmt.Sprint("v", v, i)))
			}
		}
		upgApply(t, db, o, pairs)
		info := upgCommitBoth(t, db, o)
		hashes[info.Version] = info.Hash()
		for _, back := range []int64{1, 2, 5} {
			w := info.Version - back
			if w < 1 {
				continue
			}
			vw, err := db.ViewAt(w)
			if err != nil {
				if !errors.Is(err, multitree.ErrVersion) {
					t.Fatalf("ViewAt(%d) at %d: %v", w, v, err)
				}
				continue
			}
			if !bytes.Equal(vw.CommitInfo().Hash(), hashes[w]) {
				t.Fatalf("ViewAt(%d) at %d: another hash", w, v)
			}
			vw.Release()
		}
		if v%13 == 0 {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = upgOpen(t, dir, opts)
			multitree.DelayRewrites(db, 1)
			if db.Version() != info.Version || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
				t.Fatalf("reopened at %d with another hash", db.Version())
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := multitree.Verify(dir); err != nil {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
