package memiavl_test

import (
	"bytes"
	"testing"

	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestIndexDamageReads: one damaged byte of the index file (which Open does
// not read, and which a tree reads before the database's background check
// has verified it) must not make a bounded iterator start below its start
// or skip keys of its range, nor GetWithIndex report a present key absent:
// each read is right or fails.
func TestIndexDamageReads(t *testing.T) {
	// index entry 2 is the key prefix of leaf 128 ("key-0012"): make it
	// sort after every key
	tr, err := patchedTree(t, 300, snapshot.FileIndex, func(b []byte) { b[2*snapshot.IndexEntrySize] = 0xff })
	if err != nil {
		t.Fatal(err)
	}

	start, end := []byte("key-00150"), []byte("key-00160")
	var got [][]byte
	it := tr.Iterator(start, end, true)
	for ; it.Valid(); it.Next() {
		got = append(got, bytes.Clone(it.Key()))
	}
	itErr := it.Error()
	it.Close()
	if itErr == nil {
		if len(got) != 10 || !bytes.Equal(got[0], start) {
			t.Errorf("Iterator(%s, %s) yielded %d keys %q and no error; want the 10 keys key-00150..key-00159 or an ErrCorrupt", start, end, len(got), got)
		}
	}

	it = tr.Iterator(start, nil, true)
	if it.Valid() && it.Error() == nil && bytes.Compare(it.Key(), start) < 0 {
		t.Errorf("Iterator(%s, nil) starts at %s, below its start, without an error", start, it.Key())
	}
	it.Close()

	idx, v, err := tr.GetWithIndex([]byte("key-00150"))
	if err == nil && (idx != 150 || v == nil) {
		t.Errorf("GetWithIndex(key-00150) = %d, %q, nil; want 150, \"value-150\" or an ErrCorrupt", idx, v)
	}
	if v, err := tr.Get([]byte("key-00150")); err != nil || string(v) != "value-150" {
		t.Fatalf("Get: %q, %v", v, err)
	}
}
