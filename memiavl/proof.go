package memiavl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime/debug"

	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
)

// ICS23 proofs, identical to the ones cosmos/iavl v1 produces for a tree of
// the same shape (see its proof_ics23.go): verification against the root hash
// with ics23.IavlSpec succeeds exactly when it does for iavl's, and the proofs
// marshal to the same bytes.
//
// An existence proof is the leaf operation followed by one inner operation
// per node on the path from the leaf up to the root:
//
//	leaf:  prefix = varint(0) | varint(1) | varint(leaf version),
//	       key and sha256(value), each uvarint length-prefixed
//	inner: prefix = varint(height) | varint(size) | varint(version), then
//	       for a step up from a left child:  prefix | 0x20, suffix = 0x20 rightHash
//	       for a step up from a right child: prefix | 0x20 leftHash | 0x20, no suffix
//
// Varints are zigzag-signed (encoding/binary.PutVarint), as in the node hash.
// The proofs are taken over the working tree; for a copy of a saved version
// (what a database view serves) that is the saved version. Nodes changed
// since the last save carry the working version, so a proof over them
// verifies against the working root hash. iavl's do too after its first
// save; before it, with an initial version above 1, iavl's proofs over
// unsaved nodes do not verify against its working hash.

// GetMembershipProof returns an ICS23 existence proof of key. The proof
// holds copies of the key and value; it stays valid after the tree is closed.
func (t *Tree) GetMembershipProof(key []byte) (proof *ics23.CommitmentProof, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	exist, err := t.existenceProof(key)
	if err != nil {
		return nil, err
	}
	return &ics23.CommitmentProof{Proof: &ics23.CommitmentProof_Exist{Exist: exist}}, nil
}

// GetNonMembershipProof returns an ICS23 non-existence proof of key: the
// existence proofs of its neighbours, the largest key below it (Left) and the
// smallest key above it (Right), either absent at an end of the key range.
// For an empty tree both are absent, as iavl returns it (such a proof does
// not verify against any root).
func (t *Tree) GetNonMembershipProof(key []byte) (proof *ics23.CommitmentProof, err error) {
	if key == nil {
		key = []byte{} // the empty key, as a read of nil reads it (and iavl proves it)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	has, err := t.Has(key)
	if err != nil {
		return nil, err
	}
	if has {
		return nil, fmt.Errorf("%w: cannot prove the absence of %s", ErrKeyFound, hexkey.Upper(key))
	}
	nonexist := &ics23.NonExistenceProof{Key: bytes.Clone(key)}
	if left := t.neighbour(key, false); left != nil {
		if nonexist.Left, err = t.existenceProof(left); err != nil {
			return nil, err
		}
	}
	if right := t.neighbour(key, true); right != nil {
		if nonexist.Right, err = t.existenceProof(right); err != nil {
			return nil, err
		}
	}
	return &ics23.CommitmentProof{Proof: &ics23.CommitmentProof_Nonexist{Nonexist: nonexist}}, nil
}

// neighbour returns the smallest key above key (above) or the largest key
// below it, nil if there is none. key itself must be absent.
func (t *Tree) neighbour(key []byte, above bool) []byte {
	var best ref
	found := false
	r := t.root
	if r.isNil() {
		return nil
	}
	for !t.isLeaf(r) {
		// The left subtree holds keys < node key, the right one keys >= it.
		if bytes.Compare(key, t.keyOf(r)) < 0 {
			if above {
				// the smallest key of the right subtree is a candidate
				best, found = t.rightOf(r), true
			}
			r = t.leftOf(r)
		} else {
			if !above {
				best, found = t.leftOf(r), true
			}
			r = t.rightOf(r)
		}
	}
	lk := t.keyOf(r)
	if c := bytes.Compare(lk, key); (above && c > 0) || (!above && c < 0) {
		return lk
	}
	if !found {
		return nil
	}
	// the extreme leaf of the last subtree passed on the other side
	for !t.isLeaf(best) {
		if above {
			best = t.leftOf(best)
		} else {
			best = t.rightOf(best)
		}
	}
	return t.keyOf(best)
}

// existenceProof builds the proof of key by walking from the root to its
// leaf, recording each inner node and the hash of the sibling not taken.
func (t *Tree) existenceProof(key []byte) (*ics23.ExistenceProof, error) {
	if key == nil {
		key = []byte{} // the empty key, as a read of nil reads it (and iavl proves it)
	}
	if t.root.isNil() {
		return nil, fmt.Errorf("%w: %s (empty tree)", ErrKeyNotFound, hexkey.Upper(key))
	}
	type step struct {
		r       ref
		sibling []byte
		left    bool // the sibling is the left child (the path went right)
	}
	steps := make([]step, 0, 32)
	r := t.root
	for !t.isLeaf(r) {
		if bytes.Compare(key, t.keyOf(r)) < 0 {
			steps = append(steps, step{r: r, sibling: t.hashOf(t.rightOf(r))})
			r = t.leftOf(r)
		} else {
			steps = append(steps, step{r: r, sibling: t.hashOf(t.leftOf(r)), left: true})
			r = t.rightOf(r)
		}
	}
	if !bytes.Equal(t.keyOf(r), key) {
		return nil, fmt.Errorf("%w: %s", ErrKeyNotFound, hexkey.Upper(key))
	}
	var value []byte
	if r.n != nil {
		value = r.n.value()
	} else {
		value = t.pers.value(r.p)
	}
	if value == nil {
		value = []byte{}
	}
	path := make([]*ics23.InnerOp, 0, len(steps))
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		prefix := make([]byte, 0, 3*binary.MaxVarintLen64+2+2*len(s.sibling))
		prefix = binary.AppendVarint(prefix, int64(t.heightOf(s.r)))
		prefix = binary.AppendVarint(prefix, t.sizeOf(s.r))
		prefix = binary.AppendVarint(prefix, t.versionOf(s.r))
		op := &ics23.InnerOp{Hash: ics23.HashOp_SHA256}
		if s.left {
			prefix = append(prefix, lengthByte)
			prefix = append(prefix, s.sibling...)
			prefix = append(prefix, lengthByte)
		} else {
			prefix = append(prefix, lengthByte)
			suffix := make([]byte, 0, 1+len(s.sibling))
			suffix = append(suffix, lengthByte)
			op.Suffix = append(suffix, s.sibling...)
		}
		op.Prefix = prefix
		path = append(path, op)
	}
	return &ics23.ExistenceProof{
		Key:   bytes.Clone(t.keyOf(r)),
		Value: bytes.Clone(value),
		Leaf:  leafOp(t.versionOf(r)),
		Path:  path,
	}, nil
}

// lengthByte is the length prefix of a sha256 hash inside a node's preimage.
const lengthByte = 0x20

func leafOp(version int64) *ics23.LeafOp {
	prefix := make([]byte, 0, 3*binary.MaxVarintLen64)
	prefix = binary.AppendVarint(prefix, 0)
	prefix = binary.AppendVarint(prefix, 1)
	prefix = binary.AppendVarint(prefix, version)
	return &ics23.LeafOp{
		Hash:         ics23.HashOp_SHA256,
		PrehashValue: ics23.HashOp_SHA256,
		Length:       ics23.LengthOp_VAR_PROTO,
		Prefix:       prefix,
	}
}
