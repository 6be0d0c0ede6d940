package snapshot

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// Tests of damage that keeps every checksum and hash consistent: only the
// structural checks of Open, Verify, the navigation accessors and
// AddSubtree can refuse it. Each one pins one such check.

// kvFiles writes a balanced tree of version 1 over keys and values and
// returns its files.
func kvFiles(t *testing.T, keys, values []string) map[string][]byte {
	t.Helper()
	var ks, vs [][]byte
	for i := range keys {
		ks = append(ks, []byte(keys[i]))
		vs = append(vs, []byte(values[i]))
	}
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, 1, 1, false, ks, vs)
	return readDir(t, dir)
}

// leafHashAt returns the recorded hash of leaf i.
func leafHashAt(files map[string][]byte, i int) []byte {
	return files[FileLeaves][i*RecordSize : i*RecordSize+HashSize]
}

// slotOfLeaf returns the lookup slot that names leaf i.
func slotOfLeaf(t *testing.T, files map[string][]byte, i uint64) uint64 {
	t.Helper()
	lk := files[FileLookup]
	for s := uint64(0); s < uint64(len(lk))/LookupEntrySize; s++ {
		if e := binary.LittleEndian.Uint64(lk[s*LookupEntrySize:]); e != 0 && e&uint40Mask == i+1 {
			return s
		}
	}
	t.Fatalf("no lookup slot for leaf %d", i)
	return 0
}

// rebuildLookup rebuilds the lookup table from the leaves and kvs, by
// inserting the leaves in leaf order as the format defines.
func rebuildLookup(files map[string][]byte) {
	n := uint64(len(files[FileLeaves]) / RecordSize)
	slots := lookupSlots(n)
	table := make([]byte, slots*LookupEntrySize)
	for i := uint64(0); i < n; i++ {
		rec := files[FileLeaves][i*RecordSize:]
		off := binary.LittleEndian.Uint64(rec[leafOffKVOff:])
		kl := uint64(binary.LittleEndian.Uint32(rec[leafOffKeyLen:]))
		h := lookupHash(files[FileKVs][off : off+kl])
		s := lookupHome(h, slots)
		for binary.LittleEndian.Uint64(table[s*LookupEntrySize:]) != 0 {
			s = lookupNext(s, slots)
		}
		binary.LittleEndian.PutUint64(table[s*LookupEntrySize:], lookupEntry(h, i))
		binary.LittleEndian.PutUint64(table[s*LookupEntrySize+8:], off)
	}
	files[FileLookup] = table
}

// wantVerifyCorrupt opens files from memory and wants Open to pass and
// Verify to fail with ErrCorrupt but not ErrChecksum.
func wantVerifyCorrupt(t *testing.T, what string, files map[string][]byte) {
	t.Helper()
	s, err := openMem("mem", files)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer s.Close()
	if err := s.Verify(); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) {
		t.Fatalf("%s: Verify returned %v, want ErrCorrupt", what, err)
	}
}

// unbalancedFiles returns the files of a 4-leaf snapshot whose root has a
// leaf on the left and a subtree of height 2 on the right (heights 0 and
// 2, not an AVL tree), every hash and checksum consistent.
func unbalancedFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := kvFiles(t, []string{"a", "b", "c", "d"}, []string{"1", "2", "3", "4"})
	h := func(i int) []byte { return leafHashAt(files, i) }
	br := make([]byte, 3*RecordSize)
	var rec [RecordSize]byte
	h0 := nodehash.Inner(nil, 1, 2, 1, h(2), h(3)) // (c, d)
	putBranch(&rec, h0, 1, 2, 2, 3, 1)
	copy(br[0:], rec[:])
	h1 := nodehash.Inner(nil, 2, 3, 1, h(1), h0) // (b, (c, d))
	putBranch(&rec, h1, 1, 3, 1, 2, 2)
	copy(br[RecordSize:], rec[:])
	h2 := nodehash.Inner(nil, 3, 4, 1, h(0), h1) // (a, (b, (c, d)))
	putBranch(&rec, h2, 1, 4, 0, 1, 3)
	copy(br[2*RecordSize:], rec[:])
	files[FileBranches] = br
	copy(files[FileMeta][metaOffRootHash:], h2)
	fixMeta(files, true, false, true)
	return files
}

// copyFilesWhole opens files from memory and copies the whole tree with
// AddSubtree into a new writer, after first (if not nil) has written to
// it, and returns AddSubtree's error.
func copyFilesWhole(t *testing.T, files map[string][]byte, first func(w *Writer)) error {
	t.Helper()
	s, err := openMem("mem", files)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := NewWriter(filepath.Join(t.TempDir(), "copy"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if first != nil {
		first(w)
	}
	root, _ := s.Root()
	return w.AddSubtree(s, root)
}

// TestVerifyRefusesUnbalancedTree: Verify refuses children whose heights
// differ by two.
func TestVerifyRefusesUnbalancedTree(t *testing.T) {
	wantVerifyCorrupt(t, "unbalanced root", unbalancedFiles(t))
}

// TestAddSubtreeRefusesUnbalancedTree: AddSubtree refuses to copy an
// unbalanced subtree, which would make a snapshot Verify refuses.
func TestAddSubtreeRefusesUnbalancedTree(t *testing.T) {
	if err := copyFilesWhole(t, unbalancedFiles(t), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("AddSubtree of an unbalanced tree: %v, want ErrCorrupt", err)
	}
}

// TestVerifyRefusesDuplicateKeys: two leaves of the same key, with hashes,
// key prefixes and lookup table recomputed, fail Verify.
func TestVerifyRefusesDuplicateKeys(t *testing.T) {
	files := kvFiles(t, []string{"a", "b"}, []string{"1", "2"})
	// leaf 1's key "b" becomes "a"
	off := binary.LittleEndian.Uint64(files[FileLeaves][RecordSize+leafOffKVOff:])
	files[FileKVs][off] = 'a'
	var rec [RecordSize]byte
	h1 := nodehash.Leaf(nil, []byte("a"), []byte("2"), 1)
	putLeaf(&rec, h1, 1, off, 1, 1, []byte("a"))
	copy(files[FileLeaves][RecordSize:], rec[:])
	root := nodehash.Inner(nil, 1, 2, 1, leafHashAt(files, 0), h1)
	copy(files[FileBranches][branchOffHash:], root)
	copy(files[FileMeta][metaOffRootHash:], root)
	rebuildLookup(files)
	fixMeta(files, true, false, true)
	wantVerifyCorrupt(t, "duplicate keys", files)
}

// TestVerifyRefusesTrailingKVBytes: kvs holds nothing after the last value.
func TestVerifyRefusesTrailingKVBytes(t *testing.T) {
	files := kvFiles(t, []string{"a", "b", "c"}, []string{"1", "2", "3"})
	files[FileKVs] = append(files[FileKVs], 0xaa, 0xbb)
	fixMeta(files, true, false, true)
	wantVerifyCorrupt(t, "trailing kvs bytes", files)
}

// TestVerifyRefusesMovedKVEntry: a leaf record (and its lookup slot) that
// points at a copy of its key and value elsewhere in kvs, here inside the
// next leaf's value, serves the right bytes but is not the contiguous
// layout the format and AddSubtree require: Verify refuses it.
func TestVerifyRefusesMovedKVEntry(t *testing.T) {
	copyOfA := "\x01\x00\x00\x00\x01\x00\x00\x00kv" // an entry header, then "k", "v"
	files := kvFiles(t, []string{"k", "l"}, []string{"v", copyOfA})
	// leaf 1's value starts after leaf 0's entry (8+1+1), leaf 1's header and key
	moved := uint64(KVHeaderSize+2+KVHeaderSize+1) + KVHeaderSize
	if got := string(files[FileKVs][moved : moved+2]); got != "kv" {
		t.Fatalf("kvs layout: %q at %d", got, moved)
	}
	binary.LittleEndian.PutUint64(files[FileLeaves][leafOffKVOff:], moved)
	slot := slotOfLeaf(t, files, 0)
	binary.LittleEndian.PutUint64(files[FileLookup][slot*LookupEntrySize+8:], moved)
	fixMeta(files, true, false, true)
	wantVerifyCorrupt(t, "leaf 0 entry moved", files)
}

// TestVerifyOneLeafRootHash: the root hash in meta of a one-leaf tree must
// be the leaf's hash.
func TestVerifyOneLeafRootHash(t *testing.T) {
	files := kvFiles(t, []string{"a"}, []string{"1"})
	files[FileMeta][metaOffRootHash] ^= 0xff
	fixMeta(files, true, false, true)
	wantVerifyCorrupt(t, "one-leaf root hash", files)
}

// TestOpenEmptyTreeRootHash: Open refuses an empty tree whose meta records
// a root hash other than sha256(""); Verify relies on that check.
func TestOpenEmptyTreeRootHash(t *testing.T) {
	files := kvFiles(t, nil, nil)
	files[FileMeta][metaOffRootHash] ^= 0xff
	fixMeta(files, true, false, true)
	if s, err := openMem("mem", files); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of an empty tree with a wrong root hash: %v, want ErrCorrupt", err)
	}
}

// TestVerifyLookupEntryBeforeItsRun: a leaf's lookup entry moved one slot
// past its home slot, leaving the home slot empty, is unreachable (a probe
// stops at the empty home slot): Verify refuses it.
func TestVerifyLookupEntryBeforeItsRun(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	files := kvFiles(t, keys, keys)
	lk := files[FileLookup]
	slots := uint64(len(lk)) / LookupEntrySize
	entry := func(s uint64) uint64 { return binary.LittleEndian.Uint64(lk[s*LookupEntrySize:]) }
	for i := range uint64(len(keys)) {
		s := slotOfLeaf(t, files, i)
		next := lookupNext(s, slots)
		if lookupHome(lookupHash([]byte(keys[i])), slots) != s || entry(next) != 0 {
			continue
		}
		copy(lk[next*LookupEntrySize:(next+1)*LookupEntrySize], lk[s*LookupEntrySize:(s+1)*LookupEntrySize])
		clear(lk[s*LookupEntrySize : (s+1)*LookupEntrySize])
		fixMeta(files, true, false, true)
		s2, err := openMem("mem", files)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, found, _ := s2.Lookup([]byte(keys[i])); found {
			t.Fatalf("leaf %d found from its empty home slot", i)
		}
		s2.Close()
		wantVerifyCorrupt(t, "entry past its empty home slot", files)
		return
	}
	t.Fatal("no leaf at its home slot with an empty slot after it")
}

// TestLookupDamagedSlotOffsetAtEnd: a lookup slot whose kvs offset is the
// end of kvs, where the 8 bytes before it (the end of the last value) read
// as an entry header of the key's length, must not make Lookup read past
// kvs: an error or not found, never a panic.
func TestLookupDamagedSlotOffsetAtEnd(t *testing.T) {
	files := kvFiles(t, []string{"a", "b"}, []string{"1", "\x01\x00\x00\x00\x00\x00\x00\x00"})
	slot := slotOfLeaf(t, files, 1)
	binary.LittleEndian.PutUint64(files[FileLookup][slot*LookupEntrySize+8:], uint64(len(files[FileKVs])))
	dir := filepath.Join(t.TempDir(), "damaged")
	writeDir(t, dir, files)
	s, err := Open(dir) // mapped: the kvs slice ends where the file does
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Lookup panicked: %v", p)
		}
	}()
	if _, v, found, err := s.Lookup([]byte("b")); found && err == nil {
		t.Logf("found %q", v)
	}
}

// TestChildHeightBelowParent: Left and Right refuse a child branch whose
// recorded height is not below its parent's (the bound that keeps the
// tree's recursive walks short on a damaged snapshot).
func TestChildHeightBelowParent(t *testing.T) {
	files := kvFiles(t, []string{"a", "b", "c", "d"}, []string{"1", "2", "3", "4"})
	// branches (a, b), (c, d), root: the root's height 2 becomes 1
	files[FileBranches][2*RecordSize+branchOffHeight] = 1
	s, err := openMem("mem", files)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, err := s.Right(2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Right of a branch of the height of its right child: %v, %v, want ErrCorrupt", r, err)
	}
	if r, err := s.Left(2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Left of a branch of the height of its left child: %v, %v, want ErrCorrupt", r, err)
	}
}

// TestAddSubtreeChecksEntryHeader: AddSubtree copies kvs entries verbatim,
// so it checks both lengths of each entry header against the leaf record:
// a wrong value length would make the copy's Lookup serve a value of the
// wrong length.
func TestAddSubtreeChecksEntryHeader(t *testing.T) {
	files := kvFiles(t, []string{"a", "b", "c"}, []string{"1", "2", "3"})
	off := binary.LittleEndian.Uint64(files[FileLeaves][RecordSize+leafOffKVOff:])
	files[FileKVs][off-KVHeaderSize+4] = 0 // leaf 1's header: value length 1 -> 0
	if err := copyFilesWhole(t, files, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("AddSubtree with a wrong value length in an entry header: %v, want ErrCorrupt", err)
	}
}

// TestAddSubtreeFirstKeyEqualToLast: AddSubtree refuses a subtree whose
// first key equals the writer's last key, as AddLeaf does.
func TestAddSubtreeFirstKeyEqualToLast(t *testing.T) {
	files := kvFiles(t, []string{"b", "c"}, []string{"1", "2"})
	err := copyFilesWhole(t, files, func(w *Writer) {
		if err := w.AddLeaf([]byte("b"), []byte("0"), 1, nodehash.Leaf(nil, []byte("b"), []byte("0"), 1)); err != nil {
			t.Fatal(err)
		}
	})
	if !errors.Is(err, ErrKeyOrder) {
		t.Fatalf("AddSubtree whose first key equals the last written: %v, want ErrKeyOrder", err)
	}
}

// TestForkBranchBound: a subtree from leaf L has at most L-1 branches
// before it, so Fork refuses a first branch of L or more (and any for
// L = 0).
func TestForkBranchBound(t *testing.T) {
	for _, c := range [][2]uint64{{0, 1}, {3, 3}} {
		w, err := NewWriter(filepath.Join(t.TempDir(), "s"), 1)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := w.Fork(c[0], c[1]); !errors.Is(err, ErrTreeShape) {
			if p != nil {
				p.Abort()
			}
			t.Errorf("Fork(%d, %d): %v, want ErrTreeShape", c[0], c[1], err)
		}
		w.Abort()
	}
}
