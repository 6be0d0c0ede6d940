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
	dir := filepath.Join(t.TempDir(), "snap")
	if err := keysTree(t, n, "").WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, snapshot.FileBranches)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	put40 := func(rec []byte, off int, v uint64) {
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], v)
		copy(rec[off:off+5], x[:5])
	}
	for j := uint64(0); j < n-1; j++ {
		rec := b[j*snapshot.RecordSize:][:snapshot.RecordSize]
		put40(rec, 40, j+2)   // size
		put40(rec, 45, n-2-j) // first leaf
		put40(rec, 50, n-1-j) // key leaf
		rec[55] = 1           // height
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
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
