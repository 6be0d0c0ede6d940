package memiavl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// compareIndexes checks GetWithIndex of every present key, of absent and
// removed keys and of the empty key, and GetByIndex of every position and
// of positions out of range, against iavl's working tree.
func (w *workload) compareIndexes() {
	w.t.Helper()
	keys := append([][]byte{nil, {}, {0xff, 0xff, 0xff}}, w.keys...)
	keys = append(keys, w.gone...)
	for i := 0; i < 50; i++ {
		keys = append(keys, w.gen.Key())
	}
	for _, k := range keys {
		i1, v1, err := w.ours.GetWithIndex(k)
		if err != nil {
			w.t.Fatal(err)
		}
		i2, v2, err := w.ref.GetWithIndex(k)
		if err != nil {
			w.t.Fatal(err)
		}
		if i1 != i2 || !bytes.Equal(v1, v2) || (v1 == nil) != (v2 == nil) {
			w.t.Fatalf("op %d: GetWithIndex(%X) = %d, %X; iavl %d, %X", w.ops, k, i1, v1, i2, v2)
		}
	}
	size := w.ours.Size()
	if size != w.ref.Size() {
		w.t.Fatalf("size %d, iavl %d", size, w.ref.Size())
	}
	for i := int64(-2); i <= size+1; i++ {
		k1, v1, err := w.ours.GetByIndex(i)
		if err != nil {
			w.t.Fatal(err)
		}
		k2, v2, err := w.ref.GetByIndex(i)
		if err != nil {
			w.t.Fatal(err)
		}
		if !bytes.Equal(k1, k2) || !bytes.Equal(v1, v2) || (k1 == nil) != (k2 == nil) || (v1 == nil) != (v2 == nil) {
			w.t.Fatalf("op %d: GetByIndex(%d) = %X=%X; iavl %X=%X", w.ops, i, k1, v1, k2, v2)
		}
	}
}

// TestIndexesAgainstIAVL: GetWithIndex and GetByIndex equal iavl's on the
// working tree, empty and not, with unsaved changes, on a tree held in
// memory and on one partly read from its snapshot.
func TestIndexesAgainstIAVL(t *testing.T) {
	w := newWorkload(t, 0)
	w.compareIndexes() // empty
	for round := 0; round < scale(12, 4); round++ {
		for v := 0; v < 5; v++ {
			for i := 0; i < 60; i++ {
				w.step()
			}
			w.save()
		}
		w.compareIndexes()
		if round%2 == 1 {
			dir := filepath.Join(t.TempDir(), "snap")
			if err := w.ours.WriteSnapshot(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			_, w.ours = openSnapshot(t, dir)
			w.compareIndexes() // all from the snapshot
		}
		for i := 0; i < 40; i++ {
			w.step()
		}
		w.compareIndexes() // unsaved changes above the snapshot
		w.save()
	}
	// a single leaf, and again empty
	for len(w.keys) > 1 {
		k, i := w.pickKey()
		w.remove(k)
		w.keys[i] = w.keys[len(w.keys)-1]
		w.keys = w.keys[:len(w.keys)-1]
	}
	w.compareIndexes()
	w.remove(w.keys[0])
	w.keys = nil
	w.compareIndexes()
}

// TestGetByIndexCopiesSnapshotData: keys and values GetByIndex and
// GetWithIndex read from a snapshot are copies, valid after it closes.
func TestGetByIndexCopiesSnapshotData(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := tr.Set([]byte(k), []byte("value-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "snap")
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, onSnap := openSnapshot(t, dir)
	k, v, err := onSnap.GetByIndex(1)
	if err != nil || string(k) != "b" || string(v) != "value-b" {
		t.Fatalf("GetByIndex(1) = %q %q %v", k, v, err)
	}
	i, v2, err := onSnap.GetWithIndex([]byte("c"))
	if err != nil || i != 2 || string(v2) != "value-c" {
		t.Fatalf("GetWithIndex(c) = %d %q %v", i, v2, err)
	}
	if s.Holds(k) || s.Holds(v) || s.Holds(v2) {
		t.Fatal("a key or value points into the snapshot's mapping")
	}
}
