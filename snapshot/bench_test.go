package snapshot

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.QuickByDefault() // a plain go test runs as one with -short
	code := m.Run()
	if benchRoot != "" {
		_ = os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

// benchRoot holds the benchmark fixtures of this process, removed by TestMain.
var benchRoot string

const (
	benchLeaves   = 1_000_000
	benchValueLen = 300
	benchSeed     = 0x5eed
)

var bigFixture struct {
	once sync.Once
	dir  string
	err  error
}

// openBigFixture returns the 1,000,000-leaf snapshot (keys of 32 to 56
// bytes, 300-byte values), written once per process.
func openBigFixture(b *testing.B) *Snapshot {
	b.Helper()
	bigFixture.once.Do(func() {
		if benchRoot == "" {
			if benchRoot, bigFixture.err = os.MkdirTemp("", "snapshot-bench-"); bigFixture.err != nil {
				return
			}
		}
		dir := filepath.Join(benchRoot, "big")
		w, err := NewWriter(dir, 100)
		if err != nil {
			bigFixture.err = err
			return
		}
		defer w.Abort()
		var kbuf, vbuf []byte
		g := &treeGen{
			r: rand.New(rand.NewSource(benchSeed)),
			kv: func(i int) ([]byte, []byte) {
				kbuf, vbuf = bigKV(benchSeed, i, benchLeaves, benchValueLen, kbuf, vbuf)
				return kbuf, vbuf
			},
			treeVersion: 100,
			sink:        w,
		}
		if _, err := g.run(benchLeaves); err != nil {
			bigFixture.err = err
			return
		}
		if bigFixture.err = w.Finish(); bigFixture.err == nil {
			bigFixture.dir = dir
		}
	})
	if bigFixture.err != nil {
		b.Fatal(bigFixture.err)
	}
	s, err := Open(bigFixture.dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkSearch looks up random keys among the 1,000,000 leaves, keys
// that exist and keys that fall just after one.
func BenchmarkSearch(b *testing.B) {
	s := openBigFixture(b)
	r := rand.New(rand.NewSource(1))
	const nProbes = 1 << 14
	present := make([][]byte, nProbes)
	absent := make([][]byte, nProbes)
	for i := range present {
		k, _ := bigKV(benchSeed, r.Intn(benchLeaves), benchLeaves, 0, nil, nil)
		present[i] = k
		absent[i] = append(append([]byte{}, k...), 0)
	}
	for _, bc := range []struct {
		name   string
		probes [][]byte
		found  bool
	}{{"present", present, true}, {"absent", absent, false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, found, err := s.Search(bc.probes[i&(nProbes-1)], 0, benchLeaves)
				if err != nil || found != bc.found {
					b.Fatalf("Search: %v %v", found, err)
				}
			}
		})
	}
}

// BenchmarkIterate reads the leaves of the 1,000,000-leaf snapshot in key
// order, touching the last byte of each key and value; one op is one leaf.
func BenchmarkIterate(b *testing.B) {
	s := openBigFixture(b)
	b.ReportAllocs()
	b.ResetTimer()
	var sum byte
	for i := 0; i < b.N; i++ {
		k, v, err := s.LeafKV(uint64(i % benchLeaves))
		if err != nil {
			b.Fatal(err)
		}
		sum += k[len(k)-1] + v[len(v)-1]
	}
	benchSink = sum
}

// benchSink keeps benchmark results alive.
var benchSink byte

// recordedNode is one node of a tree recorded for BenchmarkWrite.
type recordedNode struct {
	leaf       bool
	key, value []byte
	height     uint8
	size       int64
	version    int64
	hash       [HashSize]byte
}

type recorder struct{ nodes []recordedNode }

func (r *recorder) AddLeaf(key, value []byte, version int64, hash []byte) error {
	n := recordedNode{leaf: true, key: append([]byte{}, key...), value: append([]byte{}, value...), version: version}
	copy(n.hash[:], hash)
	r.nodes = append(r.nodes, n)
	return nil
}

func (r *recorder) AddBranch(height uint8, size int64, version int64, hash []byte) error {
	n := recordedNode{height: height, size: size, version: version}
	copy(n.hash[:], hash)
	r.nodes = append(r.nodes, n)
	return nil
}

// BenchmarkWrite streams a recorded 100,000-leaf tree (keys of 32 to 56
// bytes, 300-byte values) into a Writer, Finish and its fsyncs included.
// MB/s counts the bytes of the four files.
func BenchmarkWrite(b *testing.B) {
	const n = 100_000
	rec := &recorder{}
	var kbuf, vbuf []byte
	g := &treeGen{
		r: rand.New(rand.NewSource(1)),
		kv: func(i int) ([]byte, []byte) {
			kbuf, vbuf = bigKV(benchSeed, i, n, benchValueLen, kbuf, vbuf)
			return kbuf, vbuf
		},
		treeVersion: 100,
		sink:        rec,
	}
	if _, err := g.run(n); err != nil {
		b.Fatal(err)
	}
	size := int64(MetaSize + (2*n-1)*RecordSize)
	for _, nd := range rec.nodes {
		size += int64(len(nd.key) + len(nd.value))
	}
	parent := b.TempDir()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(parent, fmt.Sprint(i))
		w, err := NewWriter(dir, 100)
		if err != nil {
			b.Fatal(err)
		}
		for j := range rec.nodes {
			nd := &rec.nodes[j]
			if nd.leaf {
				err = w.AddLeaf(nd.key, nd.value, nd.version, nd.hash[:])
			} else {
				err = w.AddBranch(nd.height, nd.size, nd.version, nd.hash[:])
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkVerify checks the whole 1,000,000-leaf snapshot; MB/s counts the
// bytes of its files.
func BenchmarkVerify(b *testing.B) {
	s := openBigFixture(b)
	b.SetBytes(int64(MetaSize + len(s.leaves) + len(s.branches) + len(s.kvs)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}
