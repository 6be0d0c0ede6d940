package benchmarks

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// Read benchmarks against real directories, opened in place and read-only:
//
//	MEMIAVL_BENCH_DIR       a database of this module (e.g. a node's
//	                        data/memiavl.db, or one made by 'memiavl bench
//	                        --dir' or 'memiavl import-memiavl')
//	MEMIAVL_BENCH_REF_DIR   a directory of the reference memiavl, opened by
//	                        the reference library
//
// Each is skipped when its variable is unset. The keys read are a sample of
// up to 200,000 keys taken by iterating the stores (every store
// contributes, spread over its key range by skipping); absent keys are
// those keys with a zero byte appended.

const realSample = 200_000

type realDir struct {
	r       *reader
	stores  []string
	present []storeKey
	absent  []storeKey
}

var realDirs = map[string]*realDir{}

func openRealDir(b *testing.B, impl string) *realDir {
	b.Helper()
	env := map[string]string{implOurs: "MEMIAVL_BENCH_DIR", implRef: "MEMIAVL_BENCH_REF_DIR"}[impl]
	dir := os.Getenv(env)
	if dir == "" {
		b.Skipf("%s is not set", env)
	}
	if rd := realDirs[impl]; rd != nil {
		return rd
	}
	rd := &realDir{}
	type iter interface {
		Valid() bool
		Next()
		Key() []byte
		Close() error
	}
	var (
		open  func(store int) iter
		sizes []int64
	)
	switch impl {
	case implOurs:
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		view, err := db.View()
		if err != nil {
			b.Fatal(err)
		}
		rd.stores = view.StoreNames()
		for _, s := range rd.stores {
			sizes = append(sizes, view.Tree(s).Size())
		}
		trees := make([]interface {
			GetZeroCopy([]byte) ([]byte, error)
			Has([]byte) (bool, error)
		}, len(rd.stores))
		for i, s := range rd.stores {
			trees[i] = view.Tree(s)
		}
		open = func(s int) iter { return view.Tree(rd.stores[s]).Iterator(nil, nil, true) }
		rd.r = &reader{
			get: func(s int, k []byte) []byte { v, _ := trees[s].GetZeroCopy(k); return v },
			has: func(s int, k []byte) bool { ok, _ := trees[s].Has(k); return ok },
		}
	case implRef:
		opts := refOptions(false, nil)
		opts.ReadOnly = true
		db, err := refmemiavl.Load(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		for _, nt := range db.Trees() {
			rd.stores = append(rd.stores, nt.Name)
		}
		trees := make([]*refmemiavl.Tree, len(rd.stores))
		for i, s := range rd.stores {
			trees[i] = db.TreeByName(s)
			// the reference's tree has no size: counted (untimed), so
			// that both sides sample the same keys, spread alike
			n := int64(0)
			it := trees[i].Iterator(nil, nil, true)
			for ; it.Valid(); it.Next() {
				n++
			}
			it.Close()
			sizes = append(sizes, n)
		}
		open = func(s int) iter { return trees[s].Iterator(nil, nil, true) }
		rd.r = &reader{
			get: func(s int, k []byte) []byte { return trees[s].Get(k) },
			has: func(s int, k []byte) bool { return trees[s].Has(k) },
		}
	}
	per := realSample / max(1, len(rd.stores))
	for s := range rd.stores {
		skip := 1
		if sizes[s] > int64(per) {
			skip = int(sizes[s] / int64(per))
		}
		it := open(s)
		n := 0
		for ; it.Valid() && len(rd.present) < (s+1)*per; it.Next() {
			if n%skip == 0 {
				k := bytes.Clone(it.Key())
				rd.present = append(rd.present, storeKey{s, k})
				rd.absent = append(rd.absent, storeKey{s, append(bytes.Clone(k), 0)})
			}
			n++
		}
		it.Close()
	}
	if len(rd.present) == 0 {
		b.Skipf("%s holds no keys", dir)
	}
	r := rand.New(rand.NewPCG(3, 4))
	r.Shuffle(len(rd.present), func(i, j int) { rd.present[i], rd.present[j] = rd.present[j], rd.present[i] })
	r.Shuffle(len(rd.absent), func(i, j int) { rd.absent[i], rd.absent[j] = rd.absent[j], rd.absent[i] })
	b.Logf("%s: %d stores, %d sample keys", dir, len(rd.stores), len(rd.present))
	realDirs[impl] = rd
	return rd
}

func BenchmarkDirGet(b *testing.B) {
	for _, impl := range []string{implOurs, implRef} {
		b.Run("impl="+impl+"/keys=present", func(b *testing.B) {
			rd := openRealDir(b, impl)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := rd.present[i%len(rd.present)]
				if rd.r.get(k.store, k.key) == nil {
					b.Fatalf("key %x missing", k.key)
				}
			}
		})
		b.Run("impl="+impl+"/keys=absent", func(b *testing.B) {
			rd := openRealDir(b, impl)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := rd.absent[i%len(rd.absent)]
				_ = rd.r.get(k.store, k.key)
			}
		})
	}
}
