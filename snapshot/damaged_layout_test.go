package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestNavigationStaysInRange: the Snapshot contract says an index
// obtained from the snapshot's own navigation (Left, Right) is always in
// range, so that the unchecked accessors (LeafHash, BranchHash, ...) can be
// called on it; a corrupted branch record must give an error wrapping
// ErrCorrupt instead. Each layout field (size, first leaf, key leaf) of
// each branch of a small snapshot is set to every value up to past the
// leaf count, and so is the key leaf with the size that ends the branch
// just after it, with every other byte intact (no Verify, as a reader that trusts
// Open does), and every Left and Right result is checked.
func TestNavigationStaysInRange(t *testing.T) {
	orig := smallSnapshot(t, false)
	// -1: the key leaf set to the value and the size to end just after it
	// (a right child that is one leaf, past the last leaf from n on)
	fields := []int{branchOffSize, branchOffFirstLeaf, branchOffKeyLeaf, -1}
	n := uint64(len(orig[FileLeaves]) / RecordSize)
	nb := uint64(len(orig[FileBranches]) / RecordSize)
	for i := uint64(0); i < nb; i++ {
		for _, field := range fields {
			for v := uint64(0); v <= n+2; v++ {
				files := copyFiles(orig)
				rec := files[FileBranches][i*RecordSize : (i+1)*RecordSize]
				if field >= 0 {
					putUint40(rec[field:], v)
				} else {
					f := uint40At(rec, branchOffFirstLeaf)
					if v < f {
						continue
					}
					putUint40(rec[branchOffKeyLeaf:], v)
					putUint40(rec[branchOffSize:], v+1-f)
				}
				s, err := openMem("mem", files)
				if err != nil {
					t.Fatal(err)
				}
				for j := uint64(0); j < nb; j++ {
					for side, nav := range map[string]func(uint64) (Ref, error){"Left": s.Left, "Right": s.Right} {
						r, err := nav(j)
						if err != nil {
							if !errors.Is(err, ErrCorrupt) {
								t.Fatalf("branch %d field %d = %d: %s(%d): %v, want an error wrapping ErrCorrupt", i, field, v, side, j, err)
							}
							continue
						}
						limit := nb
						if r.IsLeaf() {
							limit = n
						}
						if r.Index() >= limit {
							t.Fatalf("branch %d field %d = %d: %s(%d) returned %v without an error, out of range (%d leaves, %d branches)",
								i, field, v, side, j, r, n, nb)
						}
					}
				}
				s.Close()
			}
		}
	}
}

// TestMetaFileEntryReservedFields: each data file's entry in meta
// (length, CRC32C, reserved) ends in 4 reserved bytes that must be zero; a
// meta whose checksum matches but whose reserved bytes are not zero is of
// a format this build does not know, and Open refuses it with ErrCorrupt
// naming the field's offset.
func TestMetaFileEntryReservedFields(t *testing.T) {
	orig := smallSnapshot(t, false)
	for i := range dataFileNames {
		off := metaOffFiles + i*metaFileEntrySize + 12
		files := copyFiles(orig)
		files[FileMeta][off+1] = 1
		fixMeta(files, false, false, true)
		_, err := openMem("mem", files)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s entry's reserved bytes set: Open: %v, want ErrCorrupt", dataFileNames[i], err)
		}
		if want := fmt.Sprintf("at offset %d:", off); !strings.Contains(err.Error(), want) {
			t.Fatalf("%s entry's reserved bytes set: %v, want the offset %d named", dataFileNames[i], err, off)
		}
	}
}

// TestFormat1LookupChecksumZero: a meta of format version 1 has no
// lookup file, and its lookup entry must be all zero, checksum included;
// a non-zero lookup checksum is corruption, not ignored.
func TestFormat1LookupChecksumZero(t *testing.T) {
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	values := [][]byte{[]byte("1"), []byte("2"), []byte("3")}
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, testutil.Seed(t), 3, false, keys, values)
	testutil.SnapshotToFormat1(t, dir)
	files := readDir(t, dir)
	if _, err := openMem(dir, files); err != nil {
		t.Fatalf("format 1 snapshot: %v", err)
	}
	off := metaOffFiles + metaFileIndexLookup*metaFileEntrySize + 8
	binary.LittleEndian.PutUint32(files[FileMeta][off:], 0xdeadbeef)
	fixMeta(files, false, false, true)
	if _, err := openMem(dir, files); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("format 1 meta with a lookup checksum: Open: %v, want ErrCorrupt", err)
	}
}

// TestLookupSlotLeafOutOfRange: a lookup slot is trusted only as far
// as it is checked. A slot whose tag matches the key and whose kvs offset
// leads to the key, but whose leaf index is past the last leaf (a damaged
// table that passed Open, before any Verify), must not make Lookup return
// that index as found: a caller reads the leaf's version or hash at it
// with the unchecked accessors. Lookup fails with ErrCorrupt instead.
func TestLookupSlotLeafOutOfRange(t *testing.T) {
	orig := smallSnapshot(t, false)
	s0, err := openMem("mem", orig)
	if err != nil {
		t.Fatal(err)
	}
	n := s0.LeafCount()
	slots := uint64(len(orig[FileLookup])) / LookupEntrySize
	for i := uint64(0); i < n; i++ {
		key, err := s0.LeafKey(i)
		if err != nil {
			t.Fatal(err)
		}
		key = append([]byte(nil), key...)
		h := lookupHash(key)
		files := copyFiles(orig)
		tbl := files[FileLookup]
		slot := lookupHome(h, slots)
		for binary.LittleEndian.Uint64(tbl[slot*LookupEntrySize:]) != lookupEntry(h, i) {
			slot = lookupNext(slot, slots)
		}
		for _, bad := range []uint64{n, n + 5, uint40Mask - 1} {
			binary.LittleEndian.PutUint64(tbl[slot*LookupEntrySize:], lookupEntry(h, bad))
			s, err := openMem("mem", files)
			if err != nil {
				t.Fatal(err)
			}
			idx, _, found, err := s.Lookup(key)
			if err == nil && found && idx >= n {
				t.Fatalf("key of leaf %d, its slot naming leaf %d: Lookup returned leaf %d of %d as found, without an error", i, bad, idx, n)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("key of leaf %d, its slot naming leaf %d: Lookup: %v, want an error wrapping ErrCorrupt", i, bad, err)
			}
			if err == nil {
				t.Fatalf("key of leaf %d, its slot naming leaf %d: Lookup passed (idx %d, found %v), want ErrCorrupt", i, bad, idx, found)
			}
			s.Close()
		}
	}
	s0.Close()
}
