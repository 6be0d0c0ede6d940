package memiavl

import (
	"bytes"
	"encoding/binary"
	"unsafe"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// node is an in-memory IAVL node. A leaf has height 0, size 1, its key and
// value; an inner node has height >= 1, two children and the smallest key of
// its right subtree as its key.
//
// A node whose version equals the tree's working version has not been
// committed and is owned by that tree alone, so it is mutated in place. A node
// of an older version is committed and immutable: it may be shared by copies
// of the tree read from other goroutines, and a mutation copies it first.
//
// The layout makes a node 112 bytes, an allocator size class of its own:
// the first 64 hold what a descent reads (height, key prefix, key,
// children), the rest what hashing adds. Keys and values are held as string
// headers, which are 8 bytes smaller than slices, and a leaf's value takes
// the place of its right child (see value), so leaves and inner nodes have
// one layout; key and value convert them back without copying.
type node struct {
	height uint8
	hashed bool
	// snap is 1 + the node's index in the snapshot last written with a
	// NodeMap (see WriteSnapshotMapped), 0 if none. Only that writer sets
	// it and only Rebase reads it; nothing else reads it, so copies of a
	// node list their fields instead of copying the struct.
	snap  uint32
	pfx   uint64 // keyPrefix(key): decides most comparisons without reading key
	k     string // the key's bytes, as given to Set; never modified
	left  ref    // inner nodes only
	right ref    // inner nodes; a leaf's value (see value)

	version int64
	size    int64
	hash    [nodehash.Size]byte
}

// bstr returns a string sharing b's bytes. The tree never modifies key or
// value bytes, and callers must not modify them after handing them over.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

var emptyValue = []byte{}

// strb returns the bytes of a string made by bstr, never nil: an empty key
// or value is a non-nil empty slice.
func strb(s string) []byte {
	if len(s) == 0 {
		return emptyValue
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// key returns the node's key. The slice must not be modified.
func (n *node) key() []byte { return strb(n.k) }

// A leaf has no children, so it keeps its value, as given to Set, in the
// slot of its right child: a ref and a string are both a pointer word
// followed by a plain word (see TestNodeLayout), and the pointer word keeps
// the value's bytes alive for the collector as the string would. Nothing
// follows the right child of a leaf.

// valueStr returns a leaf's value as a string sharing its bytes.
func (n *node) valueStr() string { return *(*string)(unsafe.Pointer(&n.right)) }

// setValue sets a leaf's value.
func (n *node) setValue(v string) { *(*string)(unsafe.Pointer(&n.right)) = v }

// value returns a leaf's value. The slice must not be modified.
func (n *node) value() []byte { return strb(n.valueStr()) }

// ref points at a node: an in-memory node when n is set, otherwise a node of
// the tree's snapshot. A ref is a plain value; following it allocates nothing.
type ref struct {
	n *node
	p pref
}

var nilRef = ref{p: prefNone}

func memRef(n *node) ref { return ref{n: n} }

func (r ref) isNil() bool { return r.n == nil && r.p == prefNone }

func newLeaf(key, value []byte, version int64) *node {
	n := &node{pfx: keyPrefix(key), k: bstr(key), version: version, size: 1}
	n.setValue(bstr(value))
	return n
}

// keyPrefix returns the first 8 bytes of key, zero padded, as a big-endian
// number. Keys whose prefixes differ order like their prefixes; equal
// prefixes need the full keys.
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// less reports whether key, whose prefix is kp, sorts before n's key.
func (n *node) less(key []byte, kp uint64) bool {
	if kp != n.pfx {
		return kp < n.pfx
	}
	return bytes.Compare(key, n.key()) < 0
}

// setKey sets n's key and prefix.
func (n *node) setKey(key []byte) {
	n.k, n.pfx = bstr(key), keyPrefix(key)
}
