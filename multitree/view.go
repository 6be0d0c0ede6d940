package multitree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// View is a read-only, immutable view of one committed version. It pins the
// snapshots it reads: they stay mapped until Release, even if the database
// switches to a newer snapshot or deletes the files meanwhile. A View may be
// used from any goroutine; its trees are shared and must only be read.
type View struct {
	st       *state
	released atomic.Bool
	pins     atomic.Int64 // Pins not yet Unpinned
}

// View returns a view of the latest committed version. It takes no lock
// held by Commit.
func (db *DB) View() (*View, error) {
	for {
		st := db.state.Load()
		if st == nil {
			return nil, ErrClosed
		}
		if st.gen.tryAcquire() {
			return &View{st: st}, nil
		}
		// the state was replaced and its snapshots released meanwhile
	}
}

// maxRebuilds bounds the versions ViewAt rebuilds at once: each holds the
// nodes changed between its snapshot and its version until it is
// released, and concurrent queries of old heights would otherwise hold one
// each. A variable for tests.
var maxRebuilds = 2

// ViewAt returns a view of version: the latest one (also for version 0,
// as View), or an older version rebuilt from the newest kept snapshot at or
// below it plus the log. Rebuilt views are cached (ViewCacheSize). Callers
// of a version being rebuilt wait for that rebuild and share it, and at
// most maxRebuilds (2) versions are rebuilt at once: further callers wait
// for a turn.
func (db *DB) ViewAt(version int64) (view *View, err error) {
	defer func() { err = asCorrupt(err) }()
	v, err := db.View()
	if err != nil || version == 0 || v.Version() == version {
		return v, err
	}
	latest := v.Version()
	v.Release()
	if version > latest || version < 0 {
		return nil, fmt.Errorf("%w: %d (latest is %d)", ErrVersion, version, latest)
	}
	db.sweepPrunedViews()
	call, v, err := db.cachedOrRebuilding(version)
	if call == nil {
		return v, err
	}
	defer func() { db.endRebuild(version, call, view, err) }()
	// Rebuild without the lock, so that queries of other versions (and
	// cache hits) do not wait for this one; at most maxRebuilds at once,
	// each holding the nodes changed since its snapshot.
	call.slots <- struct{}{}
	defer func() { <-call.slots }()
	if db.viewsClosed() {
		// Close ended while this call waited for a slot: the files are
		// not to be mapped and replayed after it released them
		return nil, ErrClosed
	}
	st, err := db.loadVersion(version)
	if err != nil {
		return nil, err
	}
	if h := db.afterRebuild; h != nil {
		h(version)
	}
	// a read-only database learns of the writer's prunes from the
	// directory, listed before the lock: a view whose snapshot went
	// meanwhile is not cached
	gone := db.opts.ReadOnly && pruned(db.dir, st.gen.version)
	db.views.Lock()
	defer db.views.Unlock()
	if db.views.closed {
		st.gen.release()
		return nil, ErrClosed
	}
	if version < db.views.floor {
		// a snapshot commit while it was rebuilt: refused like the
		// versions before it that were cached (dropViewsBefore)
		st.gen.release()
		return nil, fmt.Errorf("%w: %d is before version %d, committed by a snapshot", ErrVersion, version, db.views.floor)
	}
	if cur, ok := db.views.cache[version]; ok && cur.gen.tryAcquire() {
		st.gen.release()
		db.touchViewLocked(version)
		return &View{st: cur}, nil
	}
	if db.opts.ViewCacheSize > 0 && (!db.views.prunedAny || st.gen.version > db.views.pruned) && !gone {
		if db.views.cache == nil {
			db.views.cache = map[int64]*state{}
		}
		st.gen.acquire() // the cache's reference
		db.views.cache[version] = st
		db.touchViewLocked(version)
		for len(db.views.order) > db.opts.ViewCacheSize {
			old := db.views.order[0]
			db.views.order = db.views.order[1:]
			db.views.cache[old].gen.release()
			delete(db.views.cache, old)
		}
	}
	return &View{st: st}, nil
}

// sweepPrunedViews drops from the cache of a read-only database the views
// rebuilt from snapshots that the writer's prune has removed, which would
// keep the removed files mapped (and their disk space in use) until
// evicted: the writer drops its own at the prune (forgetSnapshots), a
// read-only database finds them gone from dir. dir is listed only when
// its modification time has changed since the last listing, or was then
// too recent to tell a later change within the same clock tick apart.
func (db *DB) sweepPrunedViews() {
	if !db.opts.ReadOnly {
		return
	}
	db.views.Lock()
	cached, seen := len(db.views.cache), db.views.dirTime
	db.views.Unlock()
	if cached == 0 {
		return
	}
	if rolled, err := db.rolledBack(); err == nil && rolled {
		// a writer's rollback since the open: the versions it discarded
		// are not to be served from the cache either (rebuilds refuse
		// them), and a snapshot it removed may be listed again, written
		// anew at the same version, which the check by version below
		// would take for the one the cached views map
		db.views.Lock()
		defer db.views.Unlock()
		db.dropViewsLocked(func(int64, *state) bool { return true })
		return
	}
	fi, err := os.Stat(db.dir)
	if err != nil || (!seen.IsZero() && fi.ModTime().Equal(seen)) {
		return
	}
	kept, err := listSnapshots(db.dir)
	if err != nil {
		return
	}
	db.views.Lock()
	defer db.views.Unlock()
	db.views.dirTime = time.Time{}
	if time.Since(fi.ModTime()) > time.Second {
		db.views.dirTime = fi.ModTime()
	}
	db.dropViewsLocked(func(_ int64, st *state) bool { return !slices.Contains(kept, st.gen.version) })
}

// dropViewsLocked releases the cached views for which drop, given the
// view's version and state, reports true. db.views must be held.
func (db *DB) dropViewsLocked(drop func(version int64, st *state) bool) {
	order := db.views.order[:0]
	for _, ver := range db.views.order {
		if st := db.views.cache[ver]; drop(ver, st) {
			st.gen.release()
			delete(db.views.cache, ver)
			continue
		}
		order = append(order, ver)
	}
	db.views.order = order
}

// viewsClosed reports whether Close has ended the views.
func (db *DB) viewsClosed() bool {
	db.views.Lock()
	defer db.views.Unlock()
	return db.views.closed
}

// rebuildCall is a rebuild of a version by ViewAt that other callers of the
// version wait for (done). If some did, st is the version's state, with a
// reference that the last of them drops, or err the rebuild's failure.
type rebuildCall struct {
	done    chan struct{}
	slots   chan struct{} // db.views.slots
	waiters int
	st      *state
	err     error
}

// cachedOrRebuilding returns the cached view of version, or the view (or
// failure) of another caller's rebuild of it after waiting for it, or, when
// neither is there, a rebuildCall registering this caller's rebuild, which
// it ends with endRebuild.
func (db *DB) cachedOrRebuilding(version int64) (*rebuildCall, *View, error) {
	for {
		db.views.Lock()
		if st, ok := db.views.cache[version]; ok && st.gen.tryAcquire() {
			db.touchViewLocked(version)
			db.views.Unlock()
			return nil, &View{st: st}, nil
		}
		if db.views.closed {
			db.views.Unlock()
			return nil, nil, ErrClosed
		}
		busy, ok := db.views.rebuilding[version]
		if !ok {
			if db.views.rebuilding == nil {
				db.views.rebuilding = map[int64]*rebuildCall{}
				db.views.slots = make(chan struct{}, maxRebuilds)
			}
			call := &rebuildCall{done: make(chan struct{}), slots: db.views.slots}
			db.views.rebuilding[version] = call
			db.views.Unlock()
			return call, nil, nil
		}
		busy.waiters++
		db.views.Unlock()
		<-busy.done
		if v, err, ok := db.takeRebuilt(busy); ok {
			return nil, v, err
		}
		// the rebuild ended without a result (a panic): look again
	}
}

// endRebuild ends this caller's rebuild of version, handing the callers
// that waited for it its view (with a reference for them) or its failure.
func (db *DB) endRebuild(version int64, call *rebuildCall, view *View, err error) {
	db.views.Lock()
	defer db.views.Unlock()
	delete(db.views.rebuilding, version)
	if call.waiters > 0 {
		if view != nil {
			view.st.gen.acquire() // the waiters' until the last takes its own
			call.st = view.st
		}
		call.err = err
	}
	close(call.done)
}

// takeRebuilt returns a view of what the rebuild c a caller waited for
// made, or its failure; ok is false when it made neither.
func (db *DB) takeRebuilt(c *rebuildCall) (v *View, err error, ok bool) {
	db.views.Lock()
	defer db.views.Unlock()
	c.waiters--
	if c.st == nil {
		return nil, c.err, c.err != nil
	}
	c.st.gen.acquire()
	if c.waiters == 0 {
		c.st.gen.release()
	}
	return &View{st: c.st}, nil, true
}

func (db *DB) touchViewLocked(version int64) {
	for i, v := range db.views.order {
		if v == version {
			db.views.order = append(db.views.order[:i], db.views.order[i+1:]...)
			break
		}
	}
	db.views.order = append(db.views.order, version)
}

// loadVersion rebuilds version from the newest kept snapshot at or below it.
// The returned state holds one reference on its generation.
//
// The background prune may remove that snapshot, and the log after it up
// to a newer kept one, while the rebuild reads them. It renames a snapshot
// directory away before removing its files (removeSnapshotDir) and
// truncates the log after that, so a rebuild that fails while its
// snapshot is still listed has met damage, not the prune. One that fails
// with its snapshot gone starts again from the newest kept snapshot at or
// below version, if there is one (else the version is no longer kept:
// ErrVersion), up to besideWriterAttempts times in all.
func (db *DB) loadVersion(version int64) (*state, error) {
	for attempt := 1; ; attempt++ {
		base, err := db.snapshotAtOrBelow(version)
		if err != nil {
			return nil, err
		}
		st, err := db.loadFrom(base, version)
		if err == nil || attempt == besideWriterAttempts {
			return st, err
		}
		if !pruned(db.dir, base) {
			return nil, err
		}
	}
}

// snapshotAtOrBelow returns the newest kept snapshot at or below version.
func (db *DB) snapshotAtOrBelow(version int64) (int64, error) {
	versions, err := listSnapshots(db.dir)
	if err != nil {
		return 0, err
	}
	base := int64(-1)
	for _, v := range versions {
		if v <= version {
			base = v
		}
	}
	if base < 0 {
		return 0, notKept(db.dir, version)
	}
	return base, nil
}

// notKept is the error for a version older than every kept snapshot of
// dir: ErrBeforeFirstVersion when the database's first version, which
// its "first" file records, is after it (the version was never
// committed), else ErrVersion (it was, and its snapshot was pruned).
func notKept(dir string, version int64) error {
	if first, err := readFirst(dir); err == nil && version < first {
		return fmt.Errorf("%w: %d is before the first version %d", ErrBeforeFirstVersion, version, first)
	}
	return fmt.Errorf("%w: %d is older than every kept snapshot", ErrVersion, version)
}

// rebuiltChanges is the hint of the keys the trees of a rebuilt version
// change (memiavl.Options.ChangesHint): only the replay changes them, and
// their filters of changed keys add room as they fill. Sized by the
// snapshot, as a working tree's are, the filters of a cached view would
// hold up to 2 MiB per store.
const rebuiltChanges = 1

// loadFrom rebuilds version from the snapshot at base and the log, on the
// mapping of that snapshot the database has already if it has one
// (sharedGeneration).
func (db *DB) loadFrom(base, version int64) (*state, error) {
	gen, trees, err := db.sharedGeneration(base)
	if err != nil {
		return nil, err
	}
	if gen == nil {
		gen, trees, err = openGenerationAs(filepath.Join(db.dir, snapshotDirName(base)), "", base, rebuiltChanges)
		if err != nil {
			return nil, err
		}
		db.adopt(gen)
		if c := db.mapRebuilt(gen); c != nil {
			// another rebuild mapped the snapshot meanwhile: share it
			gen.release()
			if trees, err = c.newTrees(rebuiltChanges); err != nil {
				c.release()
				return nil, err
			}
			gen = c
		}
	}
	err = db.checkSnapshotOnce(gen, base)
	if err == nil {
		err = db.replay(trees, base, version)
	}
	if errors.Is(err, wal.ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err) // by Close, meanwhile
	}
	if err == nil {
		err = checkBaseKept(db.dir, base)
	}
	if rb, rerr := db.rolledBack(); rerr != nil {
		err = rerr
	} else if rb {
		// whatever the replay met: the log it read was cut back under it
		err = fmt.Errorf("%w: %d: %s was rolled back since it was opened read-only; reopen to read its versions", ErrVersion, version, db.dir)
	}
	if err != nil {
		gen.release()
		return nil, err
	}
	info, err := commitInfo(trees, version)
	if err != nil {
		gen.release()
		return nil, err
	}
	return &state{version: version, info: info, trees: trees, gen: gen}, nil
}

// Release unpins the view. Further use of the view or of slices read from
// it is invalid. Release is idempotent.
func (v *View) Release() {
	if v.released.CompareAndSwap(false, true) {
		v.st.gen.release()
	}
}

// readable reports whether the view's snapshots are still pinned by the
// view: by itself before Release, or by a Pin of it. Another holder of the
// same snapshots (another view, the database's working state) does not
// count: it may release them at any moment.
func (v *View) readable() bool {
	return !v.released.Load() || v.pins.Load() > 0
}

// Version returns the view's version.
func (v *View) Version() int64 { return v.st.version }

// CommitInfo returns the view's commit info, shared with every reader of
// the version: it must not be modified.
func (v *View) CommitInfo() *storetypes.CommitInfo { return v.st.info }

// StoreNames returns the view's stores, sorted.
func (v *View) StoreNames() []string {
	names := make([]string, 0, len(v.st.trees))
	for n := range v.st.trees {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Tree returns a copy of store's tree at the view's version, nil if the
// store does not exist or the view is released and not pinned. The copy is
// the caller's own (it may even be mutated without affecting anything else)
// but reads snapshots pinned by the view: use it only before Release, which
// unmaps them when nothing else pins them. Once they are unmapped, the
// copy's reads fail with an error wrapping snapshot.ErrClosed; slices it
// returned without copying (GetZeroCopy, iterator keys and values) must
// not be touched then: they point into the released mapping.
func (v *View) Tree(store string) *memiavl.Tree {
	t, ok := v.st.trees[store]
	if !ok || !v.readable() {
		return nil
	}
	return t.Copy()
}

// Get returns a copy of key's value in store, nil if absent. After Release,
// unless a Pin of the view is still held, it returns ErrReleased.
func (v *View) Get(store string, key []byte) ([]byte, error) {
	if !v.readable() {
		return nil, fmt.Errorf("%w: get from store %q at version %d", ErrReleased, store, v.st.version)
	}
	t, ok := v.st.trees[store]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	value, err := t.Get(key)
	return value, asCorrupt(err)
}

// snapshotID names one snapshot directory: its version, and the inode of
// the directory, as a rollback and a later rewrite may write another
// snapshot of the same version.
type snapshotID struct {
	version int64
	ino     uint64
}

func (db *DB) snapshotIDOf(version int64) (snapshotID, bool) {
	id, ok := identityOf(filepath.Join(db.dir, snapshotDirName(version)))
	if !ok {
		return snapshotID{}, false
	}
	return snapshotID{version: version, ino: id.ino}, true
}

// snapshotCheck is the check of one snapshot's checksums: done is closed
// once err is set (nil: sound).
type snapshotCheck struct {
	done chan struct{}
	err  error
}

// markChecked records the snapshot of version as checked (Open's check of
// the snapshot it opens from, which reports damage on its own, and the
// snapshots a rewrite writes from checked sources).
func (db *DB) markChecked(version int64) {
	id, ok := db.snapshotIDOf(version)
	if !ok {
		return
	}
	c := &snapshotCheck{done: make(chan struct{})}
	close(c.done)
	db.snapsChecked.Lock()
	defer db.snapsChecked.Unlock()
	if db.snapsChecked.m == nil {
		db.snapsChecked.m = map[snapshotID]*snapshotCheck{}
	}
	db.snapsChecked.m[id] = c
}

// checkSnapshotOnce checks the checksums of gen, the snapshot of version,
// the first time a version is rebuilt from it (unless Options.OpenCheck is
// OpenCheckNone): Open checks only the snapshot it opens from, and an
// older kept one would otherwise serve its versions from damaged files
// without a word. It reads every file of the snapshot once, with read(2).
// Rebuilds from the same snapshot meanwhile wait for that one check, and
// damage it found is the answer of every later rebuild from it.
func (db *DB) checkSnapshotOnce(gen *generation, version int64) error {
	if db.opts.OpenCheck == OpenCheckNone {
		return nil
	}
	id, ok := db.snapshotIDOf(version)
	if !ok {
		return db.checkSnapshot(gen, version)
	}
	db.snapsChecked.Lock()
	if db.snapsChecked.m == nil {
		db.snapsChecked.m = map[snapshotID]*snapshotCheck{}
	}
	c, running := db.snapsChecked.m[id]
	if !running {
		c = &snapshotCheck{done: make(chan struct{})}
		db.snapsChecked.m[id] = c
	}
	db.snapsChecked.Unlock()
	if running {
		select {
		case <-c.done:
			return c.err
		case <-db.ctx.Done():
			return ErrClosed
		}
	}
	c.err = db.checkSnapshot(gen, version)
	if c.err != nil && !errors.Is(c.err, ErrCorrupt) {
		// not the files' damage (closed, an I/O error): a later
		// rebuild checks again
		db.snapsChecked.Lock()
		delete(db.snapsChecked.m, id)
		db.snapsChecked.Unlock()
	}
	close(c.done)
	return c.err
}

// checkSnapshot checks the checksums of gen, the snapshot of version.
func (db *DB) checkSnapshot(gen *generation, version int64) error {
	if err := gen.checkChecksums(db.ctx, nil); err != nil {
		if db.ctx.Err() != nil {
			return ErrClosed
		}
		return fmt.Errorf("snapshot %d: %w", version, err)
	}
	return nil
}
