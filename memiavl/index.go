package memiavl

import (
	"bytes"
	"runtime/debug"
)

// GetWithIndex returns the position of key among the working tree's keys
// in order (the number of keys before it) and its value, or, when the tree
// does not hold key, the position it would take and a nil value: iavl's
// ImmutableTree.GetWithIndex. A nil key reads the empty key. The value is
// handed out as Get hands it out. It walks one path from the root and, in
// the snapshot's part of the tree, searches the subtree's leaves, which lie
// in one run of the snapshot's sorted leaves.
func (t *Tree) GetWithIndex(key []byte) (index int64, value []byte, err error) {
	if t.root.isNil() {
		return 0, nil, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	r := t.root
	kp := keyPrefix(key)
	for r.n != nil {
		n := r.n
		if n.height == 0 {
			switch c := bytes.Compare(n.key(), key); {
			case c == 0:
				return index, n.value(), nil
			case c < 0:
				return index + 1, nil, nil
			default:
				return index, nil, nil
			}
		}
		if n.less(key, kp) {
			r = n.left
		} else {
			index += t.sizeOf(n.left)
			r = n.right
		}
	}
	lo, hi := t.pers.leafRange(r.p)
	i := t.pers.searchLeaf(key, lo, hi)
	index += int64(i - lo)
	if i < hi {
		if k, v := t.pers.leafKV(i); bytes.Equal(k, key) {
			return index, handOut(v, true, readCopy), nil
		}
	}
	return index, nil, nil
}

// GetByIndex returns the key and value at position index among the working
// tree's keys in order, or nils when index is negative or not below Size:
// iavl's ImmutableTree.GetByIndex. A key or value read from the snapshot is
// copied; one held in memory must not be modified.
func (t *Tree) GetByIndex(index int64) (key, value []byte, err error) {
	if t.root.isNil() || index < 0 {
		return nil, nil, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	r := t.root
	if index >= t.sizeOf(r) {
		return nil, nil, nil
	}
	for r.n != nil {
		n := r.n
		if n.height == 0 {
			return n.key(), n.value(), nil
		}
		if ls := t.sizeOf(n.left); index < ls {
			r = n.left
		} else {
			index -= ls
			r = n.right
		}
	}
	lo, hi := t.pers.leafRange(r.p)
	if uint64(index) >= hi-lo {
		// the sizes above said the subtree holds it
		panic(corruptf("leaf %d of a subtree of %d leaves [%d, %d) of %s", index, hi-lo, lo, hi, t.pers.s.Dir()))
	}
	k, v := t.pers.leafKV(lo + uint64(index))
	return bytes.Clone(k), handOut(v, true, readCopy), nil
}
