package compat

import (
	"errors"

	errorsmod "cosmossdk.io/errors"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"
)

// The multistore's part of state sync (snapshottypes.Snapshotter): the
// stream is written and read by SnapshotDB and RestoreDB.

// Snapshot implements snapshottypes.Snapshotter with SnapshotDB: the IAVL
// stores at height in rootmulti's stream format. height must be a kept
// version; the SDK's snapshot manager asks for the version just committed.
func (s *MultiStore) Snapshot(height uint64, protoWriter protoio.Writer) error {
	if height == 0 {
		return errorsmod.Wrap(types.ErrLogic, "cannot snapshot height 0")
	}
	db := s.db.Load()
	if db == nil {
		return ErrNotLoaded
	}
	if height > uint64(db.Version()) {
		return errorsmod.Wrapf(types.ErrLogic, "cannot snapshot future height %v", height)
	}
	return SnapshotDB(db, height, protoWriter)
}

// Restore implements snapshottypes.Snapshotter with RestoreDB: the database
// is closed, replaced by the one restored at height (which requires it to be
// empty, at version 0, or already at height) and the multistore is reloaded,
// as rootmulti reloads after a restore. The mounted IAVL stores the stream
// does not mention are created empty. After a failed restore the multistore
// is reloaded on the database as it was.
func (s *MultiStore) Restore(height uint64, format uint32, protoReader protoio.Reader) (snapshottypes.SnapshotItem, error) {
	if err := s.closeDB(); err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	opts := s.cfg.dbOptions()
	opts.InitialStores = s.mountedTrees()
	item, err := RestoreDB(s.dir, height, format, protoReader, opts)
	if err != nil {
		// a failed restore leaves the database as it was: reopen it
		return snapshottypes.SnapshotItem{}, errors.Join(err, s.LoadLatestVersion())
	}
	return item, s.LoadLatestVersion()
}

// PruneSnapshotHeight implements snapshottypes.Snapshotter as a no-op:
// versions are not pruned by height, a snapshot is taken of a kept version.
func (s *MultiStore) PruneSnapshotHeight(int64) {}

// SetSnapshotInterval implements snapshottypes.Snapshotter. The interval is
// recorded; it does not change which versions are kept.
func (s *MultiStore) SetSnapshotInterval(interval uint64) { s.snapshotInterval = interval }
