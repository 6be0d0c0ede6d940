// Package memiavl is the IAVL tree (an AVL+ Merkle tree) of one store, with
// shape and hashes identical to cosmos/iavl v1.2 for the same operations.
//
// A tree is either in memory only (New) or on top of an immutable,
// memory-mapped snapshot (NewFromSnapshot): reads of unchanged parts come
// from the snapshot without allocating, and Set and Remove copy only the
// in-memory path they touch (copy-on-write), so the changes since the
// snapshot are the in-memory nodes. SaveVersion hashes the changed nodes and
// returns the root hash and version; WriteSnapshot streams the tree into a
// new snapshot directory (package snapshot), copying unchanged subtrees in
// bulk, with bounded memory.
//
// A Tree is used by one goroutine at a time. Copy returns a tree of the
// last saved version that shares every committed node and may be read by
// other goroutines while the original changes. Set retains the key and
// value it is given. A nil key or value given to Set or Remove is an error
// (ErrNilKey, ErrNilValue; cosmos/iavl takes a nil key as the empty key,
// and refuses a nil value too); an empty key or value is valid, as in iavl, and
// a read of a nil key reads the empty key, as iavl's do. A key or value
// longer than MaxKeyValueSize (2^32-1 bytes, the snapshot format's limit)
// is refused by Set (ErrTooLarge), where iavl takes any length. The calls that return an
// error report a damaged snapshot they meet as an error wrapping ErrCorrupt
// instead of faulting; an iterator stops and reports it through Error;
// Size, Height and RootHash, which return no error, panic with it
// (SizeChecked, HeightChecked and RootHashChecked return it).
//
// Proofs (GetMembershipProof, GetNonMembershipProof) are ICS23 commitment
// proofs byte-identical to cosmos/iavl's; Export and Importer exchange
// state-sync nodes in iavl's order; Check verifies a tree's structure and
// every hash.
package memiavl
