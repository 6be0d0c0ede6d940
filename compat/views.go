package compat

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"cosmossdk.io/store/cachekv"
	"cosmossdk.io/store/tracekv"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// Historical reads and their lifetime.
//
// Queries and CacheMultiStoreWithVersion read committed versions through
// database views (multitree.View), which pin the memory-mapped snapshots they
// read. The SDK gives a branch no Close, so a branch cannot own a view.
// Instead the multistore keeps a small cache of views per version (viewCache,
// Config.QueryViews entries, least recently used evicted first; every Commit
// inserts the new latest version). A branch refers to the cache's view and
// pins it only for the duration of each read (multitree.View.Pin): one Get,
// one Has, or one step of an iterator, whose keys and values are copied out
// before the pin is dropped. Between reads a branch holds no pin, so no
// snapshot stays mapped however long it lives, and when its version has been
// evicted and the snapshots unmapped, its next read panics with
// ErrVersionReleased, the counterpart of a version pruned under a query in
// rootmulti, instead of reading unmapped memory; that read lets go of the
// version's trees, which the branch kept reachable until then (see
// viewStore.read). No finalizer is involved.
//
// A state-sync snapshot is the exception: the SDK's snapshot manager takes
// it on a goroutine of its own, and its extensions (wasm's, for one) read
// the snapshot's version through CacheMultiStoreWithVersion for as long as
// they take, while blocks commit. Snapshot holds a pin on that version's
// view (viewCache.hold) until the manager's PruneSnapshotHeight, as
// rootmulti's pruning keeps a snapshot height until then; one version at a
// time, as the manager takes one snapshot at a time.

// viewCache holds the database views of recent versions, each with one
// reference, for at most size versions.
type viewCache struct {
	size int
	mu   struct {
		sync.Mutex
		db    *multitree.DB // the database the views are of; nil: none (closed)
		views map[int64]*multitree.View
		order []int64 // least recently used first
		// held: views pinned for a state-sync snapshot (see hold), one
		// Pin each, served by get whether or not views has them
		held map[int64]*multitree.View
	}
}

func newViewCache(size int) *viewCache {
	c := &viewCache{size: max(size, 1)}
	c.mu.views = map[int64]*multitree.View{}
	c.mu.held = map[int64]*multitree.View{}
	return c
}

// hold keeps the view of version readable until unhold(version), a rebind
// or the next hold of another version: get serves it even after the cache
// evicted it and a snapshot switch would have unmapped its snapshots. It
// returns the view with a second pin, the caller's, who must Unpin it: the
// view the cache serves may be one the database could no longer rebuild
// (its snapshots pruned since).
func (c *viewCache) hold(db *multitree.DB, version int64) (*multitree.View, error) {
	v, err := c.get(db, version) // pinned for the hold
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.db != db {
		v.Unpin()
		return nil, ErrNotLoaded
	}
	if !v.Pin() { // cannot fail: the hold's pin keeps it
		v.Unpin()
		return nil, fmt.Errorf("%w: %d", multitree.ErrVersion, version)
	}
	// one version at a time, with one pin (this one, if held already)
	for h, old := range c.mu.held {
		old.Unpin()
		delete(c.mu.held, h)
	}
	c.mu.held[version] = v
	return v, nil
}

// unhold gives up the pin hold took on version, if any.
func (c *viewCache) unhold(version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.mu.held[version]; ok {
		v.Unpin()
		delete(c.mu.held, version)
	}
}

// boundTo reports whether the cache serves db: not after a Close or a
// reload began (which unbind the cache before they swap the database out
// and close it).
func (c *viewCache) boundTo(db *multitree.DB) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.db == db
}

// get returns the view of version, pinned for the caller (who must Unpin
// it), opening it if it is not cached.
func (c *viewCache) get(db *multitree.DB, version int64) (*multitree.View, error) {
	c.mu.Lock()
	if c.mu.db != db {
		c.mu.Unlock()
		return nil, ErrNotLoaded // closed or reloaded since the caller read db
	}
	if v := c.cachedLocked(version); v != nil {
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()

	// open it without the lock: an old version is rebuilt from a snapshot
	// and the log, which other queries must not wait for
	v, err := db.ViewAt(version)
	if err != nil {
		return nil, err
	}
	if v.Version() != version {
		v.Release()
		return nil, fmt.Errorf("%w: %d", multitree.ErrVersion, version)
	}
	return c.adopt(db, v)
}

// cachedLocked returns the view of version pinned, nil if none is held or
// cached. A held view comes first: the cache may also hold another view of
// the same version (opened by a query beside the hold, after the cache had
// evicted the held one), which the cache releases when it evicts it, and a
// branch of the snapshot's extensions must read the view that stays pinned.
func (c *viewCache) cachedLocked(version int64) *multitree.View {
	if v, ok := c.mu.held[version]; ok && v.Pin() {
		return v
	}
	if v, ok := c.mu.views[version]; ok && v.Pin() {
		c.touchLocked(version)
		return v
	}
	return nil
}

// adopt caches v, a view of db that get opened without the lock, and
// returns it pinned for the caller; if a view of its version was held or
// cached meanwhile, v is released and that one is returned instead.
func (c *viewCache) adopt(db *multitree.DB, v *multitree.View) (*multitree.View, error) {
	version := v.Version()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.db != db {
		// the multistore closed or reloaded while the view opened: a
		// view cached now would never be released
		v.Release()
		return nil, ErrNotLoaded
	}
	if cur := c.cachedLocked(version); cur != nil {
		// another query opened it meanwhile
		v.Release()
		return cur, nil
	}
	if !v.Pin() {
		v.Release()
		return nil, fmt.Errorf("%w: %d", ErrVersionReleased, version)
	}
	c.putLocked(v)
	return v, nil
}

// put inserts v, a view of db (the cache takes over its reference); it
// releases v instead if the cache is no longer bound to db.
func (c *viewCache) put(db *multitree.DB, v *multitree.View) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.db != db {
		v.Release()
		return
	}
	c.putLocked(v)
}

func (c *viewCache) putLocked(v *multitree.View) {
	version := v.Version()
	if old, ok := c.mu.views[version]; ok {
		old.Release()
	}
	c.mu.views[version] = v
	c.touchLocked(version)
	for len(c.mu.order) > c.size {
		evict := c.mu.order[0]
		c.mu.order = c.mu.order[1:]
		c.mu.views[evict].Release()
		delete(c.mu.views, evict)
	}
}

func (c *viewCache) touchLocked(version int64) {
	for i, v := range c.mu.order {
		if v == version {
			c.mu.order = append(c.mu.order[:i], c.mu.order[i+1:]...)
			break
		}
	}
	c.mu.order = append(c.mu.order, version)
}

// bind releases every cached view and binds the cache to db (nil when the
// multistore closes): from then on only views of db are cached, and a view
// of another database, opened by a query that read the multistore's
// database before the change, is released instead.
func (c *viewCache) bind(db *multitree.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.mu.views {
		v.Release()
	}
	for _, v := range c.mu.held {
		v.Unpin()
	}
	c.mu.db = db
	c.mu.views = map[int64]*multitree.View{}
	c.mu.held = map[int64]*multitree.View{}
	c.mu.order = nil
}

// viewStore is a read-only KVStore over one store of a view: the IAVL
// stores of a CacheMultiStoreWithVersion branch. It pins the view around
// every read (see above); keys and values it returns are copies.
type viewStore struct {
	name    string
	version int64
	exists  bool // whether the store exists at version
	// read is the view and the store's tree in it, nil once a read found
	// the view released: the store lets go of them then (the in-memory
	// nodes of a version rebuilt from the log can be many), and every
	// later read panics. Atomic: iterators of one branch may step on
	// several goroutines.
	read atomic.Pointer[viewRead]
}

// viewRead is what a viewStore reads: its view, and its tree in it.
type viewRead struct {
	view *multitree.View
	tree *memiavl.Tree
}

var _ types.KVStore = (*viewStore)(nil)

func newViewStore(v *multitree.View, name string, version int64, tree *memiavl.Tree) *viewStore {
	s := &viewStore{name: name, version: version, exists: tree != nil}
	if tree != nil {
		s.read.Store(&viewRead{view: v, tree: tree})
	}
	return s
}

// pin pins the view for one read and returns it, to Unpin after the read;
// it panics when the store does not exist at the version, or the view is
// released.
func (s *viewStore) pin() *viewRead {
	if !s.exists {
		panic(fmt.Errorf("%w: %q at version %d", ErrStoreNotAtVersion, s.name, s.version))
	}
	r := s.read.Load()
	if r == nil || !r.view.Pin() {
		s.read.Store(nil)
		panic(fmt.Errorf("%w: store %q at version %d", ErrVersionReleased, s.name, s.version))
	}
	return r
}

// released reports whether a read found the view released.
func (s *viewStore) released() bool { return s.exists && s.read.Load() == nil }

func (s *viewStore) GetStoreType() types.StoreType { return types.StoreTypeIAVL }

func (s *viewStore) CacheWrap() types.CacheWrap { return cachekv.NewStore(s) }

func (s *viewStore) CacheWrapWithTrace(w io.Writer, tc types.TraceContext) types.CacheWrap {
	return cachekv.NewStore(tracekv.NewStore(s, w, tc))
}

func (s *viewStore) Get(key []byte) []byte {
	r := s.pin()
	defer r.view.Unpin()
	v, err := r.tree.Get(key) // copies values read from the snapshot
	if err != nil {
		panic(fmt.Errorf("memiavl: store %q at version %d: get %s: %w", s.name, s.version, hexkey.Upper(key), err))
	}
	return v
}

func (s *viewStore) Has(key []byte) bool {
	r := s.pin()
	defer r.view.Unpin()
	ok, err := r.tree.Has(key)
	if err != nil {
		panic(fmt.Errorf("memiavl: store %q at version %d: has %s: %w", s.name, s.version, hexkey.Upper(key), err))
	}
	return ok
}

func (s *viewStore) Set(key, _ []byte) {
	panic(fmt.Errorf("%w: set %s in store %q at version %d", ErrReadOnlyVersion, hexkey.Upper(key), s.name, s.version))
}

func (s *viewStore) Delete(key []byte) {
	panic(fmt.Errorf("%w: delete %s in store %q at version %d", ErrReadOnlyVersion, hexkey.Upper(key), s.name, s.version))
}

func (s *viewStore) Iterator(start, end []byte) types.Iterator {
	return newViewIterator(s, start, end, true)
}

func (s *viewStore) ReverseIterator(start, end []byte) types.Iterator {
	return newViewIterator(s, start, end, false)
}

// viewIterator iterates a viewStore, pinning its view during each step and
// copying the current pair out.
type viewIterator struct {
	s          *viewStore
	it         *memiavl.Iterator // nil once the view was found released
	start, end []byte
	key, value []byte
	valid      bool
	err        error
}

func newViewIterator(s *viewStore, start, end []byte, ascending bool) *viewIterator {
	r := s.pin()
	defer r.view.Unpin()
	vi := &viewIterator{s: s, it: r.tree.Iterator(start, end, ascending), start: start, end: end}
	vi.load()
	return vi
}

func (vi *viewIterator) load() {
	vi.valid = vi.it.Valid()
	vi.err = vi.it.Error()
	if vi.err != nil {
		// as storeIterator does: an iteration cut short by damage panics
		panic(fmt.Errorf("memiavl: store %q at version %d: iterate: %w", vi.s.name, vi.s.version, vi.err))
	}
	if vi.valid {
		vi.key = cloneValue(vi.it.Key())
		vi.value = cloneValue(vi.it.Value())
	} else {
		vi.key, vi.value = nil, nil
	}
}

func (vi *viewIterator) Domain() ([]byte, []byte) { return vi.start, vi.end }
func (vi *viewIterator) Valid() bool              { return vi.valid }
func (vi *viewIterator) Key() []byte              { return vi.key }
func (vi *viewIterator) Value() []byte            { return vi.value }
func (vi *viewIterator) Error() error             { return vi.err }

func (vi *viewIterator) Next() {
	if !vi.valid {
		return
	}
	defer func() {
		if vi.s.released() {
			// the view is gone (pin panicked): let go of the tree; the
			// next Next panics the same way
			vi.it = nil
		}
	}()
	r := vi.s.pin()
	defer r.view.Unpin()
	vi.it.Next()
	vi.load()
}

func (vi *viewIterator) Close() error {
	vi.valid = false
	if vi.it == nil {
		return nil
	}
	return vi.it.Close()
}
