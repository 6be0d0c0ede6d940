package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// nodeSink consumes a tree's nodes in post-order; *Writer is one.
type nodeSink interface {
	AddLeaf(key, value []byte, version int64, hash []byte) error
	AddBranch(height uint8, size int64, version int64, hash []byte) error
}

// genNode is a subtree produced by treeGen.
type genNode struct {
	height  uint8
	size    int64
	version int64
	hash    [HashSize]byte
}

// treeGen builds an IAVL-shaped tree over n sorted keys and streams it in
// post-order into a sink, computing heights, sizes and hashes with nodehash.
// With random set the shape is a random AVL tree (leaning trees included);
// otherwise every split is as even as possible. Versions are drawn from r in
// [1, treeVersion], a branch never older than its children.
type treeGen struct {
	r           *rand.Rand
	kv          func(i int) (key, value []byte)
	treeVersion int64
	random      bool
	sink        nodeSink
	err         error
}

var minAVLLeaves = func() [64]int64 {
	var m [64]int64
	m[0], m[1] = 1, 2
	for h := 2; h < len(m); h++ {
		m[h] = m[h-1] + m[h-2]
		if m[h] > 1<<50 {
			m[h] = 1 << 50
		}
	}
	return m
}()

func maxAVLLeaves(h int) int64 {
	if h >= 50 {
		return 1 << 50
	}
	return 1 << h
}

// run streams a tree of n leaves into g.sink and returns its root (nil for
// an empty tree) or the sink's first error.
func (g *treeGen) run(n int) (*genNode, error) {
	if n == 0 {
		return nil, nil
	}
	h := -1
	if g.random {
		var hs []int
		for h := 0; h < len(minAVLLeaves); h++ {
			if minAVLLeaves[h] <= int64(n) && int64(n) <= maxAVLLeaves(h) {
				hs = append(hs, h)
			}
		}
		h = hs[g.r.Intn(len(hs))]
	}
	root := g.build(0, n, h)
	return &root, g.err
}

func (g *treeGen) build(first, n, h int) genNode {
	if g.err != nil {
		return genNode{}
	}
	if n == 1 {
		key, value := g.kv(first)
		nd := genNode{size: 1, version: 1 + g.r.Int63n(g.treeVersion)}
		nodehash.Leaf(nd.hash[:0], key, value, nd.version)
		if err := g.sink.AddLeaf(key, value, nd.version, nd.hash[:]); err != nil {
			g.err = err
		}
		return nd
	}
	var a, hl, hr int
	if !g.random {
		a, hl, hr = (n+1)/2, -1, -1
	} else {
		type option struct{ hl, hr, lo, hi int }
		var opts []option
		for _, c := range [][2]int{{h - 1, h - 1}, {h - 1, h - 2}, {h - 2, h - 1}} {
			if c[0] < 0 || c[1] < 0 {
				continue
			}
			lo := max(minAVLLeaves[c[0]], int64(n)-maxAVLLeaves(c[1]))
			hi := min(maxAVLLeaves(c[0]), int64(n)-minAVLLeaves[c[1]])
			if lo <= hi {
				opts = append(opts, option{c[0], c[1], int(lo), int(hi)})
			}
		}
		if len(opts) == 0 {
			panic(fmt.Sprintf("no AVL split of %d leaves at height %d", n, h))
		}
		o := opts[g.r.Intn(len(opts))]
		a, hl, hr = o.lo+g.r.Intn(o.hi-o.lo+1), o.hl, o.hr
	}
	l := g.build(first, a, hl)
	r := g.build(first+a, n-a, hr)
	if g.err != nil {
		return genNode{}
	}
	nd := genNode{height: max(l.height, r.height) + 1, size: l.size + r.size}
	mv := max(l.version, r.version)
	nd.version = mv + g.r.Int63n(g.treeVersion-mv+1)
	nodehash.Inner(nd.hash[:0], nd.height, nd.size, nd.version, l.hash[:], r.hash[:])
	if err := g.sink.AddBranch(nd.height, nd.size, nd.version, nd.hash[:]); err != nil {
		g.err = err
	}
	return nd
}

// sortedKVs returns n distinct sorted keys with values, from testutil's
// generator (keys share prefixes, so prefix ties are common).
func sortedKVs(r *rand.Rand, n int) (keys, values [][]byte) {
	gen := testutil.NewKeyGen(r)
	seen := make(map[string]bool, n)
	for len(keys) < n {
		k := gen.Key()
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	for range keys {
		values = append(values, gen.Value(64))
	}
	return keys, values
}

// writeTree writes a snapshot of the tree over keys into dir and returns the
// root hash.
func writeTree(t testing.TB, dir string, seed int64, version int64, random bool, keys, values [][]byte) []byte {
	t.Helper()
	w, g := newTreeWriter(t, dir, seed, version, random, keys, values)
	root, err := g.run(len(keys))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if root == nil {
		return nodehash.Empty()
	}
	return root.hash[:]
}

// writeAndOpen writes a tree as writeTree does into a new temporary
// directory and opens it, closed when the test ends.
func writeAndOpen(t testing.TB, seed int64, version int64, random bool, keys, values [][]byte) *Snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, seed, version, random, keys, values)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newTreeWriter returns a writer of a snapshot into dir, which the caller
// aborts at the test's end (a no-op after Finish), and a treeGen over keys
// streaming into it.
func newTreeWriter(t testing.TB, dir string, seed int64, version int64, random bool, keys, values [][]byte) (*Writer, *treeGen) {
	t.Helper()
	w, err := NewWriter(dir, version)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Abort() })
	return w, &treeGen{
		r:           rand.New(rand.NewSource(seed)),
		kv:          func(i int) ([]byte, []byte) { return keys[i], values[i] },
		treeVersion: version,
		random:      random,
		sink:        w,
	}
}

// checkSink compares the nodes a treeGen streams with a snapshot's records,
// recomputing first and key leaves with a stack.
type checkSink struct {
	s        *Snapshot
	leaf     uint64
	branch   uint64
	stack    [][2]uint64 // first leaf, size
	failures int
	t        testing.TB
}

func (c *checkSink) errorf(format string, args ...any) {
	c.t.Helper()
	c.failures++
	if c.failures < 10 {
		c.t.Errorf(format, args...)
	}
}

func (c *checkSink) AddLeaf(key, value []byte, version int64, hash []byte) error {
	i := c.leaf
	c.leaf++
	if i >= c.s.LeafCount() {
		return fmt.Errorf("leaf %d beyond %d leaves", i, c.s.LeafCount())
	}
	k, v, err := c.s.LeafKV(i)
	if err != nil {
		return err
	}
	if !bytes.Equal(k, key) || !bytes.Equal(v, value) {
		c.errorf("leaf %d: kv %x=%x, want %x=%x", i, k, v, key, value)
	}
	if k2, _ := c.s.LeafKey(i); !bytes.Equal(k2, key) {
		c.errorf("leaf %d: LeafKey %x, want %x", i, k2, key)
	}
	if v2, _ := c.s.LeafValue(i); !bytes.Equal(v2, value) {
		c.errorf("leaf %d: LeafValue %x, want %x", i, v2, value)
	}
	if c.s.LeafVersion(i) != version || !bytes.Equal(c.s.LeafHash(i), hash) {
		c.errorf("leaf %d: version %d hash %x, want %d %x", i, c.s.LeafVersion(i), c.s.LeafHash(i), version, hash)
	}
	c.stack = append(c.stack, [2]uint64{i, 1})
	return nil
}

func (c *checkSink) AddBranch(height uint8, size int64, version int64, hash []byte) error {
	i := c.branch
	c.branch++
	if i >= c.s.BranchCount() {
		return fmt.Errorf("branch %d beyond %d branches", i, c.s.BranchCount())
	}
	n := len(c.stack)
	l, r := c.stack[n-2], c.stack[n-1]
	c.stack = append(c.stack[:n-2], [2]uint64{l[0], l[1] + r[1]})
	if c.s.BranchHeight(i) != height || c.s.BranchSize(i) != size || c.s.BranchVersion(i) != version ||
		!bytes.Equal(c.s.BranchHash(i), hash) {
		c.errorf("branch %d: height %d size %d version %d hash %x, want %d %d %d %x", i,
			c.s.BranchHeight(i), c.s.BranchSize(i), c.s.BranchVersion(i), c.s.BranchHash(i), height, size, version, hash)
	}
	if c.s.BranchFirstLeaf(i) != l[0] || c.s.BranchKeyLeaf(i) != r[0] {
		c.errorf("branch %d: first leaf %d key leaf %d, want %d %d", i, c.s.BranchFirstLeaf(i), c.s.BranchKeyLeaf(i), l[0], r[0])
	}
	return nil
}

// checkNavigation walks the tree from the root with Left and Right and
// checks that it visits every leaf in order and every branch in post-order,
// with consistent first leaves, key leaves and branch keys.
func checkNavigation(t testing.TB, s *Snapshot) {
	t.Helper()
	var nextLeaf, nextBranch uint64
	var walk func(r Ref) (first, size uint64)
	walk = func(r Ref) (uint64, uint64) {
		if r.IsLeaf() {
			if r.Index() != nextLeaf {
				t.Fatalf("visited leaf %d, want %d", r.Index(), nextLeaf)
			}
			nextLeaf++
			return r.Index(), 1
		}
		i := r.Index()
		lr, err := s.Left(i)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := s.Right(i)
		if err != nil {
			t.Fatal(err)
		}
		lf, ls := walk(lr)
		rf, rs := walk(rr)
		if i != nextBranch {
			t.Fatalf("visited branch %d, want %d", i, nextBranch)
		}
		nextBranch++
		if s.BranchFirstLeaf(i) != lf || s.BranchKeyLeaf(i) != rf || uint64(s.BranchSize(i)) != ls+rs || lf+ls != rf {
			t.Fatalf("branch %d: first %d key %d size %d; children [%d,+%d) [%d,+%d)",
				i, s.BranchFirstLeaf(i), s.BranchKeyLeaf(i), s.BranchSize(i), lf, ls, rf, rs)
		}
		bk, err := s.BranchKey(i)
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := s.LeafKey(rf); !bytes.Equal(bk, k) {
			t.Fatalf("branch %d: key %x, want leaf %d key %x", i, bk, rf, k)
		}
		return lf, ls + rs
	}
	root, ok := s.Root()
	if !ok {
		if s.LeafCount() != 0 {
			t.Fatalf("no root with %d leaves", s.LeafCount())
		}
		return
	}
	if _, size := walk(root); size != s.LeafCount() {
		t.Fatalf("root covers %d leaves of %d", size, s.LeafCount())
	}
	if nextLeaf != s.LeafCount() || nextBranch != s.BranchCount() {
		t.Fatalf("visited %d leaves and %d branches of %d and %d", nextLeaf, nextBranch, s.LeafCount(), s.BranchCount())
	}
}

// checkSearch searches every key, its immediate successor (key + 0x00) and
// the empty key, over the whole range and over random sub-ranges.
func checkSearch(t testing.TB, s *Snapshot, r *rand.Rand) {
	t.Helper()
	n := s.LeafCount()
	key := func(i uint64) []byte {
		k, err := s.LeafKey(i)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	expect := func(probe []byte, lb uint64, found bool) {
		t.Helper()
		idx, ok, err := s.Search(probe, 0, n)
		if err != nil || idx != lb || ok != found {
			t.Fatalf("Search(%x) = %d %v %v, want %d %v", probe, idx, ok, err, lb, found)
		}
		lo := uint64(r.Int63n(int64(n) + 1))
		hi := lo + uint64(r.Int63n(int64(n-lo)+1))
		want := min(max(lb, lo), hi)
		idx, ok, err = s.Search(probe, lo, hi)
		wantFound := found && lo <= lb && lb < hi
		if err != nil || idx != want || ok != wantFound {
			t.Fatalf("Search(%x, %d, %d) = %d %v %v, want %d %v", probe, lo, hi, idx, ok, err, want, wantFound)
		}
		idx, v, ok, err := s.Lookup(probe)
		if err != nil || ok != found || (found && idx != lb) {
			t.Fatalf("Lookup(%x) = %d %v %v, want %d %v", probe, idx, ok, err, lb, found)
		}
		if found {
			if want, err := s.LeafValue(lb); err != nil || !bytes.Equal(v, want) {
				t.Fatalf("Lookup(%x) value %x, leaf %d value %x %v", probe, v, lb, want, err)
			}
		}
	}
	if n == 0 {
		expect([]byte("a"), 0, false)
	} else {
		expect(nil, 0, len(key(0)) == 0)
	}
	succ := make([]byte, 0, 128)
	for i := uint64(0); i < n; i++ {
		k := key(i)
		expect(k, i, true)
		succ = append(append(succ[:0], k...), 0)
		expect(succ, i+1, i+1 < n && bytes.Equal(key(i+1), succ))
	}
	if _, _, err := s.Search(nil, 1, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Search with lo > hi: %v", err)
	}
	if _, _, err := s.Search(nil, 0, n+1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Search beyond the leaves: %v", err)
	}
}

// exercise calls every accessor over the whole snapshot, navigates from the
// root and searches, ignoring errors. On a corrupted snapshot it must not
// panic. It returns the first error seen.
func exercise(s *Snapshot) error {
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	_, _, _, _, _ = s.Version(), s.RootHash(), s.LeafCount(), s.BranchCount(), s.Dir()
	n := s.LeafCount()
	for i := uint64(0); i < n; i++ {
		k, err := s.LeafKey(i)
		note(err)
		_, err = s.LeafValue(i)
		note(err)
		_, _, err = s.LeafKV(i)
		note(err)
		_, _ = s.LeafVersion(i), s.LeafHash(i)
		_, _, err = s.Search(k, 0, n)
		note(err)
		_, _, err = s.Search(append(k[:len(k):len(k)], 0), i/2, n)
		note(err)
		_, _, _, err = s.Lookup(k)
		note(err)
		_, _, _, err = s.Lookup(append(k[:len(k):len(k)], 0))
		note(err)
	}
	for i := uint64(0); i < s.BranchCount(); i++ {
		_, _, _, _ = s.BranchHeight(i), s.BranchSize(i), s.BranchVersion(i), s.BranchHash(i)
		_, _ = s.BranchKeyLeaf(i), s.BranchFirstLeaf(i)
		_, err := s.BranchKey(i)
		note(err)
		_, err = s.Left(i)
		note(err)
		_, err = s.Right(i)
		note(err)
	}
	for _, probe := range [][]byte{nil, {0}, []byte("zzzzzzzzzzzz"), bytes.Repeat([]byte{0xff}, 9)} {
		_, _, err := s.Search(probe, 0, n)
		note(err)
		_, _, _, err = s.Lookup(probe)
		note(err)
	}
	// Navigate from the root. A corrupted file may make the branches a DAG,
	// so the walk has a budget.
	budget := 4*(n+s.BranchCount()) + 16
	var walk func(r Ref)
	walk = func(r Ref) {
		if budget == 0 {
			return
		}
		budget--
		if r.IsLeaf() {
			_, _, err := s.LeafKV(r.Index())
			note(err)
			return
		}
		i := r.Index()
		_, err := s.BranchKey(i)
		note(err)
		if l, err := s.Left(i); err == nil {
			walk(l)
		} else {
			note(err)
		}
		if rr, err := s.Right(i); err == nil {
			walk(rr)
		} else {
			note(err)
		}
	}
	if root, ok := s.Root(); ok {
		walk(root)
	}
	return first
}

// allFiles lists the files of a snapshot directory.
var allFiles = []string{FileMeta, FileLeaves, FileBranches, FileKVs, FileIndex, FileLookup}

// fuzzFiles is the order of the files in a FuzzOpen input.
var fuzzFiles = []string{FileMeta, FileLeaves, FileBranches, FileIndex, FileLookup, FileKVs}

// readDir returns the files of a snapshot directory.
func readDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range allFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if name == FileLookup && errors.Is(err, fs.ErrNotExist) {
			continue // format version 1
		}
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return files
}

// writeDir writes files into dir, creating it if needed.
func writeDir(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fixMeta rewrites the meta bytes so that the lengths and checksums of the
// data files match files, and the meta checksum matches; with counts it also
// derives the leaf and branch counts from the record files. A meta shorter
// than MetaSize is left alone.
func fixMeta(files map[string][]byte, fixData, fixCounts, fixCRC bool) {
	mb := files[FileMeta]
	if len(mb) != MetaSize {
		return
	}
	b := (*[MetaSize]byte)(mb)
	if fixCounts {
		leaves := uint64(len(files[FileLeaves]) / RecordSize)
		binary.LittleEndian.PutUint64(b[metaOffLeafCount:], leaves)
		binary.LittleEndian.PutUint64(b[metaOffBranchCount:], max(leaves, 1)-1)
	}
	if fixData {
		for i, name := range dataFileNames {
			off := metaOffFiles + i*metaFileEntrySize
			binary.LittleEndian.PutUint64(b[off:], uint64(len(files[name])))
			binary.LittleEndian.PutUint32(b[off+8:], crc32c(files[name]))
		}
	}
	if fixCRC {
		binary.LittleEndian.PutUint32(b[metaOffCRC:], crc32c(b[:metaOffCRC]))
	}
}
