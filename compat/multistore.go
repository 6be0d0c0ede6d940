package compat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"cosmossdk.io/log"
	"cosmossdk.io/store/cachekv"
	"cosmossdk.io/store/cachemulti"
	"cosmossdk.io/store/listenkv"
	"cosmossdk.io/store/mem"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/tracekv"
	"cosmossdk.io/store/transient"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// MultiStore is a types.CommitMultiStore over the database: a drop-in
// replacement for the SDK's rootmulti.Store (cosmossdk.io/store v1.1.x) whose
// app hashes, query results and proofs are identical to rootmulti's over
// cosmos/iavl for the same blocks.
//
// Mount the stores (MountStoreWithDB: IAVL, transient and memory stores),
// then load (LoadLatestVersion, LoadVersion, or with StoreUpgrades). IAVL
// stores are trees of the database in dir; transient and memory stores are
// the SDK's own (transient.NewStore, mem.NewStore) and, as in rootmulti, take
// no part in the app hash.
//
// Concurrency follows the SDK's use of rootmulti: block execution, Commit,
// loads and ABCI queries come from one goroutine at a time (the consensus
// connection serializes them); CacheMultiStoreWithVersion and its branches,
// LastCommitID and LatestVersion may be used from any goroutine (gRPC
// queries) and never wait for a commit: they share with Commit only the view
// cache's mutex, which either side holds for a map update.
//
// Differences from rootmulti, all documented on the methods: pruning is by
// snapshots (Config) rather than SetPruning; there is no inter-block cache
// or IAVL node cache to configure; a store that is in the database but no
// longer mounted is dropped from the working version (rootmulti drops it
// from the app hash too); the "/subspace" query reads the last committed
// version.
type MultiStore struct {
	dir    string
	cfg    Config
	logger log.Logger

	// db is nil before a load and after Close; read by concurrent queries
	// and the state-sync snapshotter's goroutine.
	db atomic.Pointer[multitree.DB]
	// work is the lock of the working state: the tree stores' buffered
	// writes and the working trees they read (see TreeStore), held by
	// each of their methods and by WorkingHash, Commit, RewriteSnapshot
	// and SetInitialVersion for their applying of the writes and their
	// changes of the working trees.
	work sync.Mutex
	// closed is set by Close and cleared by the next load, under work:
	// the tree stores' reads panic meanwhile (TreeStore.checkOpen).
	closed bool
	views  *viewCache
	// blockViews, with zero-copy reads, pin the snapshots the last
	// committed block read from until the next Commit ends (see Commit),
	// and after a reload also those of the database it closed, whose
	// slices the state listeners' unread change sets may hold (closeDB).
	blockViews atomic.Pointer[[]*multitree.View]
	// lastCommitID is read by concurrent queries (LatestVersion).
	lastCommitID atomic.Pointer[types.CommitID]
	// removing holds the names of the mounted stores the last load's
	// upgrades removed (deleted, or renamed to another mounted store),
	// until the next Commit: rootmulti keeps them, emptied, until then,
	// and Query answers for them (see Query). Read by concurrent queries;
	// the map is not changed once stored.
	removing atomic.Pointer[map[string]bool]
	// dropped are the keys of those stores, whose droppedStore the next
	// Commit retires and unmounts. A reload before that Commit removes
	// them again (rootmulti's removal map lasts until the Commit too).
	dropped []types.StoreKey
	// retired are the keys a Commit unmounted, which the next load removes
	// from keysByName (queries read that map concurrently)
	retired []types.StoreKey

	initialVersion int64

	storeTypes map[types.StoreKey]types.StoreType // mounted stores
	keysByName map[string]types.StoreKey
	stores     map[types.StoreKey]types.CommitKVStore // loaded stores
	trees      []*TreeStore                           // the IAVL ones among stores
	// restoring, during a reload, are the tree stores of the load before
	// it, by name: the next load points them at its database instead of
	// making new ones (see keepTrees and Restore)
	restoring map[string]*TreeStore
	// volatile, during the load that follows a failed reload, are the
	// transient and memory stores of the load before it, which that load
	// keeps instead of making new ones (see reloadAfterFailure)
	volatile map[types.StoreKey]types.CommitKVStore
	// detached is the view of the last committed version that the stores
	// kept across a reload read from meanwhile (see readCommitted), until
	// a load points them at its database or Close; changed under work.
	detached atomic.Pointer[multitree.View]
	// published is what the readers on other goroutines (queries,
	// historical branches) see of stores and keysByName, with the
	// database they belong to: maps a load builds whole and never changes
	// after it stores them here, before it stores the database in db.
	// closeDB stores empty ones without a database once it has closed
	// it (a reload in progress, or one that failed). Readers take the
	// database from here, never a map being filled or emptied, nor maps
	// of another load than their database's.
	published atomic.Pointer[mountedStores]

	listeners    map[types.StoreKey]*types.MemoryListener
	traceWriter  io.Writer
	traceContext struct {
		sync.Mutex
		tc types.TraceContext
	}

	metrics          metrics.StoreMetrics
	pruning          pruningtypes.PruningOptions
	snapshotInterval uint64

	// the latest version of the rootmulti state in the app's database,
	// which SetupMemIAVL reads (0: none, or not known)
	appDBVersion int64
}

var (
	_ types.CommitMultiStore = (*MultiStore)(nil)
	_ types.Queryable        = (*MultiStore)(nil)
)

// mountedStores are the loaded stores and the store keys by name as a load
// published them with its database (MultiStore.published): never changed
// once published. db is nil while a reload is in progress (or after one
// failed).
type mountedStores struct {
	db         *multitree.DB
	stores     map[types.StoreKey]types.CommitKVStore
	keysByName map[string]types.StoreKey
}

// store returns the loaded store of that name, nil if there is none (or
// m is nil: before a load).
func (m *mountedStores) store(name string) types.Store {
	if m == nil || m.db == nil {
		return nil
	}
	key := m.keysByName[name]
	if key == nil {
		return nil
	}
	st, ok := m.stores[key]
	if !ok || !live(st) {
		return nil
	}
	return st
}

// publishStores publishes the loaded stores of db and a copy of the keys
// by name; s.stores is not changed after it.
func (s *MultiStore) publishStores(db *multitree.DB) {
	s.published.Store(&mountedStores{db: db, stores: s.stores, keysByName: maps.Clone(s.keysByName)})
}

// NewMultiStore returns a multistore over the database in dir (created on
// the first load if missing). Nothing is opened before a Load method.
func NewMultiStore(dir string, logger log.Logger, cfg Config) (*MultiStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return &MultiStore{
		dir:        dir,
		cfg:        cfg,
		logger:     logger,
		views:      newViewCache(cfg.QueryViews),
		storeTypes: map[types.StoreKey]types.StoreType{},
		keysByName: map[string]types.StoreKey{},
		stores:     map[types.StoreKey]types.CommitKVStore{},
		listeners:  map[types.StoreKey]*types.MemoryListener{},
		metrics:    metrics.NewNoOpMetrics(),
		pruning:    pruningtypes.NewPruningOptions(pruningtypes.PruningNothing),
	}, nil
}

// DB returns the database, nil before a load, for reads and inspection. Its
// working trees lack the stores' writes still buffered (see TreeStore) until
// WorkingHash or Commit applies them, or a read of the store does.
// Changes must go through the multistore: writes through its stores, commits
// through Commit, snapshot rewrites through RewriteSnapshot. The stores read
// the database's working trees, which those methods keep them pointed at; a
// change made on the database directly (DB.RewriteSnapshot replaces the
// working trees) leaves them reading replaced trees.
func (s *MultiStore) DB() *multitree.DB { return s.db.Load() }

// RewriteSnapshot synchronously writes a snapshot of the last committed
// version and switches to it (multitree.DB.RewriteSnapshot), for offline
// use: background rewrites happen every Config.SnapshotInterval blocks
// anyway. Before a load and after Close it returns ErrNotLoaded.
func (s *MultiStore) RewriteSnapshot(ctx context.Context) error {
	db := s.db.Load()
	if db == nil {
		return ErrNotLoaded
	}
	s.work.Lock()
	defer s.work.Unlock()
	if err := tryApplyPending(db, s.trees...); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLoaded, err) // closed meanwhile
	}
	err := db.RewriteSnapshot(ctx)
	if s.db.Load() != db || errors.Is(err, multitree.ErrClosed) || !s.tryRefreshTrees(db) {
		// closed or reloaded meanwhile: the stores read another
		// database now, or none
		if err == nil {
			return fmt.Errorf("%w: closed or reloaded during the rewrite", ErrNotLoaded)
		}
		return fmt.Errorf("%w: %w", ErrNotLoaded, err)
	}
	return err
}

// Dir returns the database directory.
func (s *MultiStore) Dir() string { return s.dir }

// Close closes the database and releases every cached view. Branches and
// views still in use fail their next read. The SDK's BaseApp.Close does not
// close the multistore: an app calls this from its own Close so that an
// asynchronous log is flushed.
func (s *MultiStore) Close() error {
	// the cache first: a query's view of db opened from here on is
	// released, not cached (viewCache.bind)
	s.views.bind(nil)
	s.holdBlockViews()
	s.work.Lock()
	s.releaseDetached(nil) // the stores kept by a reload that failed
	s.closed = true
	s.work.Unlock()
	db := s.db.Swap(nil)
	if db == nil {
		return nil
	}
	return db.Close()
}

func (s *MultiStore) mustDB() *multitree.DB {
	db := s.db.Load()
	if db == nil {
		panic(ErrNotLoaded)
	}
	return db
}

// GetStoreType implements types.Store.
func (s *MultiStore) GetStoreType() types.StoreType { return types.StoreTypeMulti }

// MountStoreWithDB implements types.CommitMultiStore for IAVL, transient and
// memory stores; db is ignored (every IAVL store lives in the database
// directory). It panics on a nil key or a duplicate key or name, as
// rootmulti does; an unsupported type fails the next load. The name of a
// store unmounted by the Commit after an upgrade removed it is free again
// (as in rootmulti, which forgets it at that Commit), although its key stays
// in StoreKeysByName until the next load or mount of that name.
func (s *MultiStore) MountStoreWithDB(key types.StoreKey, typ types.StoreType, _ dbm.DB) {
	if key == nil {
		panic("MountIAVLStore() key cannot be nil")
	}
	if _, ok := s.storeTypes[key]; ok {
		panic(fmt.Sprintf("store duplicate store key %v", key))
	}
	if old, ok := s.keysByName[key.Name()]; ok && !s.unretire(old) {
		panic(fmt.Sprintf("store duplicate store key name %v", key))
	}
	s.storeTypes[key] = typ
	s.keysByName[key.Name()] = key
}

// unretire reports whether key is one a Commit unmounted (see
// unmountDropped), and forgets it as such, so that the next load does not
// remove the name that is mounted again.
func (s *MultiStore) unretire(key types.StoreKey) bool {
	i := slices.Index(s.retired, key)
	if i < 0 {
		return false
	}
	s.retired = slices.Delete(s.retired, i, i+1)
	return true
}

// GetCommitStore implements types.CommitMultiStore.
func (s *MultiStore) GetCommitStore(key types.StoreKey) types.CommitStore {
	return s.GetCommitKVStore(key)
}

// GetCommitKVStore implements types.CommitMultiStore: the mounted store, nil
// if there is none (or before a load).
func (s *MultiStore) GetCommitKVStore(key types.StoreKey) types.CommitKVStore {
	st, ok := s.stores[key]
	if !ok || !live(st) {
		return nil
	}
	return st
}

// StoreKeysByName returns the mounted store keys by name (as rootmulti's).
func (s *MultiStore) StoreKeysByName() map[string]types.StoreKey { return s.keysByName }

// GetStoreByName returns the loaded store of that name, nil if there is
// none. It may be called from any goroutine (Query calls it).
func (s *MultiStore) GetStoreByName(name string) types.Store {
	return s.published.Load().store(name)
}

// GetStore implements types.MultiStore; it panics if the store does not exist.
func (s *MultiStore) GetStore(key types.StoreKey) types.Store {
	st := s.GetCommitKVStore(key)
	if st == nil {
		panic(fmt.Sprintf("store does not exist for key: %s", key.Name()))
	}
	return st
}

// GetKVStore implements types.MultiStore: the mounted store, wrapped with
// the tracer when tracing is enabled and with the listener when listening is
// enabled for it, as rootmulti does. It panics if the store does not exist.
func (s *MultiStore) GetKVStore(key types.StoreKey) types.KVStore {
	st := s.stores[key]
	if st == nil || !live(st) {
		panic(fmt.Sprintf("store does not exist for key: %s", key.Name()))
	}
	store := types.KVStore(st)
	if s.TracingEnabled() {
		store = tracekv.NewStore(store, s.traceWriter, s.getTracingContext())
	}
	if s.ListeningEnabled(key) {
		store = listenkv.NewStore(store, key, s.listeners[key])
	}
	return store
}

// LoadLatestVersion implements types.CommitMultiStore. It opens the
// database (creating it with the mounted IAVL stores if it does not exist).
func (s *MultiStore) LoadLatestVersion() error { return s.loadVersion(0, nil) }

// LoadLatestVersionAndUpgrade implements types.CommitMultiStore: the store
// upgrades are applied to the working version as rootmulti applies them
// (see loadVersion).
func (s *MultiStore) LoadLatestVersionAndUpgrade(upgrades *types.StoreUpgrades) error {
	return s.loadVersion(0, upgrades)
}

// LoadVersion implements types.CommitMultiStore. Loading an older version
// than the latest opens the database at it; as with rootmulti, the next
// commits must then reproduce the versions already committed (the database
// rejects different content with multitree.ErrConflict). RollbackToVersion
// discards them instead.
func (s *MultiStore) LoadVersion(ver int64) error { return s.loadVersion(ver, nil) }

// LoadVersionAndUpgrade implements types.CommitMultiStore.
func (s *MultiStore) LoadVersionAndUpgrade(ver int64, upgrades *types.StoreUpgrades) error {
	return s.loadVersion(ver, upgrades)
}

// loadVersion (re)opens the database at ver (0: the latest), applies the
// store upgrades and builds the mounted stores. Upgrades follow rootmulti:
//
//   - an added store is created empty (adding a store the database already
//     has is an error once a version is committed, as with rootmulti);
//   - a renamed store is rebuilt under its new name in the working version
//     with the old store's pairs, and the old store is removed;
//   - a deleted store is removed.
//
// Only mounted stores are affected, as in rootmulti. A mounted store missing
// from a database that has committed versions is an error ("new stores
// should be added using StoreUpgrades"). A store of the database that is no
// longer mounted is removed in the working version, with a warning: rootmulti
// drops it from the commit info, and so from the app hash, too.
//
// A load refused by the checks that need no reopening (store types, a
// version the database does not have, and, with a database open, mounted
// stores and upgrades that do not fit the stores of the version) changes
// nothing, as with rootmulti. One that fails after the database was closed
// loads the latest version again, so that the multistore stays usable if it
// can; the IAVL stores' uncommitted writes are gone then, the transient and
// memory stores are kept (see reloadAfterFailure).
func (s *MultiStore) loadVersion(ver int64, upgrades *types.StoreUpgrades) error {
	if err := s.checkLoad(ver); err != nil {
		return err
	}
	if err := s.checkUpgrades(ver, upgrades); err != nil {
		return err
	}
	loaded := s.db.Load() != nil
	volatile := s.volatileStores()
	defer s.keepTrees()()
	s.readCommitted()
	if err := s.closeDB(); err != nil {
		return err
	}
	err := s.open(ver, upgrades)
	if err != nil && loaded {
		err = errors.Join(err, s.reloadAfterFailure(volatile, func() error { return s.open(0, nil) }))
	}
	return err
}

// volatileStores returns the loaded transient and memory stores, by key.
func (s *MultiStore) volatileStores() map[types.StoreKey]types.CommitKVStore {
	out := make(map[types.StoreKey]types.CommitKVStore)
	for key, st := range s.stores {
		if typ := s.storeTypes[key]; typ == types.StoreTypeTransient || typ == types.StoreTypeMemory {
			out[key] = st
		}
	}
	return out
}

// reloadAfterFailure runs load, the load of the latest version that follows
// a reload (a load, restore or rollback) that failed after it closed the
// database, keeping volatile, the transient and memory stores of the load
// before (volatileStores): rootmulti's failed reloads leave its stores as
// they were, and these are not in the database to be loaded again. Only
// the IAVL stores' uncommitted writes are lost.
func (s *MultiStore) reloadAfterFailure(volatile map[types.StoreKey]types.CommitKVStore, load func() error) error {
	s.volatile = volatile
	defer func() { s.volatile = nil }()
	return load()
}

// keepTrees makes the tree stores of this load the next load's (see
// restoring), unless a reload in progress (Restore, RollbackToVersion) or
// one that failed already did: a branch of the working state taken before
// the reload reads the reloaded database, not the closed one. It returns the
// undoing once a load succeeded, for a deferred call.
func (s *MultiStore) keepTrees() func() {
	if s.restoring == nil {
		s.restoring = make(map[string]*TreeStore, len(s.trees))
		for _, st := range s.trees {
			s.restoring[st.name] = st
		}
	}
	return func() {
		// a reload that left nothing loaded keeps them for the next
		// load: its closeDB forgot them (s.trees)
		if s.db.Load() != nil {
			s.restoring = nil
		}
	}
}

// readCommitted points the tree stores of the open database, which a
// reload is about to close and keeps for the next load (see keepTrees), at
// trees of their own: copies of their trees at the last committed version,
// read from a view that outlives the close (detached), or empty trees if
// it has none. Until the load points them at its database, a branch taken
// before the reload (BaseApp's check state, read on goroutines of their
// own) reads the committed state, not a closed database, and its writes go
// to the copies, discarded with the working changes: as rootmulti's stores,
// which keep their trees, read and take writes through a reload. Without
// an open database it does nothing.
func (s *MultiStore) readCommitted() {
	db := s.db.Load()
	if db == nil {
		return
	}
	v, err := db.View()
	if err != nil {
		v = nil // no committed version (or closed): empty trees
	}
	s.work.Lock()
	defer s.work.Unlock()
	for _, st := range s.trees {
		var t *memiavl.Tree
		if v != nil {
			t = v.Tree(st.name)
		}
		if t == nil { // a store added in the working version
			t = emptyTree()
		}
		st.readOwn(t)
	}
	s.releaseDetached(v)
}

// releaseDetached makes v the detached view (see readCommitted) and
// releases the one before, which no store reads any more; the working
// state's lock must be held.
func (s *MultiStore) releaseDetached(v *multitree.View) {
	if old := s.detached.Swap(v); old != nil {
		old.Release()
	}
}

// checkUpgrades returns why the mounted stores and upgrades cannot be
// loaded at ver (0: the latest) when a database is open: the stores of ver
// are known without reopening it, so such a load is refused before
// anything changes, as rootmulti's, which keeps its stores and their
// uncommitted writes. Without an open database, or when the stores of ver
// cannot be read, the open reports it.
func (s *MultiStore) checkUpgrades(ver int64, upgrades *types.StoreUpgrades) error {
	db := s.db.Load()
	if db == nil {
		return nil
	}
	if ver == 0 {
		// the latest version, which the open database may not be at
		// (after a LoadVersion of an older one)
		latest, err := multitree.LatestVersion(s.dir)
		if err != nil {
			return nil
		}
		ver = max(latest, db.Version())
	}
	// (at version 0, never committed, the stores the open database was
	// created with: a reload reopens it with them)
	names, err := db.StoreNamesAt(ver)
	switch {
	case errors.Is(err, multitree.ErrBeforeFirstVersion):
		return noCommitInfo{} // never committed: rootmulti's answer
	case errors.Is(err, multitree.ErrVersion):
		// no longer kept: the open at it would fail after closing
		return fmt.Errorf("cannot load version %d: %w", ver, err)
	case err != nil:
		return nil
	}
	up, _, err := s.planUpgradesOf(names, ver, upgrades, false)
	if err != nil {
		return err
	}
	// the database's own rules (a store renamed once, name lengths),
	// which its ApplyUpgrades would check only after the reopen
	return multitree.CheckUpgrades(names, up)
}

// checkLoad returns why the mounted stores or ver cannot be loaded.
func (s *MultiStore) checkLoad(ver int64) error {
	for key, typ := range s.storeTypes {
		switch typ {
		case types.StoreTypeIAVL:
		case types.StoreTypeTransient:
			if _, ok := key.(*types.TransientStoreKey); !ok {
				return fmt.Errorf("failed to load store: invalid StoreKey for StoreTypeTransient: %s", key.String())
			}
		case types.StoreTypeMemory:
			if _, ok := key.(*types.MemoryStoreKey); !ok {
				return fmt.Errorf("failed to load store: unexpected key type for a MemoryStoreKey; got: %s", key.String())
			}
		default:
			return fmt.Errorf("%w: store %q of type %v (IAVL, transient and memory stores are supported)", ErrUnsupportedStoreType, key.Name(), typ)
		}
	}
	latest, err := multitree.LatestVersion(s.dir)
	if err != nil {
		return err
	}
	// an asynchronous log may not have written the open database's last
	// versions yet; closing it (in loadVersion) writes them
	if db := s.db.Load(); db != nil {
		latest = max(latest, db.Version())
	}
	if ver < 0 || ver > latest {
		return noCommitInfo{} // never committed: rootmulti's answer
	}
	return nil
}

// open opens the database at ver (0: the latest), applies the upgrades and
// builds the mounted stores (see loadVersion); no database is open. It reads
// the latest version again: checkLoad's was read beside the open database,
// whose asynchronous log may have written more versions when it closed.
func (s *MultiStore) open(ver int64, upgrades *types.StoreUpgrades) (err error) {
	latest, err := multitree.LatestVersion(s.dir)
	if err != nil {
		return err
	}
	opts := s.cfg.dbOptions()
	opts.CreateIfMissing = true
	opts.InitialStores = s.mountedTrees()
	if ver > 0 && ver < latest {
		opts.TargetVersion = ver
	}
	db, err := multitree.Open(s.dir, opts)
	if errors.Is(err, multitree.ErrBeforeFirstVersion) {
		return noCommitInfo{} // never committed: rootmulti's answer
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = db.Close()
		}
	}()
	if ver > 0 && db.Version() != ver {
		// the version read before the open was not the one the open
		// reached: never load another version than the one asked for
		return fmt.Errorf("%w: cannot load version %d, the database opened at version %d", multitree.ErrVersion, ver, db.Version())
	}
	if db.Version() == 0 && s.appDBVersion > 0 {
		s.logger.Error("memiavl: this database has no committed version, but the app's database (application.db) holds rootmulti state at a later height: the node starts from an empty state, and the consensus engine replays every block from genesis (or fails where its block store is pruned). To keep the state, stop the node and migrate it: memiavl import-iavl <home>/data/application.db "+s.dir+" (which replaces this database, as it holds no committed version). A node that is to state-sync instead should have its stale application.db removed.",
			"dir", s.dir, "application_db_height", s.appDBVersion)
	} else if v := db.Version(); v > 0 && s.appDBVersion > v {
		s.logger.Warn("memiavl: the app's database (application.db) holds rootmulti state at a later height than this database (the store was disabled meanwhile, and rootmulti committed the blocks since): the consensus engine replays the blocks after this database's height (or fails where its block store is pruned). The rootmulti state of those heights is not used; to use it instead, stop the node, move this database aside and migrate: memiavl import-iavl <home>/data/application.db "+s.dir,
			"dir", s.dir, "version", v, "application_db_height", s.appDBVersion)
	}
	if tt, ok := db.LogTornTail(); ok {
		s.logger.Error("memiavl: the write-ahead log ended in a torn tail, which was cut off: an append a crash interrupted, or a damaged last record",
			"file", tt.Path, "offset", tt.Offset, "bytes", tt.Bytes, "version", db.Version())
	}
	if s.initialVersion > 1 && db.Version() == 0 {
		if err := db.SetInitialVersion(s.initialVersion); err != nil {
			return err
		}
	}
	up, removed, err := s.planUpgrades(db, upgrades)
	if err != nil {
		return err
	}
	if err := db.ApplyUpgrades(up); err != nil {
		return err
	}
	gone := make(map[string]bool, len(removed))
	for _, key := range removed {
		gone[key.Name()] = true
	}
	s.removing.Store(&gone)

	// the stores are built whole and published before the database:
	// concurrent readers (published) never see them filled
	s.stores = make(map[types.StoreKey]types.CommitKVStore, len(s.storeTypes))
	s.trees = nil
	for key, typ := range s.storeTypes {
		if gone[key.Name()] && typ == types.StoreTypeIAVL {
			continue // a droppedStore, below
		}
		switch typ {
		case types.StoreTypeIAVL:
			st := s.restoring[key.Name()]
			if st == nil {
				st = &TreeStore{ms: s, name: key.Name(), zeroCopy: s.cfg.ZeroCopy}
			}
			s.stores[key] = st
			s.trees = append(s.trees, st)
		case types.StoreTypeTransient, types.StoreTypeMemory:
			if st := s.volatile[key]; st != nil {
				s.stores[key] = st
			} else if typ == types.StoreTypeTransient {
				s.stores[key] = transient.NewStore()
			} else {
				s.stores[key] = mem.NewStore()
			}
		}
	}
	// rootmulti keeps a removed store, emptied, until the next Commit
	s.dropped = removed
	for _, key := range removed {
		d := newDroppedStore(s, key.Name(), db.WorkingVersion())
		if info := db.LastCommitInfo(); info != nil {
			for _, si := range info.StoreInfos {
				if si.Name == key.Name() {
					d.last = si.CommitId
				}
			}
		}
		s.stores[key] = d
	}
	s.pointTrees(db)
	s.publishStores(db)
	s.views.bind(db)
	s.db.Store(db)
	s.setLastCommitID(db)
	if v, err := db.View(); err == nil {
		s.views.put(db, v)
	}
	return nil
}

// pointTrees points the tree stores at db, which a load opened, and those
// of the load before it that this one does not keep (removed by its
// upgrades) at empty trees, as their droppedStores read, instead of the
// trees of the database closed. The kept stores (see keepTrees) may be read
// meanwhile through a branch of them, under the lock of the working state.
func (s *MultiStore) pointTrees(db *multitree.DB) {
	s.work.Lock()
	defer s.work.Unlock()
	s.closed = false
	for _, st := range s.trees {
		st.db.Store(db)
		st.own = nil
		st.discardPending() // a reload discards the working changes
	}
	for _, st := range s.restoring {
		if !slices.Contains(s.trees, st) {
			st.readEmpty()
		}
	}
	s.refreshTrees(db)
	// no store reads the detached view now; zero-copy reads of it may
	// have handed out slices of its snapshots, which are kept mapped
	// with the block's views (see holdBlockViews)
	if v := s.detached.Swap(nil); v != nil {
		if s.cfg.ZeroCopy {
			s.holdBlockViews(append(s.swapBlockViews(nil), v)...)
		} else {
			v.Release()
		}
	}
}

// droppedStore stands for a mounted store that the load's upgrades removed
// (deleted, or renamed to another mounted store) until the next Commit, as
// rootmulti keeps such a store, emptied, in the multistore until then: it
// reads empty, and what is written to it is dropped with it. It is outside
// the commit info. A load before that Commit removes the store again (with
// a new droppedStore). After the Commit it is gone: the lookups of the
// multistore no longer find it (the map of stores, which queries read
// concurrently, is not changed).
//
// Its pairs are held by an in-memory tree, so that it reads, writes and
// iterates as an emptied iavl.Store does (nil and empty keys, bounds and
// iterators past their end included).
type droppedStore struct {
	tree *memiavl.Tree
	ms   *MultiStore
	name string
	last types.CommitID // of the store it stands for
	gone atomic.Bool
}

var _ types.CommitKVStore = (*droppedStore)(nil)

// newDroppedStore returns the droppedStore of the store name, whose writes
// are of version working, as in rootmulti, where the emptied store's next
// version is the multistore's.
func newDroppedStore(ms *MultiStore, name string, working int64) *droppedStore {
	t, err := memiavl.New(memiavl.Options{InitialVersion: working})
	if err != nil {
		panic(err) // a database's working version is valid
	}
	// a store never committed: version 0 and the empty tree's hash, as
	// TreeStore's LastCommitID
	last := types.CommitID{Hash: emptyAppHash()}
	return &droppedStore{tree: t, ms: ms, name: name, last: last}
}

// emptyTree returns a new empty tree in memory.
func emptyTree() *memiavl.Tree {
	t, err := memiavl.New(memiavl.Options{})
	if err != nil {
		panic(err) // the zero options are valid
	}
	return t
}

// Get implements types.KVStore.
func (d *droppedStore) Get(key []byte) []byte {
	v, err := d.tree.Get(key)
	if err != nil {
		panic(err) // an in-memory tree has nothing to fail on
	}
	return v
}

// Has implements types.KVStore.
func (d *droppedStore) Has(key []byte) bool {
	ok, err := d.tree.Has(key)
	if err != nil {
		panic(err)
	}
	return ok
}

// Set implements types.KVStore, with iavl.Store's checks.
func (d *droppedStore) Set(key, value []byte) {
	types.AssertValidKey(key)
	types.AssertValidValue(value)
	if _, err := d.tree.Set(key, value); err != nil {
		panic(err)
	}
}

// Delete implements types.KVStore; deleting a nil key is a no-op.
func (d *droppedStore) Delete(key []byte) {
	if key == nil {
		return
	}
	if _, err := d.tree.Remove(key); err != nil {
		panic(err)
	}
}

// Iterator implements types.KVStore.
func (d *droppedStore) Iterator(start, end []byte) types.Iterator {
	return &storeIterator{it: d.tree.Iterator(start, end, true), store: d.name}
}

// ReverseIterator implements types.KVStore.
func (d *droppedStore) ReverseIterator(start, end []byte) types.Iterator {
	return &storeIterator{it: d.tree.Iterator(start, end, false), store: d.name}
}

// CacheWrap implements types.Store.
func (d *droppedStore) CacheWrap() types.CacheWrap { return cachekv.NewStore(d) }

// CacheWrapWithTrace implements types.Store.
func (d *droppedStore) CacheWrapWithTrace(w io.Writer, tc types.TraceContext) types.CacheWrap {
	return cachekv.NewStore(tracekv.NewStore(d, w, tc))
}

// Commit implements types.Committer: the store leaves with the Commit of
// its multistore, which calls this; nothing is committed.
func (d *droppedStore) Commit() types.CommitID { return types.CommitID{} }

// SetPruning implements types.Committer (a no-op).
func (d *droppedStore) SetPruning(pruningtypes.PruningOptions) {}

// GetPruning implements types.Committer.
func (d *droppedStore) GetPruning() pruningtypes.PruningOptions {
	return pruningtypes.NewPruningOptions(pruningtypes.PruningUndefined)
}

// Query implements types.Queryable as the multistore's Query answers for
// the store (see MultiStore.Query): "/key" from its committed versions,
// "/subspace" with no pairs.
func (d *droppedStore) Query(req *types.RequestQuery) (*types.ResponseQuery, error) {
	res, _, err := d.ms.queryStore(d.name, req, true)
	return res, err
}

// GetStoreType returns the type of the store it stands for.
func (*droppedStore) GetStoreType() types.StoreType { return types.StoreTypeIAVL }

// LastCommitID returns the last commit of the store it stands for: version
// 0 and the empty tree's hash when it was never committed.
func (d *droppedStore) LastCommitID() types.CommitID {
	return cloneCommitID(d.last)
}

// WorkingHash returns the hash of the store's pairs: those written to it
// since the load removed it (the empty tree's hash for none).
func (d *droppedStore) WorkingHash() []byte { return d.tree.RootHash() }

// live reports whether st is a store of the multistore: not a removed
// store whose removal a Commit completed.
func live(st types.CommitKVStore) bool {
	d, ok := st.(*droppedStore)
	return !ok || !d.gone.Load()
}

// dropStores retires the droppedStores of the stores the last load's
// upgrades removed, at the Commit of a version without them. A reload or
// Close does not: the stores published to concurrent readers keep them
// until the load publishes its own (new droppedStores, when its upgrades
// remove the stores again).
func (s *MultiStore) dropStores() {
	for _, key := range s.dropped {
		if d, ok := s.stores[key].(*droppedStore); ok {
			d.gone.Store(true)
		}
	}
}

// unmountDropped unmounts the stores the loads' upgrades removed, once a
// version without them is committed. Their keys stay in StoreKeysByName
// until the next load, which removes them (rootmulti removes them at the
// Commit; queries read the map concurrently).
func (s *MultiStore) unmountDropped() {
	s.dropStores()
	for _, key := range s.dropped {
		delete(s.storeTypes, key)
	}
	s.retired = append(s.retired, s.dropped...)
	s.dropped = nil
}

// closeDB closes an open database (a reload discards the working changes,
// as rootmulti's does).
func (s *MultiStore) closeDB() error {
	// (the removed stores' droppedStores are not retired here: the
	// published stores, which concurrent queries and branches still read
	// until they are replaced below, keep them; the next load makes new
	// ones)
	s.removing.Store(nil)
	for _, key := range s.retired {
		if s.keysByName[key.Name()] == key {
			delete(s.keysByName, key.Name())
		}
	}
	s.retired = nil
	s.views.bind(nil)
	db := s.db.Swap(nil)
	if db == nil {
		// nothing loaded: the views held, if any, are those of a database
		// a reload closed before (RollbackToVersion and Restore close it,
		// then load), kept until the next Commit (or Close)
		return nil
	}
	if s.cfg.ZeroCopy {
		// The state listeners keep their unread change sets across a
		// reload, as rootmulti's do: their values may be slices of the
		// snapshots the last committed block read from, and of those the
		// working version read from since. Both stay mapped until the
		// next Commit ends (or Close), as without the reload.
		held := s.swapBlockViews(nil) // kept, not released
		if v, err := db.View(); err == nil {
			held = append(held, v)
		}
		s.holdBlockViews(held...)
	} else {
		s.holdBlockViews()
	}
	err := db.Close()
	s.stores = map[types.StoreKey]types.CommitKVStore{}
	s.trees = nil
	s.publishStores(nil)
	if err != nil && rewriteFailuresOnly(err) {
		// a background snapshot rewrite failed and no Commit reported
		// it yet: the database closed, and a reload goes on (as a
		// Commit does after such a failure)
		s.logger.Error("memiavl: a background snapshot rewrite failed; the database keeps working from the previous snapshot", "err", err)
		return nil
	}
	return err
}

// mountedTrees returns the names of the mounted IAVL stores, sorted.
func (s *MultiStore) mountedTrees() []string {
	var names []string
	for key, typ := range s.storeTypes {
		if typ == types.StoreTypeIAVL {
			names = append(names, key.Name())
		}
	}
	sort.Strings(names)
	return names
}

// planUpgrades turns the SDK's store upgrades into the database's, for the
// mounted stores (see loadVersion). It returns the mounted keys that leave
// the multistore (deleted stores and renamed-from stores).
func (s *MultiStore) planUpgrades(db *multitree.DB, upgrades *types.StoreUpgrades) (wal.Upgrades, []types.StoreKey, error) {
	return s.planUpgradesOf(db.StoreNames(), db.Version(), upgrades, true)
}

// planUpgradesOf is planUpgrades for a database at version holding the
// stores names; warn logs the stores it removes for not being mounted.
func (s *MultiStore) planUpgradesOf(names []string, version int64, upgrades *types.StoreUpgrades, warn bool) (wal.Upgrades, []types.StoreKey, error) {
	var up wal.Upgrades
	var removed []types.StoreKey
	existing := map[string]bool{}
	for _, name := range names {
		existing[name] = true
	}
	// the old names of renames to a mounted store (rootmulti ignores the
	// others)
	renamedFrom := map[string]bool{}
	if upgrades != nil {
		for _, r := range upgrades.Renamed {
			if key := s.keysByName[r.NewKey]; key != nil && s.storeTypes[key] == types.StoreTypeIAVL {
				renamedFrom[r.OldKey] = true
			}
		}
	}
	// stores an earlier load since the last Commit removed
	pending := map[string]bool{}
	for _, key := range s.dropped {
		pending[key.Name()] = true
	}
	accounted := map[string]bool{}
	for _, name := range s.mountedTrees() {
		key := s.keysByName[name]
		old := upgrades.RenamedFrom(name)
		added := upgrades.IsAdded(name) || old != ""
		switch {
		case version > 0 && added && existing[name]:
			// rootmulti loads the store with the next version as its
			// initial one, which iavl refuses for a store with versions
			return up, nil, fmt.Errorf("failed to load store %s: initial version set to %d, but found earlier version %d", name, version+1, version)
		case version > 0 && !added && !existing[name]:
			// also a deleted or renamed-from store: rootmulti loads it
			// before it removes it
			return up, nil, fmt.Errorf("version of store %s mismatch root store's version; expected %d got 0; new stores should be added using StoreUpgrades", name, version)
		case upgrades.IsDeleted(name) || renamedFrom[name] || pending[name]:
			// rootmulti empties it and drops it at the next commit; a
			// store an earlier load removed stays removed until then
			// even if this load adds it again (possible only before
			// the first commit), writes made to it meanwhile included
			if existing[name] && !renamedFrom[name] {
				up.Deleted = append(up.Deleted, name)
			}
			accounted[name] = true
			removed = append(removed, key)
		case old != "":
			switch {
			case existing[name] && existing[old]:
				return up, nil, fmt.Errorf("compat: cannot rename store %q to %q: both exist", old, name)
			case existing[old]:
				up.Renamed = append(up.Renamed, wal.RenamedStore{OldName: old, NewName: name})
				accounted[old] = true
			case !existing[name]:
				up.Added = append(up.Added, name)
			}
			accounted[name] = true
		case existing[name]:
			accounted[name] = true
		default: // added, or a new database
			up.Added = append(up.Added, name)
			accounted[name] = true
		}
	}
	for _, name := range names {
		if accounted[name] || contains(up.Deleted, name) {
			continue
		}
		if upgrades.IsDeleted(name) {
			up.Deleted = append(up.Deleted, name)
			continue
		}
		if !warn {
			up.Deleted = append(up.Deleted, name)
			continue
		}
		s.logger.Error("memiavl: store is in the database but not mounted; it is removed from the working version, as rootmulti drops it from the app hash",
			"store", name, "version", version)
		up.Deleted = append(up.Deleted, name)
	}
	return up, removed, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// refreshTrees points the tree stores at the database's working trees.
func (s *MultiStore) refreshTrees(db *multitree.DB) {
	if !s.tryRefreshTrees(db) {
		for _, st := range s.trees {
			if db.WorkingTree(st.name) == nil {
				panic(fmt.Sprintf("memiavl: mounted store %q has no tree in the database", st.name))
			}
		}
	}
}

// tryRefreshTrees points the tree stores at db's working trees, or changes
// nothing and reports false when db lacks one (closed meanwhile).
func (s *MultiStore) tryRefreshTrees(db *multitree.DB) bool {
	stores := s.trees
	trees := make([]multitree.WorkingReader, len(stores))
	for i, st := range stores {
		if trees[i] = db.WorkingTree(st.name); trees[i] == nil {
			return false
		}
	}
	for i, st := range stores {
		st.tree = trees[i]
	}
	return true
}

var emptyHash = sha256.Sum256(nil)

// emptyAppHash returns a new copy of sha256(""), the app hash of version 0.
func emptyAppHash() []byte {
	h := emptyHash
	return h[:]
}

// cloneCommitID returns a copy of id with a hash of its own.
func cloneCommitID(id types.CommitID) types.CommitID {
	return types.CommitID{Version: id.Version, Hash: bytes.Clone(id.Hash)}
}

// cloneCommitInfo returns a deep copy of info (nil for nil): the commit
// infos and hashes the multistore hands out are the caller's, as
// rootmulti's, which decodes them afresh on each call.
func cloneCommitInfo(info *types.CommitInfo) *types.CommitInfo {
	if info == nil {
		return nil
	}
	c := *info
	c.StoreInfos = make([]types.StoreInfo, len(info.StoreInfos))
	for i, si := range info.StoreInfos {
		si.CommitId = cloneCommitID(si.CommitId)
		c.StoreInfos[i] = si
	}
	return &c
}

// setLastCommitID publishes the database's last commit for LastCommitID.
func (s *MultiStore) setLastCommitID(db *multitree.DB) {
	id := types.CommitID{Hash: emptyAppHash()}
	if info := db.LastCommitInfo(); info != nil && info.Version > 0 {
		id = info.CommitID()
	}
	s.lastCommitID.Store(&id)
}

// LastCommitID implements types.Committer: the last committed version and
// app hash. At version 0, and before a load, the hash is sha256(""), as in
// rootmulti; before a load the version is the database's latest (the SDK's
// upgrade store loader reads it to decide whether to apply store upgrades),
// or 0 when the directory cannot be read (damage, an unfinished import, the
// reference memiavl's format, an I/O error): the load that follows fails
// with that error, which is logged here too.
func (s *MultiStore) LastCommitID() types.CommitID {
	if id := s.lastCommitID.Load(); id != nil {
		return cloneCommitID(*id)
	}
	v, err := multitree.LatestVersion(s.dir)
	if err != nil {
		s.logger.Error("memiavl: cannot read the latest version before the load", "dir", s.dir, "err", err)
		return types.CommitID{Hash: emptyAppHash()}
	}
	return types.CommitID{Version: v, Hash: emptyAppHash()}
}

// LatestVersion implements types.MultiStore.
func (s *MultiStore) LatestVersion() int64 { return s.LastCommitID().Version }

// LastCommitInfo returns (a copy of) the commit info of the last committed
// version, nil before a load.
func (s *MultiStore) LastCommitInfo() *types.CommitInfo {
	db := s.db.Load()
	if db == nil {
		return nil
	}
	return cloneCommitInfo(db.LastCommitInfo())
}

// GetCommitInfo returns (a copy of) the commit info of a version still kept
// (see Config.SnapshotKeepRecent), as rootmulti's GetCommitInfo; after
// LoadVersion of an older version, not of the versions after it until they
// are committed again, which rootmulti still serves (see the README).
func (s *MultiStore) GetCommitInfo(ver int64) (*types.CommitInfo, error) {
	db := s.db.Load()
	if db == nil {
		return nil, fmt.Errorf("no commit info found: %w", ErrNotLoaded)
	}
	if ver <= 0 || ver > db.Version() {
		return nil, noVersion(db)
	}
	if info := db.LastCommitInfo(); info != nil && info.Version == ver {
		return cloneCommitInfo(info), nil
	}
	v, err := s.views.get(db, ver)
	if errors.Is(err, multitree.ErrBeforeFirstVersion) {
		return nil, noCommitInfo{} // never committed, as for rootmulti
	}
	if err != nil {
		return nil, fmt.Errorf("no commit info found: %w", err)
	}
	defer v.Unpin()
	return cloneCommitInfo(v.CommitInfo()), nil
}

// WorkingHash implements types.Committer: the app hash the next Commit
// returns.
func (s *MultiStore) WorkingHash() []byte {
	db := s.db.Load()
	if db == nil {
		// no store is loaded: the hash of an empty commit info, as
		// rootmulti's
		return (&types.CommitInfo{}).Hash()
	}
	s.work.Lock()
	defer s.work.Unlock()
	err := tryApplyPending(db, s.trees...)
	info := db.WorkingCommitInfo()
	if err != nil || info == nil {
		// closed meanwhile: as before a load
		return (&types.CommitInfo{}).Hash()
	}
	return info.Hash()
}

// Commit implements types.Committer. It commits every IAVL store as one
// version of the database (logging it per Config), resets the transient
// stores and publishes the version to queries. A failed background snapshot
// rewrite does not fail the commit: the block is committed and the error is
// logged (the database retries at the next interval). Any other error
// panics, as rootmulti does; so does a Commit before any load, with
// ErrNotLoaded (rootmulti would write a version 1 that its own load then
// refuses).
func (s *MultiStore) Commit() types.CommitID {
	defer s.metrics.MeasureSince("store", "memiavl", "commit")
	db := s.mustDB()
	s.work.Lock()
	defer s.work.Unlock()
	applyPending(db, s.trees...)
	var read *multitree.View
	if s.cfg.ZeroCopy {
		// the snapshots this block read from: a Commit that switches to a
		// background rewrite's snapshot releases them, but the slices
		// this block read out of them live on in the state listeners'
		// change sets, which BaseApp hands to ListenCommit after Commit
		read, _ = db.View()
	}
	info, err := db.Commit()
	if err != nil {
		if info == nil || !rewriteFailuresOnly(err) {
			if read != nil {
				read.Release()
			}
			panic(fmt.Errorf("memiavl: commit: %w", err))
		}
		s.logger.Error("memiavl: background snapshot rewrite failed; the block is committed", "version", info.Version, "err", err)
	}
	for _, st := range s.stores {
		if _, ok := st.(*TreeStore); !ok {
			st.Commit()
		}
	}
	s.refreshTrees(db)
	if v, err := db.View(); err == nil {
		s.views.put(db, v)
	}
	s.holdBlockViews(read)
	s.removing.Store(nil) // gone from the version just committed
	s.unmountDropped()
	id := types.CommitID{Version: info.Version, Hash: info.Hash()}
	s.lastCommitID.Store(&id)
	return cloneCommitID(id)
}

// rewriteFailuresOnly reports whether err is made only of failures of
// background snapshot rewrites (multitree.ErrRewrite), which the database
// survives; a Commit may report one joined with other background failures,
// such as damage the open check found, which must stop the node.
func rewriteFailuresOnly(err error) bool {
	// the failures are joined with errors.Join; an error that wraps several
	// (fmt.Errorf with two %w) is one failure
	if joined, ok := err.(interface{ Unwrap() []error }); ok && reflect.TypeOf(err) == joinedErrorType {
		for _, e := range joined.Unwrap() {
			if !rewriteFailuresOnly(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, multitree.ErrRewrite)
}

var joinedErrorType = reflect.TypeOf(errors.Join(errors.New("")))

// holdBlockViews makes vs (nil ones left out) the views that pin the
// snapshots of the last committed block and of the databases reloads closed
// since (see blockViews), and releases those held before.
func (s *MultiStore) holdBlockViews(vs ...*multitree.View) {
	vs = slices.DeleteFunc(vs, func(v *multitree.View) bool { return v == nil })
	var p *[]*multitree.View
	if len(vs) > 0 {
		p = &vs
	}
	for _, v := range s.swapBlockViews(p) {
		v.Release()
	}
}

// swapBlockViews makes p the views held (blockViews) and returns those
// held before, without releasing them.
func (s *MultiStore) swapBlockViews(p *[]*multitree.View) []*multitree.View {
	if old := s.blockViews.Swap(p); old != nil {
		return *old
	}
	return nil
}

// SetPruning implements types.Committer. The options are recorded (and
// returned by GetPruning, which the SDK validates at startup) but do not
// prune anything: history is kept as snapshots, Config.SnapshotKeepRecent of
// them besides the current one, with the log after the oldest.
func (s *MultiStore) SetPruning(opts pruningtypes.PruningOptions) { s.pruning = opts }

// GetPruning implements types.Committer.
func (s *MultiStore) GetPruning() pruningtypes.PruningOptions { return s.pruning }

// SetIAVLCacheSize implements types.CommitMultiStore as a no-op: nodes are
// read from memory maps, there is no node cache to size.
func (s *MultiStore) SetIAVLCacheSize(int) {}

// SetIAVLDisableFastNode implements types.CommitMultiStore as a no-op: there
// is no fast-node index.
func (s *MultiStore) SetIAVLDisableFastNode(bool) {}

// SetInterBlockCache implements types.CommitMultiStore as a no-op: reads are
// served from memory maps and in-memory nodes, a value cache in front of
// them would only add copies.
func (s *MultiStore) SetInterBlockCache(types.MultiStorePersistentCache) {}

// SetMetrics implements types.CommitMultiStore. Commit durations are
// reported under "store", "memiavl", "commit".
func (s *MultiStore) SetMetrics(m metrics.StoreMetrics) { s.metrics = m }

// SetInitialVersion implements types.CommitMultiStore: the version of the
// first commit of a new chain. It is remembered when called before a load,
// and ignored once a version has been committed (as rootmulti's has no
// effect then, except on a store just added by upgrades: compat/README.md).
func (s *MultiStore) SetInitialVersion(version int64) error {
	s.initialVersion = version
	db := s.db.Load()
	if db == nil || db.Version() != 0 {
		return nil
	}
	s.work.Lock()
	defer s.work.Unlock()
	applyPending(db, s.trees...)
	if err := db.SetInitialVersion(version); err != nil {
		return err
	}
	// as rootmulti sets it on every IAVL store, the emptied ones too
	for _, key := range s.dropped {
		if d, ok := s.stores[key].(*droppedStore); ok {
			if err := d.tree.SetInitialVersion(version); err != nil {
				return err
			}
		}
	}
	return nil
}

// RollbackToVersion implements types.CommitMultiStore: the versions after
// target are discarded (newer snapshots deleted, the log truncated) and the
// multistore is reloaded at target. target must not be older than the oldest
// kept snapshot nor after the latest, and every mounted IAVL store must
// exist at target (a rollback cannot cross the upgrade that added or
// renamed a mounted store, as the multistore could not load target without
// it). Those are checked before anything is discarded: a refused rollback
// leaves the database and the loaded multistore as they were. Once begun,
// the rollback is all or nothing: if it fails or the process stops part
// way, every later load sees target as the latest version and the next
// writable one finishes it (multitree.Options.Rollback).
func (s *MultiStore) RollbackToVersion(target int64) error {
	if target <= 0 {
		return fmt.Errorf("invalid rollback height target: %d", target)
	}
	if err := s.checkRollback(target); err != nil {
		return err
	}
	loaded := s.db.Load() != nil
	volatile := s.volatileStores()
	defer s.keepTrees()()
	s.readCommitted()
	if err := s.closeDB(); err != nil {
		return err
	}
	opts := s.cfg.dbOptions()
	opts.TargetVersion, opts.Rollback = target, true
	db, err := multitree.Open(s.dir, opts)
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		if loaded {
			// load what the directory holds, so that the multistore
			// stays usable
			err = errors.Join(err, s.reloadAfterFailure(volatile, s.LoadLatestVersion))
		}
		return err
	}
	return s.LoadLatestVersion()
}

// checkRollback returns why the multistore cannot roll back to target, nil
// if it can: the mounted stores' types and target's range as a load checks
// them (checkLoad), and every mounted IAVL store must exist at target, as
// target's stores are read from the loaded database (from a snapshot and
// the log, as ViewAt rebuilds a version; a version no kept snapshot reaches
// is refused), or, when nothing is loaded, from a read-only open of the
// directory at target. Nothing is written.
func (s *MultiStore) checkRollback(target int64) error {
	var names []string
	if db := s.db.Load(); db != nil {
		if err := s.checkLoad(target); err != nil {
			return err
		}
		var err error
		if names, err = db.StoreNamesAt(target); err != nil {
			return fmt.Errorf("cannot roll back to %d: %w", target, err)
		}
	} else {
		// (a missing database fails here with multitree.ErrNotFound)
		opts := s.cfg.dbOptions()
		opts.ReadOnly, opts.TargetVersion = true, target
		db, err := multitree.Open(s.dir, opts)
		if err != nil {
			return fmt.Errorf("cannot roll back to %d: %w", target, err)
		}
		names, err = db.StoreNamesAt(target)
		db.Close()
		if err != nil {
			return fmt.Errorf("cannot roll back to %d: %w", target, err)
		}
		if err := s.checkLoad(target); err != nil {
			return err
		}
	}
	for _, name := range s.mountedTrees() {
		if _, ok := slices.BinarySearch(names, name); !ok {
			return missingAtRollback(target, name)
		}
	}
	return nil
}

// missingAtRollback is checkRollback's error for a mounted store that does
// not exist at target.
func missingAtRollback(target int64, name string) error {
	return fmt.Errorf("%w: cannot roll back to %d: mounted store %s does not exist at that version (a store upgrade added it, renamed it or deleted it since or before)", multitree.ErrVersion, target, name)
}

// CacheWrap implements types.Store.
func (s *MultiStore) CacheWrap() types.CacheWrap {
	return s.CacheMultiStore().(types.CacheWrap)
}

// CacheWrapWithTrace implements types.Store (the tracer is ignored, as in
// rootmulti).
func (s *MultiStore) CacheWrapWithTrace(io.Writer, types.TraceContext) types.CacheWrap {
	return s.CacheWrap()
}

// CacheMultiStore implements types.MultiStore: a branch of the working
// state (cachemulti over the mounted stores, with listeners wired as
// rootmulti wires them).
func (s *MultiStore) CacheMultiStore() types.CacheMultiStore {
	stores := make(map[types.StoreKey]types.CacheWrapper, len(s.stores))
	for k, v := range s.stores {
		if !live(v) {
			continue
		}
		store := types.KVStore(v)
		if s.ListeningEnabled(k) {
			store = listenkv.NewStore(store, k, s.listeners[k])
		}
		stores[k] = store
	}
	return cachemulti.NewStore(nil, stores, s.keysByName, s.traceWriter, s.getTracingContext())
}

// CacheMultiStoreWithVersion implements types.MultiStore: a branch of a
// committed version, for queries. It is served by a database view from the
// multistore's view cache (see Config.QueryViews and the package
// documentation on historical reads) and may be used from any goroutine. An
// error is returned if the version is not kept. The IAVL stores of the
// branch are read-only; a store added after version panics on use, as in
// rootmulti; transient and memory stores are the live ones.
func (s *MultiStore) CacheMultiStoreWithVersion(version int64) (types.CacheMultiStore, error) {
	m := s.published.Load() // the database with its stores: see published
	if m == nil || m.db == nil || s.db.Load() == nil {
		return nil, ErrNotLoaded
	}
	db := m.db
	if version <= 0 || version > db.Version() {
		return nil, noVersion(db)
	}
	v, err := s.views.get(db, version)
	if errors.Is(err, multitree.ErrBeforeFirstVersion) {
		return nil, noCommitInfo{} // never committed, as for rootmulti
	}
	if err != nil {
		return nil, fmt.Errorf("version mismatch on immutable IAVL tree; version does not exist. Version has either been pruned, or is for a future block height: %w", err)
	}
	defer v.Unpin()
	stores := make(map[types.StoreKey]types.CacheWrapper, len(m.stores))
	for k, st := range m.stores {
		if !live(st) {
			continue
		}
		var store types.KVStore = st
		name := ""
		switch st := st.(type) {
		case *TreeStore:
			name = st.name
		case *droppedStore:
			// its versions before the removal, as rootmulti's
			name = k.Name()
		}
		if name != "" {
			tree := v.Tree(name)
			if tree != nil && tree.Version() != version {
				// before the chain's initial version
				return nil, fmt.Errorf("%w: store %q has no version %d", multitree.ErrVersion, name, version)
			}
			store = newViewStore(v, name, version, tree)
		}
		if s.ListeningEnabled(k) {
			store = listenkv.NewStore(store, k, s.listeners[k])
		}
		stores[k] = store
	}
	return cachemulti.NewStore(nil, stores, m.keysByName, s.traceWriter, s.getTracingContext()), nil
}

// SetTracer implements types.MultiStore.
func (s *MultiStore) SetTracer(w io.Writer) types.MultiStore {
	s.traceWriter = w
	return s
}

// SetTracingContext implements types.MultiStore, merging tc into the
// current context.
func (s *MultiStore) SetTracingContext(tc types.TraceContext) types.MultiStore {
	s.traceContext.Lock()
	defer s.traceContext.Unlock()
	s.traceContext.tc = s.traceContext.tc.Merge(tc)
	return s
}

func (s *MultiStore) getTracingContext() types.TraceContext {
	s.traceContext.Lock()
	defer s.traceContext.Unlock()
	if s.traceContext.tc == nil {
		return nil
	}
	ctx := types.TraceContext{}
	for k, v := range s.traceContext.tc {
		ctx[k] = v
	}
	return ctx
}

// TracingEnabled implements types.MultiStore.
func (s *MultiStore) TracingEnabled() bool { return s.traceWriter != nil }

// AddListeners implements types.CommitMultiStore (ADR-038).
func (s *MultiStore) AddListeners(keys []types.StoreKey) {
	for _, key := range keys {
		if s.listeners[key] == nil {
			s.listeners[key] = types.NewMemoryListener()
		}
	}
}

// ListeningEnabled implements types.CommitMultiStore.
func (s *MultiStore) ListeningEnabled(key types.StoreKey) bool {
	return s.listeners[key] != nil
}

// PopStateCache implements types.CommitMultiStore: the writes observed by
// the listeners since the last call, sorted by store key (stably).
func (s *MultiStore) PopStateCache() []*types.StoreKVPair {
	var cache []*types.StoreKVPair
	for _, ls := range s.listeners {
		if ls != nil {
			cache = append(cache, ls.PopStateCache()...)
		}
	}
	sort.SliceStable(cache, func(i, j int) bool {
		return cache[i].StoreKey < cache[j].StoreKey
	})
	return cache
}
