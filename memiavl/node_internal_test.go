package memiavl

import (
	"testing"
	"unsafe"
)

// TestNodeLayout pins the in-memory node at two cache lines, the first
// holding every field a descent reads.
func TestNodeLayout(t *testing.T) {
	var n node
	if s := unsafe.Sizeof(n); s != 128 {
		t.Errorf("node is %d bytes, want 128", s)
	}
	if end := unsafe.Offsetof(n.right) + unsafe.Sizeof(n.right); end > 64 {
		t.Errorf("descent fields end at byte %d, past the first cache line", end)
	}
}

// TestNodeBytes checks the string-backed key and value accessors: shared
// bytes, and non-nil empty slices.
func TestNodeBytes(t *testing.T) {
	key, value := []byte("key"), []byte{}
	n := newLeaf(key, value, 1)
	if k := n.key(); &k[0] != &key[0] || len(k) != 3 {
		t.Fatalf("key %q does not share the given bytes", k)
	}
	if v := n.value(); v == nil || len(v) != 0 {
		t.Fatalf("empty value read back as %#v", v)
	}
	if k := newLeaf([]byte{}, []byte("v"), 1).key(); k == nil || len(k) != 0 {
		t.Fatalf("empty key read back as %#v", k)
	}
}
