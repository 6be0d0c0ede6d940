package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// roundTrip writes a tree over keys, reopens it and checks everything.
func roundTrip(t *testing.T, r *rand.Rand, keys, values [][]byte, random bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	seed := r.Int63()
	const version = 1000
	rootHash := writeTree(t, dir, seed, version, random, keys, values)

	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := uint64(len(keys))
	if s.LeafCount() != n || s.BranchCount() != max(n, 1)-1 || s.Version() != version || s.Dir() != dir {
		t.Fatalf("counts %d %d version %d dir %s", s.LeafCount(), s.BranchCount(), s.Version(), s.Dir())
	}
	if !bytes.Equal(s.RootHash(), rootHash) {
		t.Fatalf("root hash %x, want %x", s.RootHash(), rootHash)
	}
	if root, ok := s.Root(); ok {
		var h []byte
		if root.IsLeaf() {
			h = s.LeafHash(root.Index())
		} else {
			h = s.BranchHash(root.Index())
		}
		if !bytes.Equal(h, rootHash) {
			t.Fatalf("root %v hash %x, want %x", root, h, rootHash)
		}
	}

	// Replay the same tree against the snapshot.
	c := &checkSink{s: s, t: t}
	g := &treeGen{
		r:           rand.New(rand.NewSource(seed)),
		kv:          func(i int) ([]byte, []byte) { return keys[i], values[i] },
		treeVersion: version,
		random:      random,
		sink:        c,
	}
	if _, err := g.run(len(keys)); err != nil {
		t.Fatal(err)
	}
	if c.leaf != s.LeafCount() || c.branch != s.BranchCount() {
		t.Fatalf("checked %d leaves, %d branches", c.leaf, c.branch)
	}
	checkNavigation(t, s)
	checkSearch(t, s, r)
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Verify(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify after Close: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	r := testutil.Rand(t)
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 13, 100, 1000} {
		for _, random := range []bool{false, true} {
			t.Run(fmt.Sprintf("n=%d/random=%v", n, random), func(t *testing.T) {
				keys, values := sortedKVs(r, n)
				roundTrip(t, r, keys, values, random)
			})
		}
	}
}

// TestRoundTripPrefixTies uses keys whose 8-byte prefixes tie or differ only
// in the zero padding.
func TestRoundTripPrefixTies(t *testing.T) {
	r := testutil.Rand(t)
	keys := [][]byte{
		{}, {0}, {0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 0},
		[]byte("a"), []byte("a\x00"), []byte("a\x00\x01"), []byte("ab"),
		[]byte("abcdefg"), []byte("abcdefg\x00"), []byte("abcdefg\x00\x00"), []byte("abcdefgh"),
		[]byte("abcdefgh\x00"), []byte("abcdefghi"), []byte("abcdefghij"), []byte("abcdefgi"),
		bytes.Repeat([]byte{0xff}, 8), bytes.Repeat([]byte{0xff}, 9), bytes.Repeat([]byte{0xff}, 40),
	}
	values := make([][]byte, len(keys))
	for i := range values {
		values[i] = []byte(fmt.Sprintf("value-%d", i))
	}
	values[3] = nil
	for _, random := range []bool{false, true} {
		roundTrip(t, r, keys, values, random)
	}
}

// bigKV returns key i of n sorted keys of 32 to 56 bytes, spread over the
// whole key space, and a value of valueLen bytes. Both are derived from seed

// TestOpenAs maps a snapshot under the name it gets once renamed: reads work
// across the rename, and the checks that reopen the files by path find them
// under the new name, which a damaged file's error names.
func TestOpenAs(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(11)), 2000)
	parent := t.TempDir()
	tmp, final := filepath.Join(parent, "snap.tmp"), filepath.Join(parent, "snap")
	rootHash := writeTree(t, tmp, 5, 9, true, keys, values)
	s, err := OpenAs(tmp, final)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Dir() != final {
		t.Fatalf("Dir %s, want %s", s.Dir(), final)
	}
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.RootHash(), rootHash) {
		t.Fatalf("root hash %x, want %x", s.RootHash(), rootHash)
	}
	checkSearch(t, s, rand.New(rand.NewSource(12)))
	if err := s.Verify(); err != nil {
		t.Fatalf("Verify after the rename: %v", err)
	}
	c, err := s.NewChecksumCheck()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("checksum check after the rename: %v", err)
	}
	_ = c.Close()

	// a flipped byte is reported under the name the snapshot has
	path := filepath.Join(final, FileKVs)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Verify of a damaged kvs file: %v, want ErrCorrupt naming %s", err, path)
	}

	// the files must be where OpenAs looks
	if _, err := OpenAs(tmp, final); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenAs of a missing directory: %v", err)
	}
}

// and i alone.
func bigKV(seed uint64, i, n int, valueLen int, key, value []byte) ([]byte, []byte) {
	h := splitmix(seed ^ uint64(i))
	stride := ^uint64(0) / uint64(n)
	key = binary.BigEndian.AppendUint64(key[:0], uint64(i)*stride+h%stride)
	tail := 24 + int(h>>56)%25
	for len(key) < 8+tail {
		h = splitmix(h)
		key = binary.LittleEndian.AppendUint64(key, h)
	}
	key = key[:8+tail]
	value = value[:0]
	for len(value) < valueLen {
		h = splitmix(h)
		value = binary.LittleEndian.AppendUint64(value, h)
	}
	return key, value[:valueLen]
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func TestRoundTripMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a million leaves")
	}
	r := testutil.Rand(t)
	const n = 1_000_000
	seed := r.Uint64()
	var kbuf, vbuf []byte
	kv := func(i int) ([]byte, []byte) {
		kbuf, vbuf = bigKV(seed, i, n, 16+i%48, kbuf, vbuf)
		return kbuf, vbuf
	}
	dir := filepath.Join(t.TempDir(), "snap")
	w, err := NewWriter(dir, 77)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	genSeed := r.Int63()
	g := &treeGen{r: rand.New(rand.NewSource(genSeed)), kv: kv, treeVersion: 77, random: true, sink: w}
	root, err := g.run(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !bytes.Equal(s.RootHash(), root.hash[:]) {
		t.Fatalf("root hash %x, want %x", s.RootHash(), root.hash)
	}
	c := &checkSink{s: s, t: t}
	g = &treeGen{r: rand.New(rand.NewSource(genSeed)), kv: kv, treeVersion: 77, random: true, sink: c}
	if _, err := g.run(n); err != nil {
		t.Fatal(err)
	}
	checkNavigation(t, s)
	checkSearch(t, s, r)
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, 1, 5, false, nil, nil)
	for _, name := range allFiles[1:] {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() != 0 {
			t.Fatalf("%s: %v %v", name, fi, err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Root(); ok {
		t.Fatal("empty tree has a root")
	}
	if !bytes.Equal(s.RootHash(), nodehash.Empty()) || s.Version() != 5 {
		t.Fatalf("root hash %x version %d", s.RootHash(), s.Version())
	}
	if idx, found, err := s.Search([]byte("k"), 0, 0); idx != 0 || found || err != nil {
		t.Fatalf("Search: %d %v %v", idx, found, err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestRef(t *testing.T) {
	for _, i := range []uint64{0, 1, 12345, MaxLeaves} {
		l, b := LeafRef(i), BranchRef(i)
		if !l.IsLeaf() || b.IsLeaf() || l.Index() != i || b.Index() != i || l == b {
			t.Fatalf("refs of %d: %v %v", i, l, b)
		}
	}
	if LeafRef(3).String() != "leaf 3" || BranchRef(4).String() != "branch 4" {
		t.Fatal(LeafRef(3), BranchRef(4))
	}
}

func TestZeroAllocs(t *testing.T) {
	r := testutil.Rand(t)
	keys, values := sortedKVs(r, 500)
	s := writeAndOpen(t, r.Int63(), 10, true, keys, values)
	probes := append([][]byte{}, keys...)
	for _, k := range keys[:50] {
		probes = append(probes, append(append([]byte{}, k...), 0))
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p := probes[i%len(probes)]
		i++
		if _, _, err := s.Search(p, 0, s.LeafCount()); err != nil {
			panic(err)
		}
		j := uint64(i) % s.LeafCount()
		_, _, _ = s.LeafKV(j)
		_, _ = s.LeafKey(j)
		_ = s.LeafHash(j)
		b := uint64(i) % s.BranchCount()
		_, _ = s.Left(b)
		_, _ = s.Right(b)
		_, _ = s.BranchKey(b)
		_ = s.BranchHash(b)
		_, _ = s.Root()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func TestOpenErrors(t *testing.T) {
	r := testutil.Rand(t)
	keys, values := sortedKVs(r, 7)
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, r.Int63(), 10, false, keys, values)
	orig := readDir(t, dir)

	if _, err := Open(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
	for _, name := range allFiles {
		d := filepath.Join(t.TempDir(), "snap")
		files := copyFiles(orig)
		delete(files, name)
		writeDir(t, d, files)
		if _, err := Open(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("without %s: %v", name, err)
		}
	}

	check := func(what string, edit func(b *[MetaSize]byte), fixCRC bool, want ...error) {
		t.Helper()
		files := copyFiles(orig)
		edit((*[MetaSize]byte)(files[FileMeta]))
		fixMeta(files, false, false, fixCRC)
		d := filepath.Join(t.TempDir(), "snap")
		writeDir(t, d, files)
		s, err := Open(d)
		if err == nil {
			s.Close()
		}
		for _, w := range want {
			if !errors.Is(err, w) {
				t.Fatalf("%s: %v, want %v", what, err, w)
			}
		}
		t.Logf("%s: %v", what, err)
	}
	check("format version", func(b *[MetaSize]byte) { b[metaOffFormat]++ }, true, ErrFormatVersion)
	check("magic", func(b *[MetaSize]byte) { b[0] ^= 1 }, true, ErrCorrupt)
	check("meta checksum", func(b *[MetaSize]byte) { b[metaOffTreeVersion] ^= 1 }, false, ErrCorrupt, ErrChecksum)
	check("reserved", func(b *[MetaSize]byte) { b[metaOffReservedTail+3] = 1 }, true, ErrCorrupt)
	check("negative version", func(b *[MetaSize]byte) { b[metaOffTreeVersion+7] = 0x80 }, true, ErrCorrupt)
	check("branch count", func(b *[MetaSize]byte) { b[metaOffBranchCount]++ }, true, ErrCorrupt)
	check("leaf count", func(b *[MetaSize]byte) { b[metaOffLeafCount]++ }, true, ErrCorrupt)
	check("huge leaf count", func(b *[MetaSize]byte) {
		binary.LittleEndian.PutUint64(b[metaOffLeafCount:], 1<<41)
		binary.LittleEndian.PutUint64(b[metaOffBranchCount:], 1<<41-1)
	}, true, ErrCorrupt)
	check("leaves length", func(b *[MetaSize]byte) { b[metaOffFiles] += 64 }, true, ErrCorrupt)
	check("kvs length", func(b *[MetaSize]byte) { b[metaOffFiles+2*metaFileEntrySize]++ }, true, ErrCorrupt)
	check("empty tree root hash", func(b *[MetaSize]byte) {
		*b = (&meta{formatVersion: FormatVersion, treeVersion: 1}).encode()
	}, true, ErrCorrupt)

	// A longer meta file fails, as does one of a future format of any size.
	files := copyFiles(orig)
	files[FileMeta] = append(files[FileMeta], 0)
	d := filepath.Join(t.TempDir(), "snap")
	writeDir(t, d, files)
	if _, err := Open(d); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("long meta: %v", err)
	}
	files[FileMeta] = append(files[FileMeta][:8:8], 3, 0, 0, 0)
	writeDir(t, d, files)
	if _, err := Open(d); !errors.Is(err, ErrFormatVersion) {
		t.Fatalf("future meta: %v", err)
	}
}

func copyFiles(files map[string][]byte) map[string][]byte {
	c := map[string][]byte{}
	for k, v := range files {
		c[k] = bytes.Clone(v)
	}
	return c
}

// Prefetch is a hint: any node reference, in range or not, of any
// snapshot, empty or nil, must neither fail nor change what reads return.
func TestPrefetchAnyRef(t *testing.T) {
	r := testutil.Rand(t)
	keys, values := sortedKVs(r, 300)
	s := writeAndOpen(t, r.Int63(), 10, true, keys, values)
	empty := writeAndOpen(t, 1, 5, false, nil, nil)
	n, b := s.LeafCount(), s.BranchCount()
	refs := []Ref{LeafRef(0), LeafRef(n - 1), LeafRef(n), LeafRef(1 << 39),
		BranchRef(0), BranchRef(b - 1), BranchRef(b), BranchRef(1 << 39)}
	var none *Snapshot
	for _, ref := range refs {
		s.Prefetch(ref)
		empty.Prefetch(ref)
		none.Prefetch(ref)
	}
	for i, k := range keys {
		_, v, found, err := s.Lookup(k)
		if err != nil || !found || !bytes.Equal(v, values[i]) {
			t.Fatalf("key %d after the prefetches: %x %v %v", i, v, found, err)
		}
	}
}

// TestAccessorErrors: the accessors that return an error fail with
// ErrOutOfRange for an index past the end and with ErrClosed after Close,
// without panicking.
func TestAccessorErrors(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(1)), 300)
	s := writeAndOpen(t, 1, 1, true, keys, values)
	nl, nb := s.LeafCount(), s.BranchCount()
	calls := func() map[string]error {
		_, _, kvErr := s.LeafKV(nl)
		_, keyErr := s.LeafKey(nl)
		_, valErr := s.LeafValue(nl)
		_, bkErr := s.BranchKey(nb)
		_, lErr := s.Left(nb)
		_, rErr := s.Right(nb)
		_, _, sErr := s.Search(keys[0], 0, nl+1)
		return map[string]error{"LeafKV": kvErr, "LeafKey": keyErr, "LeafValue": valErr,
			"BranchKey": bkErr, "Left": lErr, "Right": rErr, "Search": sErr}
	}
	for name, err := range calls() {
		if !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%s past the end: %v, want ErrOutOfRange", name, err)
		}
	}
	// in range, the same calls succeed
	if _, _, err := s.LeafKV(nl - 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Right(nb - 1); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := s.Lookup(keys[7]); err != nil || !found {
		t.Fatalf("Lookup: %v %v", found, err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after := calls()
	_, _, after["LeafKV(0)"] = s.LeafKV(0)
	_, after["LeafKey(0)"] = s.LeafKey(0)
	_, after["BranchKey(0)"] = s.BranchKey(0)
	_, after["Left(root)"] = s.Left(nb - 1)
	_, after["Right(root)"] = s.Right(nb - 1)
	_, _, after["Search(all)"] = s.Search(keys[0], 0, nl)
	_, _, _, after["Lookup"] = s.Lookup(keys[7])
	for name, err := range after {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}
