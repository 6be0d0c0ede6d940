package compat

import (
	"errors"
	"fmt"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// Sentinel errors. Errors returned by the adapters wrap them with context;
// test them with errors.Is.
var (
	// ErrNotLoaded is returned (or panicked with) when the multistore is used
	// before LoadLatestVersion or LoadVersion.
	ErrNotLoaded = errors.New("compat: the multistore is not loaded")
	// ErrInvalidConfig reports a bad Config.
	ErrInvalidConfig = errors.New("compat: invalid memiavl config")
	// ErrUnsupportedStoreType is returned for a mounted store type other than
	// IAVL, transient and memory.
	ErrUnsupportedStoreType = errors.New("compat: unsupported store type")
	// ErrVersionReleased is panicked with by a read of a historical branch
	// (CacheMultiStoreWithVersion) whose version is no longer held: its view
	// was evicted from the query view cache and its snapshots unmapped. It
	// plays the part of a version pruned under a running query in rootmulti.
	ErrVersionReleased = errors.New("compat: version no longer held for queries")
	// ErrStoreNotAtVersion is panicked with by a read of a store that did not
	// exist at the version of a historical branch (it was added later).
	ErrStoreNotAtVersion = errors.New("compat: store does not exist at this version")
	// ErrReadOnlyVersion is panicked with by a write to a historical store.
	ErrReadOnlyVersion = errors.New("compat: a historical version is read-only")

	// ErrSnapshotStream wraps every rejection of a state-sync snapshot stream by
	// RestoreDB: a message that is not a snapshot item, an item of an unknown
	// kind or out of place, or nodes that do not form the stores' trees. A
	// restore that fails to write what it read (a full disk, an I/O error) or
	// is stopped with its context fails with an error that does not wrap it.
	ErrSnapshotStream = errors.New("compat: invalid state-sync snapshot stream")

	// ErrMigrate wraps every refusal of a migration: a source that is corrupt,
	// inconsistent with its own records, or holds something the database cannot
	// reproduce with the same app hash. It also wraps a migration that fails
	// to write the new database (with the cause: errors.Is finds
	// syscall.ENOSPC for a full disk).
	ErrMigrate = errors.New("compat: migration failed")
)

// noCommitInfo is the error for a version the database never had (zero,
// negative or in the future): rootmulti's text, wrapping
// multitree.ErrVersion.
type noCommitInfo struct{}

func (noCommitInfo) Error() string { return "no commit info found" }
func (noCommitInfo) Unwrap() error { return multitree.ErrVersion }

// noVersion is the error for a version outside 1..db.Version(): rootmulti's,
// or, when db was closed under the call (its version then reads 0), one
// wrapping multitree.ErrClosed.
func noVersion(db *multitree.DB) error {
	if db.LastCommitInfo() == nil {
		return fmt.Errorf("no commit info found: %w", multitree.ErrClosed)
	}
	return noCommitInfo{}
}
