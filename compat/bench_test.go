package compat_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// Store-level throughput, side by side in one run:
//
//	multitree  the raw database API (DB.Set, DB.Get, DB.Commit)
//	compat     our CommitMultiStore
//	rootmulti  the SDK's rootmulti over cosmos/iavl on an in-memory cosmos-db
//
// "direct" works on the multistore's stores themselves, "branch" through a
// CacheMultiStore branch written back before the commit (what BaseApp does
// per block). A Block is benchBlockWrites writes (updates and inserts) and
// benchBlockReads reads spread over the stores, then a commit; Get is one
// read of a present key. Every implementation starts from the same state:
// benchKeysPerStor keys per store written over 10 versions, then (for the
// database) a snapshot rewrite, so that the state is read from the memory
// map as on a running node. The database runs with fsync "none" and no
// background rewrite during the timed part, so that the comparison with the
// in-memory rootmulti measures the stores, not the disk.
//
// Blocks change the state: give every implementation the same number of
// blocks (-benchtime=Nx) so that they run on the same states:
//
//	go test -run '^$' -bench Block -benchtime=300x -count=5 -benchmem ./compat/
//	go test -run '^$' -bench Get -count=5 -benchmem ./compat/
//
// The adapter's overhead is Block/direct/compat against
// Block/direct/multitree (and Get/direct likewise).

const (
	benchStores      = 5
	benchKeysPerStor = 10_000
	benchBlockWrites = 200
	benchBlockReads  = 400
)

var benchStoreNames = func() []string {
	var names []string
	for i := 0; i < benchStores; i++ {
		names = append(names, fmt.Sprintf("store%d", i))
	}
	return names
}()

// benchFixture is one implementation loaded with the same state.
type benchFixture struct {
	keys   [][]byte // present keys of every store (the same in each)
	rnd    *rand.Rand
	db     *multitree.DB      // multitree
	ms     *compat.MultiStore // compat
	rs     *rootmulti.Store   // rootmulti
	cms    types.CommitMultiStore
	skeys  []types.StoreKey
	closer func()
}

// fixtureSet holds the fixtures of one top-level benchmark by implementation
// and use (the Get benchmarks share fixtures they never write, the Block ones
// have their own); they live until that benchmark ends.
type fixtureSet struct {
	dir string
	m   map[string]*benchFixture
}

func newFixtureSet(b *testing.B) *fixtureSet {
	fs := &fixtureSet{dir: b.TempDir(), m: map[string]*benchFixture{}}
	b.Cleanup(func() {
		for _, f := range fs.m {
			f.closer()
		}
	})
	return fs
}

func benchKey(r *rand.Rand) []byte {
	k := make([]byte, 1+8+r.Intn(24))
	k[0] = byte(r.Intn(4))
	r.Read(k[1:])
	return k
}

func benchValue(r *rand.Rand) []byte {
	v := make([]byte, 16+r.Intn(100))
	r.Read(v)
	return v
}

func benchConfig() compat.Config {
	cfg := compat.DefaultConfig()
	cfg.Enable, cfg.Fsync, cfg.SnapshotInterval = true, "none", 1_000_000
	return cfg
}

// fixture returns the implementation loaded with benchKeysPerStor keys per
// store over 10 versions, built once per set, implementation and use.
func (fs *fixtureSet) fixture(b *testing.B, impl, use string) *benchFixture {
	if f, ok := fs.m[impl+"/"+use]; ok {
		return f
	}
	r := rand.New(rand.NewSource(1))
	f := &benchFixture{rnd: rand.New(rand.NewSource(2))}
	for i := 0; i < benchKeysPerStor; i++ {
		f.keys = append(f.keys, benchKey(r))
	}
	for _, name := range benchStoreNames {
		f.skeys = append(f.skeys, types.NewKVStoreKey(name))
	}
	dir := filepath.Join(fs.dir, impl+"-"+use)
	switch impl {
	case "multitree":
		cfg := benchConfig()
		sync, _ := compat.ParseFsync(cfg.Fsync)
		db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: benchStoreNames,
			SnapshotInterval: cfg.SnapshotInterval, Sync: sync})
		if err != nil {
			b.Fatal(err)
		}
		f.db, f.closer = db, func() { db.Close() }
	case "compat":
		ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), benchConfig())
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range f.skeys {
			ms.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
		}
		if err := ms.LoadLatestVersion(); err != nil {
			b.Fatal(err)
		}
		f.ms, f.cms, f.closer = ms, ms, func() { ms.Close() }
	case "rootmulti":
		rs := rootmulti.NewStore(dbm.NewMemDB(), log.NewNopLogger(), metrics.NewNoOpMetrics())
		for _, k := range f.skeys {
			rs.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
		}
		if err := rs.LoadLatestVersion(); err != nil {
			b.Fatal(err)
		}
		f.rs, f.cms, f.closer = rs, rs, func() {}
	}
	per := len(f.keys) / 10
	for v := 0; v < 10; v++ {
		for s := range benchStoreNames {
			for _, k := range f.keys[v*per : (v+1)*per] {
				f.set(s, k, benchValue(r))
			}
		}
		f.commit()
	}
	var err error
	switch {
	case f.db != nil:
		err = f.db.RewriteSnapshot(context.Background())
	case f.ms != nil:
		err = f.ms.RewriteSnapshot(context.Background())
	}
	if err != nil {
		b.Fatal(err)
	}
	fs.m[impl+"/"+use] = f
	return f
}

func (f *benchFixture) set(store int, k, v []byte) {
	if f.db != nil {
		if err := f.db.Set(benchStoreNames[store], k, v); err != nil {
			panic(err)
		}
		return
	}
	f.cms.GetKVStore(f.skeys[store]).Set(k, v)
}

func (f *benchFixture) get(store int, k []byte) []byte {
	if f.db != nil {
		v, err := f.db.Get(benchStoreNames[store], k)
		if err != nil {
			panic(err)
		}
		return v
	}
	return f.cms.GetKVStore(f.skeys[store]).Get(k)
}

func (f *benchFixture) commit() {
	if f.db != nil {
		if _, err := f.db.Commit(); err != nil {
			panic(err)
		}
		return
	}
	f.cms.Commit()
}

// block runs one block: through a branch of the multistore, or directly.
func (f *benchFixture) block(branch bool) {
	r := f.rnd
	var cms types.CacheMultiStore
	if branch {
		cms = f.cms.CacheMultiStore()
	}
	for i := 0; i < benchBlockWrites; i++ {
		s := r.Intn(benchStores)
		k := f.keys[r.Intn(len(f.keys))]
		if i%4 == 0 {
			k = benchKey(r) // an insert
		}
		v := benchValue(r)
		if branch {
			cms.GetKVStore(f.skeys[s]).Set(k, v)
		} else {
			f.set(s, k, v)
		}
	}
	for i := 0; i < benchBlockReads; i++ {
		s := r.Intn(benchStores)
		k := f.keys[r.Intn(len(f.keys))]
		if branch {
			cms.GetKVStore(f.skeys[s]).Get(k)
		} else {
			f.get(s, k)
		}
	}
	if branch {
		cms.Write()
	}
	f.commit()
}

func BenchmarkBlock(b *testing.B) {
	fs := newFixtureSet(b)
	for _, mode := range []string{"direct", "branch"} {
		for _, impl := range []string{"multitree", "compat", "rootmulti"} {
			if impl == "multitree" && mode == "branch" {
				continue
			}
			b.Run(mode+"/"+impl, func(b *testing.B) {
				f := fs.fixture(b, impl, "block-"+mode)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					f.block(mode == "branch")
				}
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	fs := newFixtureSet(b)
	for _, mode := range []string{"direct", "branch"} {
		for _, impl := range []string{"multitree", "compat", "rootmulti"} {
			if impl == "multitree" && mode == "branch" {
				continue
			}
			b.Run(mode+"/"+impl, func(b *testing.B) {
				f := fs.fixture(b, impl, "read")
				r := rand.New(rand.NewSource(3))
				var kv types.KVStore
				if mode == "branch" {
					kv = f.cms.CacheMultiStore().GetKVStore(f.skeys[0])
				} else if f.cms != nil {
					kv = f.cms.GetKVStore(f.skeys[0])
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					k := f.keys[r.Intn(len(f.keys))]
					var v []byte
					if kv != nil {
						v = kv.Get(k)
					} else {
						v = f.get(0, k)
					}
					if v == nil {
						b.Fatal("absent key")
					}
				}
			})
		}
	}
}

// BenchmarkIterate opens an iterator of the working state over a short
// range (a random key and the 4 after it, as a module's prefix read),
// reads it and closes it: the iterator's setup and teardown weigh as much
// as its steps.
func BenchmarkIterate(b *testing.B) {
	fs := newFixtureSet(b)
	for _, mode := range []string{"direct", "branch"} {
		for _, impl := range []string{"compat", "rootmulti"} {
			b.Run(mode+"/"+impl, func(b *testing.B) {
				f := fs.fixture(b, impl, "read")
				r := rand.New(rand.NewSource(5))
				kv := f.cms.GetKVStore(f.skeys[0])
				if mode == "branch" {
					kv = f.cms.CacheMultiStore().GetKVStore(f.skeys[0])
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					it := kv.Iterator(f.keys[r.Intn(len(f.keys))], nil)
					for n := 0; n < 5 && it.Valid(); n++ {
						_, _ = it.Key(), it.Value()
						it.Next()
					}
					if err := it.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkHistoricalGet reads a recent committed version through
// CacheMultiStoreWithVersion, as gRPC queries do.
func BenchmarkHistoricalGet(b *testing.B) {
	fs := newFixtureSet(b)
	for _, impl := range []string{"compat", "rootmulti"} {
		b.Run(impl, func(b *testing.B) {
			f := fs.fixture(b, impl, "read")
			r := rand.New(rand.NewSource(4))
			branch, err := f.cms.CacheMultiStoreWithVersion(f.cms.LatestVersion())
			if err != nil {
				b.Fatal(err)
			}
			kv := branch.GetKVStore(f.skeys[1])
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				kv.Get(f.keys[r.Intn(len(f.keys))])
			}
		})
	}
}

// BenchmarkAdapterOverhead measures the multistore against the raw database
// API in paired runs: each iteration does the same work on both, in
// alternating order, so that the noise of a shared machine hits both alike.
// It reports the time of each per op and the overhead in percent.
func BenchmarkAdapterOverhead(b *testing.B) {
	fs := newFixtureSet(b)
	paired := func(b *testing.B, raw, adapter func()) {
		var tRaw, tAd time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%2 == 0 {
				t0 := time.Now()
				raw()
				t1 := time.Now()
				adapter()
				tRaw, tAd = tRaw+t1.Sub(t0), tAd+time.Since(t1)
			} else {
				t0 := time.Now()
				adapter()
				t1 := time.Now()
				raw()
				tAd, tRaw = tAd+t1.Sub(t0), tRaw+time.Since(t1)
			}
		}
		b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "multitree-ns/op")
		b.ReportMetric(float64(tAd.Nanoseconds())/float64(b.N), "compat-ns/op")
		b.ReportMetric(100*(float64(tAd)/float64(tRaw)-1), "overhead-%")
	}
	b.Run("block", func(b *testing.B) {
		raw, ad := fs.fixture(b, "multitree", "paired"), fs.fixture(b, "compat", "paired")
		paired(b, func() { raw.block(false) }, func() { ad.block(false) })
	})
	b.Run("get1000", func(b *testing.B) {
		raw, ad := fs.fixture(b, "multitree", "read"), fs.fixture(b, "compat", "read")
		kv := ad.cms.GetKVStore(ad.skeys[0])
		r := rand.New(rand.NewSource(5))
		idx := make([]int, 1<<16)
		for j := range idx {
			idx[j] = r.Intn(len(raw.keys))
		}
		var nraw, nad int
		paired(b, func() {
			for j := 0; j < 1000; j++ {
				raw.get(0, raw.keys[idx[(nraw+j)%len(idx)]])
			}
			nraw += 1000
		}, func() {
			for j := 0; j < 1000; j++ {
				kv.Get(ad.keys[idx[(nad+j)%len(idx)]])
			}
			nad += 1000
		})
	})
}
