package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"
	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"
	"github.com/tidwall/btree"

	"github.com/seed-6dfbb450/memiavl/internal/sysstat"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// Snapshot read benchmarks: one tree of the same keys and values (default
// 1,000,000 keys of 32 to 56 bytes, values of 200 to 400 bytes;
// MEMIAVL_BENCH_SNAPSHOT_KEYS overrides, 2,000 with -short) read through:
//
//	ours         memiavl.NewFromSnapshot + GetZeroCopy (the zero-allocation view API)
//	refmemiavl   the reference memiavl's NewFromSnapshot on its own snapshot, zero-copy
//	iavl-fast    cosmos/iavl v1 with fast nodes on goleveldb, reopened after the write
//	btree        github.com/tidwall/btree in memory (a lower bound)
//
// BenchmarkSnapshotGet reads random present and absent keys,
// BenchmarkSnapshotIterate iterates the whole tree (keys/s), and
// BenchmarkSnapshotWrite measures the snapshot writers (MB/s, peak heap and
// peak RSS growth during the write).

type kvItem struct{ key, value []byte }

type snapFixture struct {
	n       int
	keys    [][]byte // random order
	values  [][]byte
	absent  [][]byte
	dataLen int64 // bytes of keys and values
	root    string

	once map[string]*sync.Once
	errs map[string]error

	ours     *memiavl.Tree
	oursSnap *snapshot.Snapshot
	ref      *refmemiavl.Tree
	iavl     *iavl.MutableTree
	bt       *btree.BTreeG[kvItem]
}

var (
	snapOnce sync.Once
	snapFix  *snapFixture
	snapMu   sync.Mutex
)

func snapshotKeys() int {
	if testing.Short() {
		return int(envInt("MEMIAVL_BENCH_SNAPSHOT_KEYS", 2000))
	}
	return int(envInt("MEMIAVL_BENCH_SNAPSHOT_KEYS", 1_000_000))
}

func newSnapFixture() *snapFixture {
	n := snapshotKeys()
	f := &snapFixture{n: n, root: filepath.Join(tempRoot(), "snapshot"), once: map[string]*sync.Once{}, errs: map[string]error{}}
	r := rand.New(rand.NewPCG(11, 12))
	seen := make(map[string]struct{}, n)
	randKey := func() []byte {
		k := make([]byte, 32+r.IntN(25))
		k[0] = byte(1 + r.IntN(8)) // a store-like prefix byte
		for i := 1; i < len(k); i++ {
			k[i] = byte(r.Uint32())
		}
		return k
	}
	for len(f.keys) < n {
		k := randKey()
		if _, dup := seen[string(k)]; dup {
			continue
		}
		seen[string(k)] = struct{}{}
		v := make([]byte, 200+r.IntN(201))
		for i := range v {
			v[i] = byte(r.Uint32())
		}
		f.keys = append(f.keys, k)
		f.values = append(f.values, v)
		f.dataLen += int64(len(k) + len(v))
	}
	for len(f.absent) < min(n, 100_000) {
		k := randKey()
		if _, dup := seen[string(k)]; !dup {
			f.absent = append(f.absent, k)
		}
	}
	return f
}

func getSnap(b *testing.B, impl string) *snapFixture {
	b.Helper()
	snapOnce.Do(func() { snapFix = newSnapFixture() })
	f := snapFix
	snapMu.Lock()
	once := f.once[impl]
	if once == nil {
		once = new(sync.Once)
		f.once[impl] = once
	}
	snapMu.Unlock()
	once.Do(func() {
		start := time.Now()
		err := f.build(impl)
		snapMu.Lock()
		f.errs[impl] = err
		snapMu.Unlock()
		b.Logf("built the %d-key %s tree in %.1fs", f.n, impl, time.Since(start).Seconds())
		if err == nil && (impl == implOurs || impl == implRef) {
			// touch every page of the memory maps once, as a node that
			// has been serving reads has: the timed reads then measure
			// lookups, not first-touch page faults
			start = time.Now()
			get := f.getter(impl)
			for _, k := range f.keys {
				get(k)
			}
			b.Logf("warmed the %s maps in %.1fs", impl, time.Since(start).Seconds())
		}
	})
	snapMu.Lock()
	err := f.errs[impl]
	snapMu.Unlock()
	if err != nil {
		b.Fatalf("building the %s snapshot fixture: %v", impl, err)
	}
	return f
}

func (f *snapFixture) build(impl string) error {
	dir := filepath.Join(f.root, impl)
	if err := os.MkdirAll(f.root, 0o755); err != nil {
		return err
	}
	switch impl {
	case implOurs:
		t, err := memiavl.New(memiavl.Options{})
		if err != nil {
			return err
		}
		for i, k := range f.keys {
			if _, err := t.Set(k, f.values[i]); err != nil {
				return err
			}
		}
		if _, _, err := t.SaveVersion(); err != nil {
			return err
		}
		if err := t.WriteSnapshot(context.Background(), dir); err != nil {
			return err
		}
		s, err := snapshot.Open(dir)
		if err != nil {
			return err
		}
		f.oursSnap = s
		f.ours, err = memiavl.NewFromSnapshot(s, memiavl.Options{})
		return err
	case implRef:
		t := refmemiavl.New(0)
		pairs := make([]*refmemiavl.KVPair, len(f.keys))
		for i, k := range f.keys {
			pairs[i] = &refmemiavl.KVPair{Key: k, Value: f.values[i]}
		}
		t.ApplyChangeSet(refmemiavl.ChangeSet{Pairs: pairs})
		if _, _, err := t.SaveVersion(true); err != nil {
			return err
		}
		if err := t.WriteSnapshot(dir); err != nil {
			return err
		}
		s, err := refmemiavl.OpenSnapshot(dir)
		if err != nil {
			return err
		}
		f.ref = refmemiavl.NewFromSnapshot(s, true, 0)
		return nil
	case implIAVLFast:
		db, err := dbm.NewGoLevelDB("iavl", dir, nil)
		if err != nil {
			return err
		}
		t := iavl.NewMutableTree(iavldb.NewWrapper(db), iavlCacheSize, false, iavl.NewNopLogger())
		for i, k := range f.keys {
			if _, err := t.Set(k, f.values[i]); err != nil {
				return err
			}
		}
		if _, _, err := t.SaveVersion(); err != nil {
			return err
		}
		if err := db.Close(); err != nil {
			return err
		}
		// reopen, as a restarted node reads it
		if db, err = dbm.NewGoLevelDB("iavl", dir, nil); err != nil {
			return err
		}
		t = iavl.NewMutableTree(iavldb.NewWrapper(db), iavlCacheSize, false, iavl.NewNopLogger())
		if _, err := t.Load(); err != nil {
			return err
		}
		f.iavl = t
		return nil
	case implBTree:
		f.bt = btree.NewBTreeGOptions(func(a, b kvItem) bool { return bytes.Compare(a.key, b.key) < 0 }, btree.Options{NoLocks: true})
		for i, k := range f.keys {
			f.bt.Set(kvItem{k, f.values[i]})
		}
		return nil
	}
	return fmt.Errorf("unknown implementation %q", impl)
}

var snapImpls = []string{implOurs, implRef, implIAVLFast, implBTree}

func (f *snapFixture) getter(impl string) func([]byte) []byte {
	switch impl {
	case implOurs:
		t := f.ours
		return func(k []byte) []byte { v, _ := t.GetZeroCopy(k); return v }
	case implRef:
		return f.ref.Get
	case implIAVLFast:
		return func(k []byte) []byte { v, _ := f.iavl.Get(k); return v }
	case implBTree:
		return func(k []byte) []byte {
			it, ok := f.bt.Get(kvItem{key: k})
			if !ok {
				return nil
			}
			return it.value
		}
	}
	panic(impl)
}

func BenchmarkSnapshotGet(b *testing.B) {
	for _, impl := range snapImpls {
		for _, present := range []bool{true, false} {
			name := "impl=" + impl + "/keys=absent"
			if present {
				name = "impl=" + impl + "/keys=present"
			}
			b.Run(name, func(b *testing.B) {
				f := getSnap(b, impl)
				get := f.getter(impl)
				keys := f.absent
				if present {
					keys = f.keys
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					v := get(keys[i%len(keys)])
					if (v != nil) != present {
						b.Fatalf("%s: key %x: got %d bytes, present %v", impl, keys[i%len(keys)], len(v), present)
					}
				}
			})
		}
	}
}

// readKV reads the first and last byte of a key and a value, as a caller
// of an iterator reads what it is handed.
func readKV(k, v []byte) int {
	n := 0
	if len(k) > 0 {
		n += int(k[0]) + int(k[len(k)-1])
	}
	if len(v) > 0 {
		n += int(v[0]) + int(v[len(v)-1])
	}
	return n
}

// BenchmarkSnapshotIterate: one op iterates every pair of the tree,
// reading the first and last byte of each key and value (readKV).
func BenchmarkSnapshotIterate(b *testing.B) {
	for _, impl := range snapImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getSnap(b, impl)
			b.ReportAllocs()
			b.ResetTimer()
			total, sink := 0, 0
			for i := 0; i < b.N; i++ {
				n := 0
				switch impl {
				case implOurs:
					it := f.ours.Iterator(nil, nil, true)
					for ; it.Valid(); it.Next() {
						sink += readKV(it.Key(), it.Value())
						n++
					}
					it.Close()
				case implRef:
					it := f.ref.Iterator(nil, nil, true)
					for ; it.Valid(); it.Next() {
						sink += readKV(it.Key(), it.Value())
						n++
					}
					it.Close()
				case implIAVLFast:
					it, err := f.iavl.Iterator(nil, nil, true)
					if err != nil {
						b.Fatal(err)
					}
					for ; it.Valid(); it.Next() {
						sink += readKV(it.Key(), it.Value())
						n++
					}
					it.Close()
				case implBTree:
					f.bt.Scan(func(kv kvItem) bool {
						sink += readKV(kv.key, kv.value)
						n++
						return true
					})
				}
				if n != f.n {
					b.Fatalf("%s iterated %d keys, want %d", impl, n, f.n)
				}
				total += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "keys/s")
			if sink == -1 {
				b.Log(sink) // keeps the reads
			}
		})
	}
}

// BenchmarkSnapshotWrite: one op writes the whole tree, read from its
// snapshot, into a new snapshot directory. Reported: MB/s of snapshot
// written, the peak growth of the Go heap during the write (sampled every
// millisecond) and of the process's resident set (VmHWM after a reset).
func BenchmarkSnapshotWrite(b *testing.B) {
	for _, impl := range []string{implOurs, implRef} {
		b.Run("impl="+impl, func(b *testing.B) {
			f := getSnap(b, impl)
			dst := b.TempDir()
			var written int64
			var peakHeap, peakRSS int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(dst, strconv.Itoa(i))
				b.StopTimer()
				runtime.GC()
				stop := sampleHeap()
				rss0 := resetPeakRSS()
				b.StartTimer()
				var err error
				if impl == implOurs {
					err = f.ours.WriteSnapshot(context.Background(), dir)
				} else {
					err = f.ref.WriteSnapshot(dir)
				}
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				peakHeap = max(peakHeap, stop())
				if rss0 > 0 {
					peakRSS = max(peakRSS, vmHWM()-rss0)
				}
				written += dirBytes(dir)
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(float64(peakHeap)/1e6, "peak-heap-MB")
			b.ReportMetric(float64(peakRSS)/1e6, "peak-rss-growth-MB")
		})
	}
}

// sampleHeap samples the live heap every millisecond until the returned
// function is called, which returns the peak growth over the start.
func sampleHeap() func() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(s); return int64(s[0].Value.Uint64()) }
	base := read()
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		local := []metrics.Sample{{Name: s[0].Name}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				metrics.Read(local)
				if v := int64(local[0].Value.Uint64()) - base; v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		if v := read() - base; v > peak.Load() {
			peak.Store(v)
		}
		return peak.Load()
	}
}

// vmHWM returns the process's peak resident set size (bytes), 0 if unknown.
func vmHWM() int64 { return sysstat.ProcStatus("VmHWM:") }

// resetPeakRSS resets VmHWM to the current RSS (Linux: "5" into
// clear_refs) and returns it, 0 if the reset is not possible.
func resetPeakRSS() int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0
	}
	return sysstat.ProcStatus("VmRSS:")
}
