package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

var update = flag.Bool("update", false, "rewrite the golden files and the fuzz seed corpus under testdata")

const (
	goldenDir = "testdata/golden"
	// goldenRootHash pins the root hash of the golden tree.
	goldenRootHash = "fa65bf73415cd6ad5795c6aa1f2538edcf2d152f2f6e8b8c80b8c7f13fa06a4b"
)

// writeGolden writes the golden tree, five keys with fixed versions at tree
// version 6:
//
//	          B3 (v6)
//	        /        \
//	    B1 (v3)      B2 (v5)
//	    /    \       /    \
//	 B0 (v3) charlie delta echo
//	 /    \    (v2)   (v5) (v4)
//	alpha bravo
//	 (v1)  (v3)
func writeGolden(t *testing.T, dir string) []byte {
	t.Helper()
	w, err := NewWriter(dir, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	type sub struct {
		height uint8
		size   int64
		hash   []byte
	}
	leaf := func(key, value string, version int64) sub {
		h := nodehash.Leaf(nil, []byte(key), []byte(value), version)
		if err := w.AddLeaf([]byte(key), []byte(value), version, h); err != nil {
			t.Fatal(err)
		}
		return sub{0, 1, h}
	}
	branch := func(l, r sub, version int64) sub {
		height, size := max(l.height, r.height)+1, l.size+r.size
		h := nodehash.Inner(nil, height, size, version, l.hash, r.hash)
		if err := w.AddBranch(height, size, version, h); err != nil {
			t.Fatal(err)
		}
		return sub{height, size, h}
	}
	b0 := branch(leaf("alpha", "value-a", 1), leaf("bravo", "value-b", 3), 3)
	b1 := branch(b0, leaf("charlie", "value-c", 2), 3)
	b2 := branch(leaf("delta", "", 5), leaf("echo", "value-e", 4), 5)
	root := branch(b1, b2, 6)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return root.hash
}

func TestGolden(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	rootHash := writeGolden(t, dir)
	got := readDir(t, dir)
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		writeDir(t, goldenDir, got)
		t.Logf("root hash %x", rootHash)
	}
	want := readDir(t, goldenDir)
	for name, b := range got {
		if !bytes.Equal(b, want[name]) {
			t.Errorf("%s differs from %s:\n got %x\nwant %x", name, filepath.Join(goldenDir, name), b, want[name])
		}
	}
	if hex.EncodeToString(rootHash) != goldenRootHash {
		t.Errorf("root hash %x, want %s", rootHash, goldenRootHash)
	}

	// The checked-in files open and verify, and read back as written.
	s, err := Open(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(s.RootHash()) != goldenRootHash || s.Version() != 6 || s.LeafCount() != 5 {
		t.Fatalf("root hash %x version %d leaves %d", s.RootHash(), s.Version(), s.LeafCount())
	}
	for i, kv := range [][2]string{{"alpha", "value-a"}, {"bravo", "value-b"}, {"charlie", "value-c"}, {"delta", ""}, {"echo", "value-e"}} {
		k, v, err := s.LeafKV(uint64(i))
		if err != nil || string(k) != kv[0] || string(v) != kv[1] {
			t.Fatalf("leaf %d: %q=%q %v", i, k, v, err)
		}
	}
	// Spot-check the layout against the byte diagram in format.go.
	m := want[FileMeta]
	if string(m[:8]) != "MEMIAVLS" || binary.LittleEndian.Uint32(m[8:]) != 2 || len(m) != MetaSize {
		t.Fatalf("meta header %q", m[:12])
	}
	br := want[FileBranches][3*RecordSize:] // the root
	if uint40At(br, 40) != 5 || uint40At(br, 45) != 0 || uint40At(br, 50) != 3 || br[55] != 3 {
		t.Fatalf("root record %x", br[:RecordSize])
	}
	lf := want[FileLeaves][2*RecordSize:] // charlie
	if binary.LittleEndian.Uint64(lf[40:]) != 48 || binary.LittleEndian.Uint32(lf[48:]) != 7 ||
		binary.LittleEndian.Uint32(lf[52:]) != 7 || string(lf[56:64]) != "charlie\x00" {
		t.Fatalf("leaf 2 record %x", lf[:RecordSize])
	}
	// kvs: charlie's entry header just before its key.
	if kv := want[FileKVs]; binary.LittleEndian.Uint32(kv[40:]) != 7 || binary.LittleEndian.Uint32(kv[44:]) != 7 || string(kv[48:55]) != "charlie" {
		t.Fatalf("kvs entry of leaf 2: %x", kv[40:62])
	}
	// lookup: 8 slots for 5 leaves; each leaf i sits at or after its home
	// slot (xxh64(key) mod 2^40) * 8 div 2^40, tagged with the top 24 bits of the hash, with
	// its key's kvs offset.
	lk := want[FileLookup]
	if len(lk) != 8*LookupEntrySize || binary.LittleEndian.Uint64(m[136:]) != 128 {
		t.Fatalf("lookup of %d bytes, meta records %d", len(lk), binary.LittleEndian.Uint64(m[136:]))
	}
	for i, key := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
		h := xxhash.Sum64String(key)
		home := (h & (1<<40 - 1)) * 8 >> 40 // the low 40 bits scaled to 8 slots
		for slot := home; ; slot = (slot + 1) % 8 {
			e := binary.LittleEndian.Uint64(lk[slot*16:])
			if e == 0 {
				t.Fatalf("leaf %d (%s): no slot", i, key)
			}
			if e&(1<<40-1) == uint64(i)+1 {
				if e>>40 != h>>40 {
					t.Fatalf("leaf %d (%s): tag %#x, want %#x", i, key, e>>40, h>>40)
				}
				if off := binary.LittleEndian.Uint64(lk[slot*16+8:]); off != binary.LittleEndian.Uint64(want[FileLeaves][i*RecordSize+40:]) {
					t.Fatalf("leaf %d (%s): kvs offset %d", i, key, off)
				}
				break
			}
		}
	}
}

// TestGoldenV1 reads a snapshot of format version 1, which has no lookup
// file: it opens, verifies and serves point reads by binary search.
func TestGoldenV1(t *testing.T) {
	s, err := Open(goldenDir + "-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if s.FormatVersion() != FormatVersionNoLookup || s.HasLookup() {
		t.Fatalf("format version %d, lookup %v", s.FormatVersion(), s.HasLookup())
	}
	if hex.EncodeToString(s.RootHash()) != goldenRootHash || s.Version() != 6 || s.LeafCount() != 5 {
		t.Fatalf("root hash %x version %d leaves %d", s.RootHash(), s.Version(), s.LeafCount())
	}
	for i, key := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
		if idx, _, found, err := s.Lookup([]byte(key)); idx != uint64(i) || !found || err != nil {
			t.Fatalf("Lookup(%s) = %d %v %v", key, idx, found, err)
		}
	}
	if _, _, found, err := s.Lookup([]byte("b")); found || err != nil {
		t.Fatalf("Lookup(b) = %v %v", found, err)
	}
	// A version 1 meta that records a lookup file is corrupt.
	files := readDir(t, goldenDir+"-v1")
	b := (*[MetaSize]byte)(files[FileMeta])
	binary.LittleEndian.PutUint64(b[metaOffFiles+metaFileIndexLookup*metaFileEntrySize:], 64)
	fixMeta(files, false, false, true)
	files[FileLookup] = make([]byte, 64)
	dir := filepath.Join(t.TempDir(), "snap")
	writeDir(t, dir, files)
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 1 with a lookup file: %v", err)
	}
}

// fuzzInput packs a snapshot's files into one FuzzOpen input.
func fuzzInput(files map[string][]byte, flags byte) []byte {
	b := []byte{flags}
	for _, name := range fuzzFiles[:len(fuzzFiles)-1] {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(files[name])))
	}
	for _, name := range fuzzFiles {
		b = append(b, files[name]...)
	}
	return b
}

// TestFuzzSeeds writes (with -update) or checks the FuzzOpen seed corpus:
// real small snapshots, as written and with a few bytes changed.
func TestFuzzSeeds(t *testing.T) {
	const corpus = "testdata/fuzz/FuzzOpen"
	if !*update {
		entries, err := os.ReadDir(corpus)
		if err != nil || len(entries) == 0 {
			t.Fatalf("no seed corpus in %s (run go test -run TestFuzzSeeds -update): %v", corpus, err)
		}
		return
	}
	if err := os.RemoveAll(corpus); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	add := func(b []byte) {
		n++
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(corpus, fmt.Sprintf("seed-%02d", n)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keys := [][]byte{[]byte("a"), []byte("a\x00"), []byte("key1"), []byte("key12345678"), []byte("key12345679"), []byte("m"), []byte("zz")}
	values := [][]byte{[]byte("v0"), nil, []byte("value-2"), []byte("v3"), []byte("v4"), []byte("v5"), []byte("last")}
	for _, size := range []int{0, 1, 2, 3, 5, 7} {
		dir := filepath.Join(t.TempDir(), "snap")
		writeTree(t, dir, int64(size), 9, size == 7, keys[:size], values[:size])
		files := readDir(t, dir)
		add(fuzzInput(files, 0))
		add(fuzzInput(files, 7))
		if size >= 3 {
			c := copyFiles(files)
			c[FileBranches][branchOffKeyLeaf] ^= 1
			add(fuzzInput(c, 7))
			c = copyFiles(files)
			c[FileLeaves][leafOffKeyLen] += 3
			add(fuzzInput(c, 7))
		}
	}
	gold := readDir(t, goldenDir)
	add(fuzzInput(gold, 0))
	add(fuzzInput(readDir(t, goldenDir+"-v1"), 0))
	t.Logf("wrote %d seeds", n)
}
