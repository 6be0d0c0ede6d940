package benchmarks

import (
	"fmt"
	"testing"

	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestDirGetSamplesSameKeys: BenchmarkDirGet compares ours and the
// reference on the same data (a directory and its import-memiavl copy), so
// both sides read the same key sample, spread over each store's key range
// (the reference's trees have no size: openRealDir counts their keys, where
// sampling its first keys would give it a contiguous, cache-friendly
// prefix).
func TestDirGetSamplesSameKeys(t *testing.T) {
	const nStores, bigKeys = 20, 20_000 // per = 200,000/20 = 10,000 < bigKeys/2
	var stores []string
	for i := 0; i < nStores; i++ {
		stores = append(stores, fmt.Sprintf("s%02d", i))
	}
	var css []wal.ChangeSet
	for i, name := range stores {
		n := 1
		if i == 0 {
			n = bigKeys
		}
		cs := wal.ChangeSet{Name: name}
		for j := 0; j < n; j++ {
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte(fmt.Sprintf("k%08d", j)), Value: []byte("v")})
		}
		css = append(css, cs)
	}

	oursDir, refDir := t.TempDir()+"/ours", t.TempDir()+"/ref"
	db, err := multitree.Open(oursDir, multitree.Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1, Sync: wal.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rdb, err := refmemiavl.Load(refDir, refOptions(true, stores))
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ApplyChangeSets(RefChangeSets(css)); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}

	t.Setenv("MEMIAVL_BENCH_DIR", oursDir)
	t.Setenv("MEMIAVL_BENCH_REF_DIR", refDir)
	delete(realDirs, implOurs)
	delete(realDirs, implRef)
	defer delete(realDirs, implOurs)
	defer delete(realDirs, implRef)
	var ours, ref *realDir
	testing.Benchmark(func(b *testing.B) {
		ours, ref = openRealDir(b, implOurs), openRealDir(b, implRef)
	})
	if ours == nil || ref == nil {
		t.Fatal("openRealDir failed")
	}
	sample := func(rd *realDir) (map[string]bool, string) {
		m := map[string]bool{}
		last := ""
		for _, k := range rd.present {
			m[rd.stores[k.store]+"/"+string(k.key)] = true
			if rd.stores[k.store] == stores[0] && string(k.key) > last {
				last = string(k.key)
			}
		}
		return m, last
	}
	om, oLast := sample(ours)
	rm, rLast := sample(ref)
	diff := 0
	for k := range om {
		if !rm[k] {
			diff++
		}
	}
	if diff != 0 || len(om) != len(rm) {
		t.Errorf("BenchmarkDirGet reads different samples of the same data: ours %d keys (largest key of %s %q), reference %d keys (largest %q); %d of ours not in the reference's",
			len(om), stores[0], oLast, len(rm), rLast, diff)
	}
}
