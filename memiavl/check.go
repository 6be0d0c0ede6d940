package memiavl

import (
	"bytes"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// Check verifies the structure of the working tree: heights, AVL balance,
// sizes, strict key order, inner node keys (the smallest key of the right
// subtree), child versions not newer than their parent, and every cached or
// stored hash recomputed from the keys and values. It reads every node and
// is meant for tests and offline verification.
func (t *Tree) Check() (err error) {
	if t.root.isNil() {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	// nodes changed since the last save carry the working version; at
	// the last version there is none (and no changed node)
	bound := t.version
	if bound != math.MaxInt64 {
		bound = t.WorkingVersion()
	}
	_, err = t.check(t.root, nil, bound)
	return err
}

type checkResult struct {
	height  uint8
	size    int64
	minKey  []byte
	maxKey  []byte
	hash    [nodehash.Size]byte
	version int64
}

func (t *Tree) check(r ref, path []byte, maxVersion int64) (checkResult, error) {
	var res checkResult
	res.version = t.versionOf(r)
	if res.version > maxVersion || res.version <= 0 {
		return res, fmt.Errorf("%w: node at path %s has version %d, parent or tree at %d", ErrCorrupt, pathString(path), res.version, maxVersion)
	}
	if r.n != nil && r.n.pfx != keyPrefix(r.n.key()) {
		return res, fmt.Errorf("%w: node at path %s has a stale key prefix", ErrCorrupt, pathString(path))
	}
	if t.isLeaf(r) {
		key := t.keyOf(r)
		var value []byte
		if r.n != nil {
			value = r.n.value()
			if r.n.size != 1 {
				return res, fmt.Errorf("%w: leaf at path %s has size %d", ErrCorrupt, pathString(path), r.n.size)
			}
			if value == nil {
				return res, fmt.Errorf("%w: leaf at path %s has a nil value", ErrCorrupt, pathString(path))
			}
		} else {
			value = t.pers.value(r.p)
		}
		res.height, res.size, res.minKey, res.maxKey = 0, 1, key, key
		nodehash.Leaf(res.hash[:0], key, value, res.version)
		if err := t.checkHash(r, res.hash[:], path); err != nil {
			return res, err
		}
		return res, nil
	}
	l, err := t.check(t.leftOf(r), append(path, 'L'), res.version)
	if err != nil {
		return res, err
	}
	rr, err := t.check(t.rightOf(r), append(path, 'R'), res.version)
	if err != nil {
		return res, err
	}
	res.height = max(l.height, rr.height) + 1
	res.size = l.size + rr.size
	res.minKey, res.maxKey = l.minKey, rr.maxKey
	switch {
	case t.heightOf(r) != res.height:
		return res, fmt.Errorf("%w: node at path %s has height %d, want %d", ErrCorrupt, pathString(path), t.heightOf(r), res.height)
	case t.sizeOf(r) != res.size:
		return res, fmt.Errorf("%w: node at path %s has size %d, want %d", ErrCorrupt, pathString(path), t.sizeOf(r), res.size)
	case int(l.height)-int(rr.height) > 1 || int(rr.height)-int(l.height) > 1:
		return res, fmt.Errorf("%w: node at path %s is unbalanced (%d vs %d)", ErrCorrupt, pathString(path), l.height, rr.height)
	case bytes.Compare(l.maxKey, rr.minKey) >= 0:
		return res, fmt.Errorf("%w: keys out of order at path %s", ErrCorrupt, pathString(path))
	case !bytes.Equal(t.keyOf(r), rr.minKey):
		return res, fmt.Errorf("%w: node at path %s has key %s, want %s", ErrCorrupt, pathString(path), hexkey.Upper(t.keyOf(r)), hexkey.Upper(rr.minKey))
	}
	nodehash.Inner(res.hash[:0], res.height, res.size, res.version, l.hash[:], rr.hash[:])
	if err := t.checkHash(r, res.hash[:], path); err != nil {
		return res, err
	}
	return res, nil
}

func (t *Tree) checkHash(r ref, want []byte, path []byte) error {
	var got []byte
	if r.n == nil {
		got = t.pers.hash(r.p)
	} else if r.n.hashed {
		got = r.n.hash[:]
	} else {
		return nil
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%w: node at path %s has hash %X, recomputed %X", ErrCorrupt, pathString(path), got, want)
	}
	return nil
}

func pathString(p []byte) string {
	if len(p) == 0 {
		return "root"
	}
	return string(p)
}
