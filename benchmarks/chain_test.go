package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"
	"time"

	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// Benchmarks on the chain fixture (see fixture_test.go), one sub-benchmark
// per implementation: BenchmarkGet/impl=ours, impl=refmemiavl,
// impl=iavl-fast, impl=iavl-nofast.

// reader is an implementation opened on its fixture directory at the last
// version, for the read benchmarks.
type reader struct {
	get  func(store int, key []byte) []byte // zero-copy where the API offers it
	has  func(store int, key []byte) bool
	scan func(store int) int // iterates the whole store, returns the keys seen
}

var (
	readersMu sync.Mutex
	readers   = map[string]*reader{}
)

func openReader(b *testing.B, f *chainFixture, impl string) *reader {
	b.Helper()
	readersMu.Lock()
	defer readersMu.Unlock()
	if r := readers[impl]; r != nil {
		return r
	}
	var r *reader
	switch impl {
	case implOurs:
		db, err := multitree.Open(f.dir(impl), multitree.Options{ReadOnly: true, SnapshotInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		view, err := db.View() // held for the life of the process
		if err != nil {
			b.Fatal(err)
		}
		trees := make([]*memiavl.Tree, len(f.stores))
		for i, name := range f.stores {
			trees[i] = view.Tree(name)
		}
		r = &reader{
			get: func(s int, k []byte) []byte { v, _ := trees[s].GetZeroCopy(k); return v },
			has: func(s int, k []byte) bool { ok, _ := trees[s].Has(k); return ok },
			scan: func(s int) int {
				n := 0
				it := trees[s].Iterator(nil, nil, true)
				for ; it.Valid(); it.Next() {
					n++
				}
				it.Close()
				return n
			},
		}
	case implRef:
		opts := refOptions(false, nil)
		opts.ReadOnly = true
		db, err := refmemiavl.Load(f.dir(impl), opts)
		if err != nil {
			b.Fatal(err)
		}
		trees := make([]*refmemiavl.Tree, len(f.stores))
		for i, name := range f.stores {
			trees[i] = db.TreeByName(name)
		}
		r = &reader{
			get: func(s int, k []byte) []byte { return trees[s].Get(k) },
			has: func(s int, k []byte) bool { return trees[s].Has(k) },
			scan: func(s int) int {
				n := 0
				it := trees[s].Iterator(nil, nil, true)
				for ; it.Valid(); it.Next() {
					n++
				}
				it.Close()
				return n
			},
		}
	case implIAVLFast, implIAVLNoFast:
		st, err := openIAVL(f.dir(impl), f.stores, impl == implIAVLFast)
		if err != nil {
			b.Fatal(err)
		}
		trees := st.trees
		r = &reader{
			get: func(s int, k []byte) []byte { v, _ := trees[s].Get(k); return v },
			has: func(s int, k []byte) bool { ok, _ := trees[s].Has(k); return ok },
			scan: func(s int) int {
				n := 0
				it, err := trees[s].Iterator(nil, nil, true)
				if err != nil {
					panic(err)
				}
				for ; it.Valid(); it.Next() {
					n++
				}
				it.Close()
				return n
			},
		}
	default:
		b.Fatalf("unknown implementation %q", impl)
	}
	readers[impl] = r
	return r
}

func BenchmarkGet(b *testing.B) {
	for _, impl := range chainImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			r := openReader(b, f, impl)
			keys := f.present
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := keys[i%len(keys)]
				if r.get(k.store, k.key) == nil {
					b.Fatalf("%s: key %x of store %s missing", impl, k.key, f.stores[k.store])
				}
			}
		})
	}
}

func BenchmarkHas(b *testing.B) {
	for _, impl := range chainImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			r := openReader(b, f, impl)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// alternate present and absent keys
				if i&1 == 0 {
					k := f.present[(i>>1)%len(f.present)]
					if !r.has(k.store, k.key) {
						b.Fatalf("%s: present key reported absent", impl)
					}
				} else {
					k := f.absent[(i>>1)%len(f.absent)]
					if r.has(k.store, k.key) {
						b.Fatalf("%s: absent key reported present", impl)
					}
				}
			}
		})
	}
}

// BenchmarkIterate: one op is a full ascending iteration over every store;
// keys/s is reported.
func BenchmarkIterate(b *testing.B) {
	for _, impl := range chainImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			r := openReader(b, f, impl)
			b.ReportAllocs()
			b.ResetTimer()
			total := 0
			for i := 0; i < b.N; i++ {
				n := 0
				for s := range f.stores {
					n += r.scan(s)
				}
				if int64(n) != f.keys {
					b.Fatalf("%s: iterated %d keys, want %d", impl, n, f.keys)
				}
				total += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// writer is an implementation opened as a writer on a fresh copy of its
// fixture directory. prepare converts changes to the implementation's own
// types (callers run it with the timer stopped, as TestSyncComparison
// does); apply applies what it returned.
type writer struct {
	prepare func(css []wal.ChangeSet) any
	apply   func(changes any)
	commit  func()
	close   func()
}

// same is the prepare of the implementations that take the changes as
// they are.
func same(css []wal.ChangeSet) any { return css }

func openWriter(b *testing.B, f *chainFixture, impl string) *writer {
	b.Helper()
	dir := f.freshCopy(b, impl)
	switch impl {
	case implOurs:
		db, err := openOurs(dir, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		return &writer{
			prepare: same,
			apply: func(changes any) {
				if err := db.ApplyChangeSets(changes.([]wal.ChangeSet)); err != nil {
					b.Fatal(err)
				}
			},
			commit: func() {
				if _, err := db.Commit(); err != nil {
					b.Fatal(err)
				}
			},
			close: func() { _ = db.Close() },
		}
	case implRef:
		db, err := refmemiavl.Load(dir, refOptions(false, nil))
		if err != nil {
			b.Fatal(err)
		}
		return &writer{
			prepare: func(css []wal.ChangeSet) any { return RefChangeSets(css) },
			apply: func(changes any) {
				if err := db.ApplyChangeSets(changes.([]*refmemiavl.NamedChangeSet)); err != nil {
					b.Fatal(err)
				}
			},
			commit: func() {
				if _, err := db.Commit(); err != nil {
					b.Fatal(err)
				}
			},
			close: func() { _ = db.Close() },
		}
	case implIAVLFast, implIAVLNoFast:
		st, err := openIAVL(dir, f.stores, impl == implIAVLFast)
		if err != nil {
			b.Fatal(err)
		}
		return &writer{
			prepare: same,
			apply: func(changes any) {
				if err := st.apply(changes.([]wal.ChangeSet), f.stores); err != nil {
					b.Fatal(err)
				}
			},
			commit: func() {
				if _, err := st.commit(f.stores); err != nil {
					b.Fatal(err)
				}
			},
			close: func() { _ = st.close() },
		}
	}
	b.Fatalf("unknown implementation %q", impl)
	return nil
}

// BenchmarkSetCommit: one op is one Set (an update of an existing key of
// the bank store to a new value, or with 1/4 chance an insert of a new
// key); every 1,000 sets are committed as a version, the commit's cost
// spread over them.
func BenchmarkSetCommit(b *testing.B) {
	const batch = 1000
	for _, impl := range chainImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			w := openWriter(b, f, impl)
			defer func() { b.StopTimer(); w.close() }() // the close is not timed
			var bankKeys [][]byte
			for _, k := range f.present {
				if f.stores[k.store] == "bank" {
					bankKeys = append(bankKeys, k.key)
				}
			}
			values := make([][]byte, 64)
			for i := range values {
				values[i] = []byte(fmt.Sprintf("\x0a\x05uatom\x12\x20%032d-value-%d", i*7919, i))
			}
			pairs := make([]wal.KVPair, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				key := bankKeys[(i*7)%len(bankKeys)]
				if i%4 == 3 {
					key = []byte(fmt.Sprintf("\x02\x14new-account-%012d-uatom", i))
				}
				pairs = append(pairs, wal.KVPair{Key: key, Value: values[i%len(values)]})
				if len(pairs) == batch || i == b.N-1 {
					b.StopTimer()
					in := w.prepare([]wal.ChangeSet{{Name: "bank", Pairs: pairs}})
					b.StartTimer()
					w.apply(in)
					w.commit()
					pairs = make([]wal.KVPair, 0, batch) // the databases retain the pairs
				}
			}
		})
	}
}

// BenchmarkSync: one op is one whole workload block (all stores) applied
// and committed, continuing the fixture's chain; updates/s is reported.
func BenchmarkSync(b *testing.B) {
	for _, impl := range chainImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			w := openWriter(b, f, impl)
			defer func() { b.StopTimer(); w.close() }() // the close is not timed
			b.ReportAllocs()
			b.ResetTimer()
			var pairs int
			var busy time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				css := f.gen.Block(f.blocks + 1 + int64(i))
				for _, cs := range css {
					pairs += len(cs.Pairs)
				}
				in := w.prepare(css)
				b.StartTimer()
				t := time.Now()
				w.apply(in)
				w.commit()
				busy += time.Since(t)
			}
			b.ReportMetric(float64(pairs)/busy.Seconds(), "updates/s")
		})
	}
}

// BenchmarkOpen: one op opens the fixture directory, loads the last
// version (the memiavls replay the log since their snapshot) and closes.
func BenchmarkOpen(b *testing.B) {
	for _, impl := range chainImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			dir := f.dir(impl)
			if impl == implIAVLFast || impl == implIAVLNoFast {
				dir = f.freshCopy(b, impl) // goleveldb locks the directory the readers hold
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				switch impl {
				case implOurs:
					db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1})
					if err != nil {
						b.Fatal(err)
					}
					if db.Version() != f.blocks {
						b.Fatalf("opened at %d", db.Version())
					}
					db.Close()
				case implRef:
					opts := refOptions(false, nil)
					opts.ReadOnly = true
					db, err := refmemiavl.Load(dir, opts)
					if err != nil {
						b.Fatal(err)
					}
					if db.Version() != f.blocks {
						b.Fatalf("opened at %d", db.Version())
					}
					db.Close()
				default:
					st, err := openIAVL(dir, f.stores, impl == implIAVLFast)
					if err != nil {
						b.Fatal(err)
					}
					st.close()
				}
			}
			if impl == implOurs || impl == implRef {
				b.ReportMetric(float64(f.blocks-f.snapAt), "replayed-versions")
			}
		})
	}
}

// BenchmarkRewriteSnapshot: one op is the database's synchronous rewrite
// (the offline rewrite of TestSyncComparison) of the chain fixture, opened
// from a fresh copy of its directory: every store's snapshot written (ours:
// in parallel, fsynced in one round) and switched to. The copy, the open
// with its log replay (and ours' check of the opened snapshot), a
// collection of the heap and the close are not timed, as in
// TestSyncComparison. cpu-ms/op is the process's processor time (user and
// system) during the op; the op's goroutines carry the profile label
// phase=rewrite (go tool pprof -tagfocus phase=rewrite).
func BenchmarkRewriteSnapshot(b *testing.B) {
	for _, impl := range []string{implOurs, implRef} {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := f.freshCopy(b, impl)
				var rewrite func() error
				var closeDB func() error
				switch impl {
				case implOurs:
					db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
					if err != nil {
						b.Fatal(err)
					}
					// as in TestSyncComparison: the open's check of the
					// snapshot files ends before the rewrite is timed
					if err := db.WaitOpenCheck(context.Background()); err != nil {
						b.Fatal(err)
					}
					rewrite = func() error { return db.RewriteSnapshot(context.Background()) }
					closeDB = db.Close
				case implRef:
					db, err := refmemiavl.Load(dir, refOptions(false, nil))
					if err != nil {
						b.Fatal(err)
					}
					rewrite = func() error {
						if err := db.RewriteSnapshot(); err != nil {
							return err
						}
						return db.Reload()
					}
					closeDB = db.Close
				}
				runtime.GC() // as in TestSyncComparison: from the live heap
				cpu0 := processCPU()
				b.StartTimer()
				var err error
				// labelled for profiles: -tagfocus phase=rewrite
				pprof.Do(context.Background(), pprof.Labels("phase", "rewrite"), func(context.Context) { err = rewrite() })
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += processCPU() - cpu0
				if err := closeDB(); err != nil {
					b.Fatal(err)
				}
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// processCPU is the processor time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRewrite: one op writes a snapshot of the last version of every
// store into a new directory (the snapshot rewrite of the memiavls; iavl
// has none); MB/s of snapshot written is reported.
func BenchmarkRewrite(b *testing.B) {
	for _, impl := range []string{implOurs, implRef} {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getChain(b, impl)
			dst := b.TempDir()
			var bytes int64
			b.ReportAllocs()
			switch impl {
			case implOurs:
				db, err := multitree.Open(f.dir(impl), multitree.Options{ReadOnly: true, SnapshotInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				view, err := db.View()
				if err != nil {
					b.Fatal(err)
				}
				defer view.Release()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dir := filepath.Join(dst, fmt.Sprint(i))
					if err := os.MkdirAll(dir, 0o755); err != nil {
						b.Fatal(err)
					}
					for _, name := range f.stores {
						if err := view.Tree(name).WriteSnapshot(context.Background(), filepath.Join(dir, name)); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					bytes += dirBytes(dir)
					os.RemoveAll(dir)
					b.StartTimer()
				}
			case implRef:
				opts := refOptions(false, nil)
				opts.ReadOnly = true
				db, err := refmemiavl.Load(f.dir(impl), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dir := filepath.Join(dst, fmt.Sprint(i))
					for _, name := range f.stores {
						if err := db.TreeByName(name).WriteSnapshot(filepath.Join(dir, name)); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					bytes += dirBytes(dir)
					os.RemoveAll(dir)
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(bytes)/1e6/b.Elapsed().Seconds(), "MB/s")
		})
	}
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
