package compat

import (
	"errors"
	"fmt"

	errorsmod "cosmossdk.io/errors"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/multitree"
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
		if !s.views.boundTo(db) {
			// closed or reloaded meanwhile: its version is 0 once closed
			return ErrNotLoaded
		}
		return errorsmod.Wrapf(types.ErrLogic, "cannot snapshot future height %v", height)
	}
	// the snapshot manager's extensions read height after this returns,
	// until the manager calls PruneSnapshotHeight (see viewCache.hold);
	// the export reads the held view, which queries read too, even where
	// its snapshots were pruned since the cache opened it
	view, err := s.views.hold(db, int64(height))
	if err != nil {
		return fmt.Errorf("snapshot of height %d: %w", height, err)
	}
	defer view.Unpin()
	return snapshotView(view, height, protoWriter)
}

// Restore implements snapshottypes.Snapshotter with RestoreDB: the database
// is closed, replaced by the one restored at height and the multistore is
// reloaded, as rootmulti reloads after a restore. As rootmulti's (whose IAVL
// importers refuse a tree with versions), it restores only into a database
// that has committed nothing: one at a version above 0 is refused before
// anything is touched, also at the snapshot's height, whose state may not
// be the snapshot's, and so is one whose working state holds a key written
// since the load (with an error wrapping multitree.ErrUncommitted; the
// writes stay, and a Commit commits them). Every mounted IAVL store must be
// in the stream, as rootmulti requires (its reload refuses a store the
// snapshot lacks): a stream without one, such as one cut cleanly between
// two stores, is refused with ErrSnapshotStream and nothing is restored;
// so is a stream holding a store that is not a mounted IAVL store
// (rootmulti's "cannot import into non-IAVL store"), also when no IAVL
// store is mounted. An unknown format or a height of 0 is refused before
// anything is touched too. After a restore that failed reading the stream
// the multistore is reloaded on the database as it was; its transient and
// memory stores are kept, as rootmulti keeps them (a successful restore
// starts them empty, as rootmulti's reload does).
func (s *MultiStore) Restore(height uint64, format uint32, protoReader protoio.Reader) (snapshottypes.SnapshotItem, error) {
	var v int64
	if db := s.db.Load(); db != nil {
		v = db.Version()
	} else {
		var err error
		if v, err = multitree.LatestVersion(s.dir); err != nil {
			return snapshottypes.SnapshotItem{}, fmt.Errorf("restore: %w", err)
		}
	}
	if v != 0 {
		return snapshottypes.SnapshotItem{}, fmt.Errorf("restore: found database at version %d, must be 0: %w", v, multitree.ErrExists)
	}
	// rootmulti's importers also refuse a tree that holds a key (iavl's
	// "tree must be empty"): at version 0, one written since the load and
	// not committed. Those writes are kept, not discarded by the reload.
	if name, err := s.uncommittedStore(); err != nil {
		return snapshottypes.SnapshotItem{}, fmt.Errorf("restore: %w", err)
	} else if name != "" {
		return snapshottypes.SnapshotItem{}, fmt.Errorf("restore: store %q holds uncommitted writes, its tree must be empty: %w", name, multitree.ErrUncommitted)
	}
	// what needs no stream is checked before the database is closed
	if err := checkRestore(height, format); err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	// kept if the restore fails (see reloadAfterFailure)
	volatile := s.volatileStores()
	// rootmulti's importers restore into its stores' own trees, so a
	// branch taken before the restore (BaseApp's check state, until the
	// first Commit after it) reads the restored state: the tree stores of
	// this load are kept, and the loads below point them at their
	// database (as for any reload, see keepTrees)
	defer s.keepTrees()()
	// until then they read empty trees, as rootmulti's stores do while its
	// importers run, not those of the database closed below
	s.work.Lock()
	for _, st := range s.restoring {
		st.readEmpty() // a reload discards the working changes
	}
	s.work.Unlock()
	if err := s.closeDB(); err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	opts := s.cfg.dbOptions()
	opts.InitialStores = s.mountedTrees()
	item, err := restoreDB(s.dir, height, format, protoReader, opts, true)
	if err != nil {
		// a failed restore leaves the database as it was: reopen it,
		// keeping the transient and memory stores, as rootmulti keeps
		// every store when its restore fails
		return snapshottypes.SnapshotItem{}, errors.Join(err, s.reloadAfterFailure(volatile, s.LoadLatestVersion))
	}
	return item, s.LoadLatestVersion()
}

// uncommittedStore returns the name of a mounted IAVL store whose working
// tree holds a key, its buffered writes applied, or "" if there is none. A
// failure to apply them (a database closed meanwhile, or broken) is
// returned.
func (s *MultiStore) uncommittedStore() (string, error) {
	s.work.Lock()
	defer s.work.Unlock()
	for _, st := range s.trees {
		if st.own != nil {
			st.flush() // a reload's own tree: no database to fail
		} else if err := tryApplyPending(st.db.Load(), st); err != nil {
			return "", err
		}
		if st.tree != nil && !st.tree.IsEmpty() {
			return st.name, nil
		}
	}
	return "", nil
}

// PruneSnapshotHeight implements snapshottypes.Snapshotter. The SDK's
// snapshot manager calls it once a snapshot of height, its extensions'
// payloads included, is complete: the pin Snapshot took on the version, so
// that the extensions could read it however many blocks commit meanwhile,
// is given up (versions are otherwise not pruned by height).
func (s *MultiStore) PruneSnapshotHeight(height int64) { s.views.unhold(height) }

// SetSnapshotInterval implements snapshottypes.Snapshotter. The interval is
// recorded; it does not change which versions are kept.
func (s *MultiStore) SetSnapshotInterval(interval uint64) { s.snapshotInterval = interval }
