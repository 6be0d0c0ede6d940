package memiavl

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestNodeLayout pins the in-memory node at the allocator's 112-byte size
// class, with every field a descent reads in its first 64 bytes, and checks
// that a ref can hold a leaf's value: a string's pointer word and length
// word at a ref's pointer and plain words.
func TestNodeLayout(t *testing.T) {
	var n node
	if s := unsafe.Sizeof(n); s != 112 {
		t.Errorf("node is %d bytes, want 112", s)
	}
	if end := unsafe.Offsetof(n.right) + unsafe.Sizeof(n.right); end > 64 {
		t.Errorf("descent fields end at byte %d, past the first 64", end)
	}
	var r ref
	if unsafe.Sizeof(r) != unsafe.Sizeof("") || unsafe.Offsetof(r.n) != 0 ||
		unsafe.Offsetof(r.p) != unsafe.Sizeof(uintptr(0)) || unsafe.Sizeof(r.p) != unsafe.Sizeof(0) {
		t.Errorf("ref {n %d@%d, p %d@%d} cannot hold a string", unsafe.Sizeof(r.n), unsafe.Offsetof(r.n), unsafe.Sizeof(r.p), unsafe.Offsetof(r.p))
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
	value = []byte("value")
	n.setValue(bstr(value))
	if v := n.value(); &v[0] != &value[0] || len(v) != 5 || !bytes.Equal(n.key(), key) {
		t.Fatalf("value %q after setValue, key %q", v, n.key())
	}
}
