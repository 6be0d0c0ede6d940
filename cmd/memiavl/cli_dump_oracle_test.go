package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/internal/workload"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCLIDumpAgainstRootmulti: at every version (latest, from the log, from
// older snapshots) dump --json --version prints the app hash and each
// store's root hash that rootmulti over cosmos/iavl commits for the same
// writes, and each store's key count.
func TestCLIDumpAgainstRootmulti(t *testing.T) {
	const blocks = 24
	gen, _ := workload.New(workload.Config{Seed: 5, Scale: 0.01})
	ldb := dbm.NewMemDB()
	rs := rootmulti.NewStore(ldb, log.NewNopLogger(), metrics.NewNoOpMetrics())
	for _, name := range gen.Stores() {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: gen.Stores(), SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[int64]map[string]int64{}
	blockCS := map[int64][]wal.ChangeSet{}
	model := map[string]map[string]bool{}
	for v := int64(1); v <= blocks; v++ {
		css := gen.Block(v)
		blockCS[v] = css
		for _, cs := range css {
			st := rs.GetStoreByName(cs.Name).(storetypes.KVStore)
			if model[cs.Name] == nil {
				model[cs.Name] = map[string]bool{}
			}
			for _, p := range cs.Pairs {
				if p.Delete {
					st.Delete(p.Key)
					delete(model[cs.Name], string(p.Key))
				} else {
					st.Set(p.Key, p.Value)
					model[cs.Name][string(p.Key)] = true
				}
			}
		}
		rs.Commit()
		mustOK(t, db.ApplyChangeSets(css))
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		keys[v] = map[string]int64{}
		for n, m := range model {
			keys[v][n] = int64(len(m))
		}
		if v == 8 || v == 16 {
			mustOK(t, db.RewriteSnapshot(context.Background()))
		}
	}
	mustOK(t, db.Close())
	for v := int64(1); v <= blocks; v++ {
		ci, err := rs.GetCommitInfo(v)
		if err != nil {
			t.Fatal(err)
		}
		d := dumpOf(t, dir, v)
		if d.Version != v || d.AppHash != hex.EncodeToString(ci.Hash()) {
			t.Errorf("v%d: dump version %d app hash %s, rootmulti %x", v, d.Version, d.AppHash, ci.Hash())
		}
		want := map[string]string{}
		for _, si := range ci.StoreInfos {
			want[si.Name] = hex.EncodeToString(si.CommitId.Hash)
		}
		if len(d.Stores) != len(want) {
			t.Errorf("v%d: dump stores %d, rootmulti %d", v, len(d.Stores), len(want))
		}
		for _, s := range d.Stores {
			if want[s.Name] != s.RootHash {
				t.Errorf("v%d store %s: dump root %s, rootmulti %s", v, s.Name, s.RootHash, want[s.Name])
			}
			if keys[v][s.Name] != s.Keys {
				t.Errorf("v%d store %s: dump keys %d, committed %d", v, s.Name, s.Keys, keys[v][s.Name])
			}
		}
	}
	// wal dump --json --pairs prints the committed pairs, in hex
	out := mustCLI(t, "wal", "dump", "--json", "--pairs", dir)
	n := int64(0)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e walEntryJSON
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		n++
		css := blockCS[e.Version]
		if len(e.Stores) != len(css) {
			t.Fatalf("wal v%d: %d stores, committed %d", e.Version, len(e.Stores), len(css))
		}
		for i, cs := range css {
			s := e.Stores[i]
			if s.Name != cs.Name || len(s.Pairs) != len(cs.Pairs) {
				t.Fatalf("wal v%d store %d: %s %d pairs, committed %s %d", e.Version, i, s.Name, len(s.Pairs), cs.Name, len(cs.Pairs))
			}
			for j, p := range cs.Pairs {
				want := fmt.Sprintf(`{"key":%q,"value":%q}`, hex.EncodeToString(p.Key), hex.EncodeToString(p.Value))
				if p.Delete {
					want = fmt.Sprintf(`{"delete":true,"key":%q}`, hex.EncodeToString(p.Key))
				}
				if got, err := json.Marshal(s.Pairs[j]); err != nil || string(got) != want {
					t.Fatalf("wal v%d %s pair %d: %s (%v), committed %s", e.Version, cs.Name, j, got, err, want)
				}
			}
		}
	}
	if n != blocks {
		t.Errorf("wal dump printed %d entries, want %d", n, blocks)
	}
}
