package snapshot

import (
	"bytes"
	"fmt"
	"testing"
)

// TestMapping: a key or value an open snapshot hands out is found to be
// its slice, a copy or any other memory is not, and neither is it once the
// snapshot is closed.
func TestMapping(t *testing.T) {
	var keys, values [][]byte
	for i := 0; i < 100; i++ {
		keys = append(keys, []byte(fmt.Sprintf("key-%03d", i)))
		values = append(values, []byte(fmt.Sprintf("value-%03d", i)))
	}
	a := writeAndOpen(t, 1, 1, false, keys, values)
	b := writeAndOpen(t, 2, 1, false, keys, values)
	for _, s := range []*Snapshot{a, b} {
		k, v, err := s.LeafKV(50)
		if err != nil {
			t.Fatal(err)
		}
		if Mapping(k) != s || Mapping(v) != s || Mapping(v[1:]) != s {
			t.Fatalf("the key and value of a leaf of %s are not found to be its", s.Dir())
		}
		if Mapping(bytes.Clone(v)) != nil || Mapping(nil) != nil || Mapping(v[:0]) != nil {
			t.Fatal("a copy or an empty slice found to be a snapshot's")
		}
	}
	_, v, err := a.LeafKV(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if Mapping(v) != nil {
		t.Fatal("a slice of a closed snapshot found to be held")
	}
	if _, bv, _ := b.LeafKV(3); Mapping(bv) != b {
		t.Fatal("the other snapshot's slice no longer found after a close")
	}
}
