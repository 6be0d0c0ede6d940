package memiavl

import (
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
type node struct {
	key     []byte
	value   []byte // leaves only
	left    ref    // inner nodes only
	right   ref    // inner nodes only
	version int64
	size    int64
	height  uint8
	hashed  bool
	hash    [nodehash.Size]byte
}

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
	return &node{key: key, value: value, version: version, size: 1}
}
