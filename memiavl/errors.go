package memiavl

import (
	"errors"
	"math"
)

// MaxKeyValueSize is the most bytes a key, and a value, may have: the
// snapshot format records their lengths in 32 bits.
const MaxKeyValueSize = math.MaxUint32

// Sentinel errors returned by the tree. Callers test them with errors.Is.
var (
	// ErrNilKey is returned when a nil key is given to a mutation. An empty,
	// non-nil key is a valid key.
	ErrNilKey = errors.New("memiavl: nil key")
	// ErrNilValue is returned by Set for a nil value. An empty, non-nil value is
	// a valid value and distinct from a deleted key.
	ErrNilValue = errors.New("memiavl: nil value")
	// ErrTooLarge is returned by Set for a key or a value longer than
	// MaxKeyValueSize bytes.
	ErrTooLarge = errors.New("memiavl: key or value too large")
	// ErrCorrupt wraps every inconsistency found in a tree's nodes.
	ErrCorrupt = errors.New("memiavl: corrupt tree")
	// ErrVersion is returned for an invalid or out-of-order version.
	ErrVersion = errors.New("memiavl: invalid version")

	// ErrKeyNotFound is returned by GetMembershipProof for an absent key.
	ErrKeyNotFound = errors.New("memiavl: key not found")

	// ErrKeyFound is returned by GetNonMembershipProof for a present key.
	ErrKeyFound = errors.New("memiavl: key is present")

	// ErrImport wraps every rejection of an import stream by Importer: a node
	// that does not fit the post-order of a valid IAVL tree at the import
	// version, or use of a finished importer.
	ErrImport = errors.New("memiavl: invalid import stream")

	// ErrRebase is returned by Rebase when the node map does not fit the
	// tree: the tree is not a later version of the one written, or a mapped
	// node's hash differs from the one it replaces.
	ErrRebase = errors.New("memiavl: cannot rebase tree")

	// ErrExclusive is returned by a snapshot write or an export of a tree
	// in exclusive mode (SetExclusive) with unsaved changes: those changed
	// its last saved version in place.
	ErrExclusive = errors.New("memiavl: exclusive tree with unsaved changes")

	// ErrExportDone is returned by Exporter.Next after the last node. (It plays
	// the part of cosmos/iavl's ErrorExportDone.)
	ErrExportDone = errors.New("memiavl: export is complete")
)
