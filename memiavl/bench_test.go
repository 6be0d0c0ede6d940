package memiavl_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cosmos/iavl"
	"github.com/tidwall/btree"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

var benchKeys = flag.Int("memiavl.benchkeys", 1_000_000, "keys in the trees of the tree benchmarks")

// benchData is a deterministic key set shared by every contender: keys of 32
// to 56 bytes with a store-like prefix, values of 100 to 300 bytes.
type benchData struct {
	keys   [][]byte
	values [][]byte
	absent [][]byte
}

var (
	benchOnce sync.Once
	bench     benchData
)

func benchKey(r *rand.Rand) []byte {
	k := make([]byte, 32+r.Intn(25))
	k[0] = byte(r.Intn(4))
	r.Read(k[1:])
	return k
}

func getBenchData() *benchData {
	benchOnce.Do(func() {
		r := rand.New(rand.NewSource(42))
		n := *benchKeys
		bench.keys = make([][]byte, n)
		bench.values = make([][]byte, n)
		for i := range bench.keys {
			bench.keys[i] = benchKey(r)
			bench.values[i] = make([]byte, 100+r.Intn(200))
			r.Read(bench.values[i])
		}
		for i := 0; i < 10000; i++ {
			bench.absent = append(bench.absent, benchKey(r))
		}
	})
	return &bench
}

var (
	oursOnce sync.Once
	oursTree *memiavl.Tree
	iavlOnce sync.Once
	iavlTree *iavl.MutableTree
	mapOnce  sync.Once
	btreeMap *btree.Map[string, []byte]
)

func loadOurs(b *testing.B) *memiavl.Tree {
	oursOnce.Do(func() {
		d := getBenchData()
		oursTree, _ = memiavl.New(memiavl.Options{})
		for i := range d.keys {
			if _, err := oursTree.Set(d.keys[i], d.values[i]); err != nil {
				b.Fatal(err)
			}
			if i%10000 == 9999 {
				if _, _, err := oursTree.SaveVersion(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, _, err := oursTree.SaveVersion(); err != nil {
			b.Fatal(err)
		}
	})
	return oursTree
}

func loadIAVL(b *testing.B) *iavl.MutableTree {
	iavlOnce.Do(func() {
		d := getBenchData()
		iavlTree = newIAVL(b, 0)
		for i := range d.keys {
			if _, err := iavlTree.Set(d.keys[i], d.values[i]); err != nil {
				b.Fatal(err)
			}
			if i%10000 == 9999 {
				if _, _, err := iavlTree.SaveVersion(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, _, err := iavlTree.SaveVersion(); err != nil {
			b.Fatal(err)
		}
	})
	return iavlTree
}

func loadMap() *btree.Map[string, []byte] {
	mapOnce.Do(func() {
		d := getBenchData()
		btreeMap = new(btree.Map[string, []byte])
		for i := range d.keys {
			btreeMap.Set(string(d.keys[i]), d.values[i])
		}
	})
	return btreeMap
}

// BenchmarkTreeGet reads random present keys.
func BenchmarkTreeGet(b *testing.B) {
	d := getBenchData()
	order := rand.New(rand.NewSource(1)).Perm(len(d.keys))
	b.Run("impl=memiavl", func(b *testing.B) {
		tr := loadOurs(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if v, _ := tr.GetZeroCopy(d.keys[order[i%len(order)]]); v == nil {
				b.Fatal("missing key")
			}
		}
	})
	b.Run("impl=iavl", func(b *testing.B) {
		tr := loadIAVL(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if v, _ := tr.Get(d.keys[order[i%len(order)]]); v == nil {
				b.Fatal("missing key")
			}
		}
	})
	b.Run("impl=btree", func(b *testing.B) {
		m := loadMap()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, ok := m.Get(string(d.keys[order[i%len(order)]])); !ok {
				b.Fatal("missing key")
			}
		}
	})
}

const benchBatch = 1000

// batchOps returns the keys and values of the i-th write batch: three in four
// update present keys, one in four insert new ones.
func batchOps(i int, d *benchData) ([][]byte, [][]byte) {
	r := rand.New(rand.NewSource(int64(i)))
	keys := make([][]byte, benchBatch)
	vals := make([][]byte, benchBatch)
	for j := range keys {
		if j%4 == 0 {
			k := benchKey(r)
			binary.BigEndian.PutUint32(k[len(k)-4:], uint32(i))
			keys[j] = k
		} else {
			keys[j] = d.keys[r.Intn(len(d.keys))]
		}
		vals[j] = d.values[r.Intn(len(d.values))]
	}
	return keys, vals
}

// BenchmarkTreeSetCommit applies batches of 1,000 sets and saves a version
// after each batch; one op is one batch.
func BenchmarkTreeSetCommit(b *testing.B) {
	d := getBenchData()
	batches := make([][2][][]byte, 64)
	for i := range batches {
		k, v := batchOps(i, d)
		batches[i] = [2][][]byte{k, v}
	}
	b.Run("impl=memiavl", func(b *testing.B) {
		tr := loadOurs(b).Copy()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			bt := batches[i%len(batches)]
			for j := range bt[0] {
				if _, err := tr.Set(bt[0][j], bt[1][j]); err != nil {
					b.Fatal(err)
				}
			}
			if _, _, err := tr.SaveVersion(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/set")
	})
	b.Run("impl=iavl", func(b *testing.B) {
		tr := loadIAVL(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			bt := batches[i%len(batches)]
			for j := range bt[0] {
				if _, err := tr.Set(bt[0][j], bt[1][j]); err != nil {
					b.Fatal(err)
				}
			}
			if _, _, err := tr.SaveVersion(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/set")
	})
	b.Run("impl=btree", func(b *testing.B) {
		m := loadMap().Copy()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			bt := batches[i%len(batches)]
			for j := range bt[0] {
				m.Set(string(bt[0][j]), bt[1][j])
			}
			m = m.Copy() // the equivalent of keeping the committed version readable
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/set")
	})
}

// BenchmarkTreeWriteSnapshot writes the snapshot of an in-memory tree (no
// node read from a snapshot): the walk over the nodes, the data files and
// the lookup table, fsyncs included.
func BenchmarkTreeWriteSnapshot(b *testing.B) {
	tr := loadOurs(b)
	dir := b.TempDir()
	for _, split := range []bool{false, true} {
		b.Run(fmt.Sprintf("split=%v", split), func(b *testing.B) {
			var opts []memiavl.WriteOption
			if split {
				opts = append(opts, memiavl.WithSplit())
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sdir := filepath.Join(dir, strconv.Itoa(i))
				if err := tr.Copy().WriteSnapshot(context.Background(), sdir, opts...); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(sdir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tr.Size()), "ns/key")
		})
	}
}

// BenchmarkTreeWriteSnapshotCold writes the snapshot of a tree read from
// its snapshot with 1% of its keys changed since, as a rewrite of a large
// state that changed little: unchanged subtrees copied in bulk (bulk=on)
// or node by node (bulk=off). fsyncs included.
func BenchmarkTreeWriteSnapshotCold(b *testing.B) {
	d := getBenchData()
	dir := b.TempDir()
	if err := loadOurs(b).Copy().WriteSnapshot(context.Background(), filepath.Join(dir, "base")); err != nil {
		b.Fatal(err)
	}
	tr := openSnapshotTree(b, filepath.Join(dir, "base"))
	r := rand.New(rand.NewSource(7))
	for i := 0; i < len(d.keys)/100; i++ {
		if _, err := tr.Set(d.keys[r.Intn(len(d.keys))], []byte(fmt.Sprint(i))); err != nil {
			b.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		b.Fatal(err)
	}
	for _, bulk := range []bool{true, false} {
		b.Run(fmt.Sprintf("bulk=%v", bulk), func(b *testing.B) {
			defer memiavl.SetBulkCopy(bulk, 1<<16)()
			b.ReportAllocs()
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				sdir := filepath.Join(dir, fmt.Sprint(bulk, i))
				c0 := processCPU()
				if err := tr.Copy().WriteSnapshot(context.Background(), sdir); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += processCPU() - c0
				if err := os.RemoveAll(sdir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tr.Size()), "ns/key")
			// the processor time, user and system, apart from the
			// waits on the disk that dominate the wall time
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// openSnapshotTree opens the snapshot in dir, closed when the test or
// benchmark ends, and returns the tree on it.
func openSnapshotTree(b testing.TB, dir string) *memiavl.Tree {
	s, err := snapshot.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

// processCPU returns the user and system time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRebase rebases a tree onto a snapshot written 10 versions of
// 1,000 updates earlier, the first catch-up round of a background rewrite:
// every node changed since is copied once.
func BenchmarkRebase(b *testing.B) {
	d := getBenchData()
	tr := loadOurs(b).Copy()
	dir := b.TempDir()
	m, err := tr.Copy().WriteSnapshotMapped(context.Background(), filepath.Join(dir, "s"))
	if err != nil {
		b.Fatal(err)
	}
	base := openSnapshotTree(b, filepath.Join(dir, "s"))
	for v := 0; v < 10; v++ {
		keys, values := batchOps(v, d)
		for j := range keys {
			if _, err := tr.Set(keys[j], values[j]); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rb, err := memiavl.NewRebaser(base, m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rb.Rebase(context.Background(), tr.Copy()); err != nil {
			b.Fatal(err)
		}
	}
}
