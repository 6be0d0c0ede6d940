package compat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"cosmossdk.io/store/cachekv"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/tracekv"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TreeStore is the CommitKVStore of one store of the database: the working
// tree of that store, as rootmulti mounts an iavl.Store per module.
//
// Writes are buffered in the store and applied to the database (which logs
// them) in one batch: all stores' batches together, as parallel per-store
// tasks (multitree.DB.ApplyChangeSets), when the multistore computes the
// working hash or commits, or this store's batch alone before any read of the
// store, so reads always see every earlier write. Like iavl.Store it follows the
// KVStore contract: Set panics on a nil or empty key and on a nil value
// (types.AssertValidKey, types.AssertValidValue); a failure of the database
// (closed, corrupt) panics with the error, as iavl.Store does for its tree's
// errors, when the batch holding the write is applied. Deleting a nil key is
// a no-op, as in iavl.
//
// A TreeStore is written by the goroutine that executes blocks, and may be
// read beside it: the SDK's simulations (the gRPC Simulate service, and
// ABCI queries under optimistic execution) read the working state through
// the check state's branch on goroutines of their own, while a block's
// writes reach the stores. Every method (and each step of an iterator)
// holds the multistore's lock of the working state (MultiStore.work) for
// its duration, as do the multistore's WorkingHash, Commit and
// RewriteSnapshot, so a read never applies or loses writes the block is
// making, nor reads a tree being changed. The lock is held for one
// operation at a time (a Commit's at most, or a synchronous
// RewriteSnapshot's, which is for offline use), never across calls. Queries of
// committed versions use CacheMultiStoreWithVersion, which takes no such
// lock. Unless
// Config.ZeroCopy is set, every key and value it returns is the caller's
// own copy or a slice the tree holds in memory, never a slice of a memory
// map.
type TreeStore struct {
	ms *MultiStore
	// db is the database of the load; a reload points the store at the
	// next one (see MultiStore.keepTrees)
	db   atomic.Pointer[multitree.DB]
	name string
	// tree is the working tree; the multistore refreshes it after every
	// operation that may replace it (Commit, store upgrades, reloads).
	tree multitree.WorkingReader
	// own is set while the store reads a tree of its own, outside any
	// database: during a reload (see MultiStore.readCommitted and
	// readEmpty). Writes are applied to it, and are gone with it when a
	// load points the store at its database, as the working changes are.
	own      *memiavl.Tree
	zeroCopy bool
	// pending are the writes not yet applied to the database, in order.
	pending []wal.KVPair
}

var (
	_ types.CommitKVStore           = (*TreeStore)(nil)
	_ types.Queryable               = (*TreeStore)(nil)
	_ types.StoreWithInitialVersion = (*TreeStore)(nil)
)

// Name returns the store's name.
func (st *TreeStore) Name() string { return st.name }

// GetStoreType implements types.Store: StoreTypeIAVL.
func (st *TreeStore) GetStoreType() types.StoreType { return types.StoreTypeIAVL }

// CacheWrap implements types.Store.
func (st *TreeStore) CacheWrap() types.CacheWrap { return cachekv.NewStore(st) }

// CacheWrapWithTrace implements types.Store.
func (st *TreeStore) CacheWrapWithTrace(w io.Writer, tc types.TraceContext) types.CacheWrap {
	return cachekv.NewStore(tracekv.NewStore(st, w, tc))
}

// Get implements types.KVStore. It returns nil for an absent key.
func (st *TreeStore) Get(key []byte) []byte {
	defer st.lock()()
	st.checkOpen()
	st.flush()
	var v []byte
	var err error
	if st.zeroCopy {
		v, err = st.tree.GetZeroCopy(key)
	} else {
		v, err = st.tree.Get(key)
	}
	if err != nil {
		panic(fmt.Errorf("memiavl: store %q: get %s: %w", st.name, hexkey.Upper(key), err))
	}
	return v
}

// Has implements types.KVStore.
func (st *TreeStore) Has(key []byte) bool {
	defer st.lock()()
	st.checkOpen()
	st.flush()
	ok, err := st.tree.Has(key)
	if err != nil {
		panic(fmt.Errorf("memiavl: store %q: has %s: %w", st.name, hexkey.Upper(key), err))
	}
	return ok
}

// Set implements types.KVStore. The tree retains key and value: the caller
// must not modify them afterwards (as with iavl).
func (st *TreeStore) Set(key, value []byte) {
	types.AssertValidKey(key)
	types.AssertValidValue(value)
	defer st.lock()()
	st.pending = append(st.pending, wal.KVPair{Key: key, Value: value})
}

// Delete implements types.KVStore. The key is copied: the caller may
// reuse it (iavl removes the key at the call).
func (st *TreeStore) Delete(key []byte) {
	if key == nil {
		return
	}
	defer st.lock()()
	st.pending = append(st.pending, wal.KVPair{Delete: true, Key: bytes.Clone(key)})
}

// lock takes the multistore's lock of the working state and returns its
// release, for a deferred call (a method that panics releases it).
func (st *TreeStore) lock() func() {
	st.ms.work.Lock()
	return st.ms.work.Unlock
}

// checkOpen panics once the multistore is closed, until a load opens it
// again: the working tree would serve the keys changed since its snapshot
// from memory and fail on the others, as the snapshot is unmapped. The
// working state's lock must be held.
func (st *TreeStore) checkOpen() {
	if st.ms.closed {
		panic(fmt.Errorf("memiavl: store %q: %w: %w", st.name, ErrNotLoaded, multitree.ErrClosed))
	}
}

// maxKeptPending bounds the capacity of the buffer of pending writes a
// store keeps for its next block (1 MiB): a block of more writes, such as a
// genesis or a migration, gets a buffer of its own, which goes with it.
const maxKeptPending = (1 << 20) / int(unsafe.Sizeof(wal.KVPair{}))

// discardPending empties the store's buffer of pending writes, keeping its
// capacity up to maxKeptPending; the working state's lock must be held.
func (st *TreeStore) discardPending() {
	if cap(st.pending) > maxKeptPending {
		st.pending = nil
		return
	}
	clear(st.pending)
	st.pending = st.pending[:0]
}

// readEmpty points the store at a new empty tree of its own (see own) and
// discards its pending writes, for a store no database stands behind; the
// working state's lock must be held.
func (st *TreeStore) readEmpty() { st.readOwn(emptyTree()) }

// readOwn points the store at t, a tree of its own (see own), and discards
// its pending writes; the working state's lock must be held.
func (st *TreeStore) readOwn(t *memiavl.Tree) {
	st.tree, st.own = t, t
	st.discardPending()
}

// flush applies the store's pending writes to the database, or to its own
// tree (see own); the working state's lock must be held.
func (st *TreeStore) flush() {
	if st.own == nil {
		applyPending(st.db.Load(), st)
		return
	}
	for _, p := range st.pending {
		var err error
		if p.Delete {
			_, err = st.own.Remove(p.Key)
		} else {
			_, err = st.own.Set(p.Key, p.Value)
		}
		if err != nil {
			panic(fmt.Errorf("memiavl: store %q: applying a buffered write: %w", st.name, err))
		}
	}
	st.discardPending()
}

// applyPending applies the pending writes of stores to db in one
// ApplyChangeSets call (the stores in parallel) and empties their buffers
// for reuse: the database copies the pairs it logs, and the trees keep keys
// and values, not the buffers. A failure panics.
func applyPending(db *multitree.DB, stores ...*TreeStore) {
	if err := tryApplyPending(db, stores...); err != nil {
		panic(err)
	}
}

// tryApplyPending is applyPending, except that a database closed meanwhile
// (by a Close or a reload on another goroutine) is an error wrapping
// multitree.ErrClosed, and the buffers keep their writes: the stores may be
// those of the next load, whose database they are for.
func tryApplyPending(db *multitree.DB, stores ...*TreeStore) error {
	var css []wal.ChangeSet
	for _, st := range stores {
		if len(st.pending) > 0 {
			css = append(css, wal.ChangeSet{Name: st.name, Pairs: st.pending})
		}
	}
	if len(css) == 0 {
		return nil
	}
	err := db.ApplyChangeSets(css)
	closed := errors.Is(err, multitree.ErrClosed)
	if !closed {
		for _, st := range stores {
			st.discardPending()
		}
	}
	if err == nil {
		return nil
	}
	// a read or a commit applies the writes buffered before it
	names := make([]string, len(css))
	for i, cs := range css {
		names[i] = strconv.Quote(cs.Name)
	}
	what := "store"
	if len(names) > 1 {
		what = "stores"
	}
	err = fmt.Errorf("memiavl: applying the buffered writes of %s %s: %w", what, strings.Join(names, ", "), err)
	if !closed {
		panic(err)
	}
	return err
}

// Iterator implements types.KVStore: ascending over [start, end), a nil
// bound being open. As with iavl, writes to the store while the iterator is
// open that fall outside the keys still to come do not disturb it (see
// memiavl.Iterator); writes among them are against the KVStore contract
// (write through a cache branch instead). The iterator holds the snapshot
// it reads until its Close, so it may outlive its block: after a commit
// that switches the store to a new snapshot, a reload or the multistore's
// Close, it reads on over the state it was reading then, as rootmulti's
// iterators read on over the tree they were made on.
func (st *TreeStore) Iterator(start, end []byte) types.Iterator {
	return st.iterator(start, end, true)
}

// ReverseIterator implements types.KVStore: descending over [start, end).
func (st *TreeStore) ReverseIterator(start, end []byte) types.Iterator {
	return st.iterator(start, end, false)
}

func (st *TreeStore) iterator(start, end []byte, ascending bool) types.Iterator {
	defer st.lock()()
	st.checkOpen()
	st.flush()
	it := st.tree.Iterator(start, end, ascending)
	if st.own != nil {
		// a tree of its own during a reload: a copy of the detached
		// view's tree (see MultiStore.readCommitted), whose snapshot the
		// iterator holds as the database's iterators hold theirs; the
		// view is held meanwhile (it changes under work)
		if v := st.ms.detached.Load(); v != nil && v.Pin() {
			it.Hold(viewPin{v})
		}
	}
	si := &storeIterator{it: it, store: st.name, copy: !st.zeroCopy, mu: &st.ms.work}
	si.check()
	return si
}

// viewPin is a Pin of a view that an iterator holds until its Close
// (memiavl.Iterator.Hold).
type viewPin struct{ v *multitree.View }

func (p viewPin) Release() { p.v.Unpin() }

// Commit implements types.Committer. The stores of the database are
// committed together by MultiStore.Commit; committing one store alone is a
// programming error and panics.
func (st *TreeStore) Commit() types.CommitID {
	panic(fmt.Sprintf("memiavl: store %q is committed with its multistore (CommitMultiStore.Commit)", st.name))
}

// LastCommitID implements types.Committer: the last committed version and
// the store's root hash at it. A store added in the working version has not
// been committed: version 0 and the empty tree's hash.
func (st *TreeStore) LastCommitID() types.CommitID {
	if si, ok := lastStoreInfo(st.db.Load(), st.name); ok {
		return cloneCommitID(si.CommitId)
	}
	return types.CommitID{Hash: emptyAppHash()}
}

// lastStoreInfo returns store's entry in the last commit info, if it has
// one.
func lastStoreInfo(db *multitree.DB, store string) (types.StoreInfo, bool) {
	if info := db.LastCommitInfo(); info != nil {
		for _, si := range info.StoreInfos {
			if si.Name == store {
				return si, true
			}
		}
	}
	return types.StoreInfo{}, false
}

// WorkingHash implements types.Committer: the root hash of the working tree.
func (st *TreeStore) WorkingHash() []byte {
	defer st.lock()()
	st.checkOpen()
	st.flush()
	return st.tree.RootHash()
}

// SetPruning implements types.Committer. It is a no-op: history is kept as
// snapshots (Config.SnapshotKeepRecent), not pruned by height.
func (st *TreeStore) SetPruning(pruningtypes.PruningOptions) {}

// GetPruning implements types.Committer: PruningUndefined, as the SDK's
// stores without pruning of their own return.
func (st *TreeStore) GetPruning() pruningtypes.PruningOptions {
	return pruningtypes.NewPruningOptions(pruningtypes.PruningUndefined)
}

// SetInitialVersion implements types.StoreWithInitialVersion. The initial
// version belongs to the whole database: this sets it for every store (see
// MultiStore.SetInitialVersion).
func (st *TreeStore) SetInitialVersion(version int64) {
	if err := st.ms.SetInitialVersion(version); err != nil {
		panic(err)
	}
}

// Query implements types.Queryable with the paths of iavl.Store: "/key"
// (with proofs) and "/subspace". See MultiStore.Query.
func (st *TreeStore) Query(req *types.RequestQuery) (*types.ResponseQuery, error) {
	res, _, err := st.ms.queryStore(st.name, req, false)
	return res, err
}

// storeIterator is a tree iterator seen through types.Iterator. Unless the
// store is zero-copy it returns copies of the keys and values, so that they
// stay valid after the snapshot they were read from is unmapped.
//
// Like Get, it panics when the tree cannot be read (a damaged snapshot):
// types.Iterator has no error return the SDK checks, and an iteration that
// ended early instead would let the state machine go on from part of the
// state. The panic names the store and the damaged file.
type storeIterator struct {
	it         *memiavl.Iterator
	store      string
	copy       bool
	key, value []byte
	copiedKey  bool
	copiedVal  bool
	closed     bool
	// mu is the lock of the working state the tree belongs to (a
	// TreeStore's iterator), held by each method; nil for a tree of its
	// own (droppedStore)
	mu *sync.Mutex
}

var _ types.Iterator = (*storeIterator)(nil)

// lock takes si.mu, if any, and returns si, whose unlock releases it:
// defer si.lock().unlock() (a returned method value would be allocated at
// every call).
func (si *storeIterator) lock() *storeIterator {
	if si.mu != nil {
		si.mu.Lock()
	}
	return si
}

func (si *storeIterator) unlock() {
	if si.mu != nil {
		si.mu.Unlock()
	}
}

func (si *storeIterator) Domain() ([]byte, []byte) { return si.it.Domain() }
func (si *storeIterator) Valid() bool {
	defer si.lock().unlock()
	if !si.it.Valid() {
		if !si.closed {
			si.check() // an iteration its snapshot's release stopped is not complete
		}
		return false
	}
	return true
}
func (si *storeIterator) Error() error {
	defer si.lock().unlock()
	return si.it.Error()
}
func (si *storeIterator) Close() error {
	defer si.lock().unlock()
	si.key, si.value, si.copiedKey, si.copiedVal, si.closed = nil, nil, false, false, true
	return si.it.Close()
}

// check panics if the iterator stopped on an error: as panicReleased
// does, so that an iteration stopped by its snapshot's release says so
// whichever method meets it.
func (si *storeIterator) check() {
	if err := si.it.Error(); err != nil {
		si.panicReleased(err)
	}
}

// checkReleased panics if the snapshot the iterator reads was closed under
// it. An iterator of the working state holds its snapshot until its Close
// (multitree.DB.WorkingTree; during a reload, the detached view's), so
// this is an iterator made from a store whose database was closed
// already.
func (si *storeIterator) checkReleased() {
	if si.it.Released() {
		si.panicReleased(snapshot.ErrClosed)
	}
}

// panicReleased panics with err, the error of a read of the iterator's
// snapshot: wrapping snapshot.ErrClosed when it was closed under the
// iterator, memiavl.ErrCorrupt when its file is damaged.
func (si *storeIterator) panicReleased(err error) {
	if errors.Is(err, snapshot.ErrClosed) {
		panic(fmt.Errorf("memiavl: store %q: iterator used after the snapshot it reads was released (the multistore was closed or reloaded): %w",
			si.store, err))
	}
	panic(fmt.Errorf("memiavl: store %q: iterate: %w", si.store, err))
}

func (si *storeIterator) Next() {
	defer si.lock().unlock()
	si.it.Next()
	si.copiedKey, si.copiedVal = false, false
	si.check()
}

// Key and Value read the iterator's pair once per step; memiavl's Key and
// Value are nil once its snapshot is released, which is checked then (a
// copy already made is checked each time).
func (si *storeIterator) Key() []byte {
	defer si.lock().unlock()
	if si.copiedKey {
		si.checkReleased()
		return si.key
	}
	if si.copy {
		// copied under the fault guard: the snapshot can be unmapped by
		// another goroutine between a check and the copy
		k, err := si.it.CopyKey()
		if err != nil {
			si.panicReleased(err)
		}
		si.key, si.copiedKey = k, true
		return si.key
	}
	k := si.it.Key()
	if k == nil {
		si.checkReleased()
	}
	return k
}

func (si *storeIterator) Value() []byte {
	defer si.lock().unlock()
	if si.copiedVal {
		si.checkReleased()
		return si.value
	}
	if si.copy {
		v, err := si.it.CopyValue()
		if err != nil {
			si.panicReleased(err)
		}
		si.value, si.copiedVal = v, true
		return si.value
	}
	v := si.it.Value()
	if v == nil {
		si.checkReleased()
	}
	return v
}

// cloneValue copies v, keeping an empty value non-nil.
func cloneValue(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append(make([]byte, 0, len(v)), v...)
}
