package memiavl_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// patchedBranchesTree writes keysTree(n) into a snapshot, lets patch change
// its branches file and returns the tree NewFromSnapshot opens on it, or
// its error.
func patchedBranchesTree(t *testing.T, n int, patch func(branches []byte)) (*memiavl.Tree, error) {
	t.Helper()
	return patchedTree(t, n, snapshot.FileBranches, patch)
}

// patchedTree is patchedBranchesTree for any file of the snapshot (whose
// checksum then fails, as Verify would find).
func patchedTree(t *testing.T, n int, file string, patch func(b []byte)) (*memiavl.Tree, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if err := keysTree(t, n, "").WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	patch(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return memiavl.NewFromSnapshot(s, memiavl.Options{})
}

// put40 sets the 40-bit little-endian field of rec at off.
func put40(rec []byte, off int, v uint64) {
	var x [8]byte
	binary.LittleEndian.PutUint64(x[:], v)
	copy(rec[off:off+5], x[:5])
}

// damagedRangeTree writes keysTree(n), sets the size of branch j (the
// root for j < 0) to end just after its key leaf (self-consistent:
// first < key leaf < end <= LeafCount) and opens the tree on it.
func damagedRangeTree(t *testing.T, n int, j int64) (*memiavl.Tree, uint64) {
	var keyLeaf uint64
	tr, err := patchedBranchesTree(t, n, func(b []byte) {
		if j < 0 {
			j = int64(len(b)/snapshot.RecordSize) - 1
		}
		rec := b[j*snapshot.RecordSize:][:snapshot.RecordSize]
		get40 := func(off int) uint64 { return binary.LittleEndian.Uint64(rec[off:off+8]) & (1<<40 - 1) }
		keyLeaf = get40(50)
		put40(rec, 40, keyLeaf+1-get40(45))
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr, keyLeaf
}

// checkReads: every read that uses leaf ranges must report ErrCorrupt or
// agree with Get, which finds all n keys through the lookup table.
func checkReads(t *testing.T, tr *memiavl.Tree, n int, probe int) {
	key := []byte(fmt.Sprintf("key-%05d", probe))
	if v, err := tr.Get(key); err != nil || v == nil {
		t.Fatalf("Get(%s) = %q, %v", key, v, err)
	}
	if got, err := tr.SizeChecked(); err == nil && got != int64(n) {
		t.Errorf("SizeChecked = %d, nil error; Get finds %d keys", got, n)
	}
	it := tr.Iterator(nil, nil, true)
	count := 0
	for ; it.Valid(); it.Next() {
		count++
	}
	if it.Error() == nil && count != n {
		t.Errorf("Iterator(nil, nil) yields %d keys, no error; Get finds %d", count, n)
	}
	if idx, v, err := tr.GetWithIndex(key); err == nil && v == nil {
		t.Errorf("GetWithIndex(%s) = %d, nil, nil: absent", key, idx)
	}
	if k, _, err := tr.GetByIndex(int64(probe)); err == nil && string(k) != string(key) {
		t.Errorf("GetByIndex(%d) = %q, nil error; want %s", probe, k, key)
	}
}

// TestRootRangeDamaged: the root's recorded range cut short.
func TestRootRangeDamaged(t *testing.T) {
	const n = 600
	tr, _ := damagedRangeTree(t, n, -1)
	checkReads(t, tr, n, n-1)
}

// TestChildRangeDamaged: the root's left child's recorded range cut
// short, read under an in-memory root (after a Set in the right half).
func TestChildRangeDamaged(t *testing.T) {
	const n = 600
	// branch 254 of 599 is the root's left child (256 leaves) here
	tr, keyLeaf := damagedRangeTree(t, n, 254)
	if _, err := tr.Set([]byte(fmt.Sprintf("key-%05d", n-1)), []byte("x")); err != nil {
		if !errors.Is(err, memiavl.ErrCorrupt) {
			t.Fatal(err)
		}
		return // the Set found the damage
	}
	checkReads(t, tr, n, int(keyLeaf)+1)
}

// TestDegenerateDepth: a "caterpillar" snapshot, whose branch j covers
// leaves [n-2-j, n) split at n-1-j (its left child a leaf, its right child
// the branch before it), passes every check of a single record and of a
// child's position, and is n-1 levels deep, every height recorded as 1.
// The tree's walks (Set, Remove, Check, the node-by-node snapshot write)
// recurse once per level: with a few million leaves a Set of the deepest
// key overflows the goroutine stack, a fatal error no recover catches. A
// child must be lower than its parent, which bounds a path at 255 branches,
// so the Set must fail with ErrCorrupt at the first level.
func TestDegenerateDepth(t *testing.T) {
	const n = 2000
	tr, err := patchedBranchesTree(t, n, func(b []byte) {
		for j := uint64(0); j < n-1; j++ {
			rec := b[j*snapshot.RecordSize:][:snapshot.RecordSize]
			put40(rec, 40, j+2)   // size
			put40(rec, 45, n-2-j) // first leaf
			put40(rec, 50, n-1-j) // key leaf
			rec[55] = 1           // height
		}
	})
	if err != nil {
		if !errors.Is(err, memiavl.ErrCorrupt) {
			t.Fatal(err)
		}
		return
	}
	if _, err := tr.Set([]byte(fmt.Sprintf("key-%05d", n-1)), []byte("x")); !errors.Is(err, memiavl.ErrCorrupt) {
		t.Fatalf("Set of the deepest key of a %d-level caterpillar whose heights are all 1: %v, want ErrCorrupt", n-1, err)
	}
}

// TestExportRootHeightOver127: an export node's height is an int8, as in
// iavl's export stream; a snapshot whose root records a height over 127
// (which passes a child's "lower than its parent" check) exports an error,
// not a negative height.
func TestExportRootHeightOver127(t *testing.T) {
	const n = 40
	tr, err := patchedBranchesTree(t, n, func(b []byte) {
		b[len(b)-snapshot.RecordSize+55] = 200 // the root's height
	})
	if err != nil {
		if !errors.Is(err, memiavl.ErrCorrupt) {
			t.Fatal(err)
		}
		return
	}
	e := tr.Export()
	defer e.Close()
	for {
		node, err := e.Next()
		if errors.Is(err, memiavl.ErrCorrupt) {
			return
		}
		if err != nil {
			t.Fatalf("export of a root of height 200: %v, want ErrCorrupt", err)
		}
		if node.Height < 0 {
			t.Fatalf("export of a root of height 200: node %q of height %d", node.Key, node.Height)
		}
	}
}
