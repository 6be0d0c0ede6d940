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

// damagedRangeTree writes keysTree(n), sets the size of branch j (the
// root for j < 0) to end just after its key leaf (self-consistent:
// first < key leaf < end <= LeafCount) and opens the tree on it.
func damagedRangeTree(t *testing.T, n int, j int64) (*memiavl.Tree, uint64) {
	dir := filepath.Join(t.TempDir(), "snap")
	if err := keysTree(t, n, "").WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, snapshot.FileBranches)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if j < 0 {
		j = int64(len(b)/snapshot.RecordSize) - 1
	}
	rec := b[j*snapshot.RecordSize:][:snapshot.RecordSize]
	get40 := func(off int) uint64 { return binary.LittleEndian.Uint64(rec[off:off+8]) & (1<<40 - 1) }
	keyLeaf := get40(50)
	var x [8]byte
	binary.LittleEndian.PutUint64(x[:], keyLeaf+1-get40(45))
	copy(rec[40:45], x[:5])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
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
