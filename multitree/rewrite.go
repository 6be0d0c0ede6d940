package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/time/rate"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// maxCatchUpRounds bounds the background catch-up of a rewrite.
const maxCatchUpRounds = 8

// rewriteJob is a background snapshot rewrite. Its goroutine writes the
// snapshot of an immutable version, maps it and catches up with the
// versions committed meanwhile (see catchUp); the writer switches to the new
// trees at a later Commit, which catches up with the few versions committed
// since.
type rewriteJob struct {
	version int64
	cancel  context.CancelFunc // stops the job (see dropRewriteLocked)
	done    chan struct{}      // closed when res is set
	res     *rewriteResult
}

// failure returns the job's failure as the error reported for it (wrapping
// ErrRewrite), nil if it has no result yet, succeeded or was only
// cancelled.
func (j *rewriteJob) failure() error {
	if j.res == nil || j.res.err == nil || canceledOnly(j.res.err) {
		return nil
	}
	return fmt.Errorf("%w: snapshot at version %d: %w", ErrRewrite, j.version, j.res.err)
}

// canceledOnly reports whether err is a rewrite's cancellation and nothing
// else: context.Canceled, ErrClosed (a wait of the rewrite, such as on a
// check of a snapshot another goroutine runs, that Close ended), wrapped
// in any number of errors that add only text, or errors joined from the
// rewrite's workers that all are. A worker's failure joined with the other
// workers' cancellation by Close meanwhile is a failure, however deep the
// join is wrapped (a store's name, say); so is an error that wraps a class
// beside the cancellation (ErrCorrupt: damage found as the rewrite
// stopped).
func canceledOnly(err error) bool {
	for err != nil {
		if err == context.Canceled || err == ErrClosed {
			return true
		}
		switch x := err.(type) {
		case interface{ Unwrap() []error }:
			errs := x.Unwrap()
			if len(errs) == 0 {
				return false
			}
			for _, e := range errs {
				if !canceledOnly(e) {
					return false
				}
			}
			return true
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

type rewriteResult struct {
	gen      *generation
	trees    map[string]*memiavl.Tree
	caughtUp int64                       // the version trees are at
	rebasers map[string]*memiavl.Rebaser // nil when the catch-up replays the log
	err      error
}

// maybeStartRewriteLocked starts a background rewrite when SnapshotInterval
// versions have passed since the last snapshot.
func (db *DB) maybeStartRewriteLocked() {
	if db.opts.SnapshotInterval < 0 || db.mu.rewrite != nil || db.mu.closed {
		return
	}
	v := db.mu.version
	if v-db.mu.lastSnap < db.opts.SnapshotInterval {
		return
	}
	copies := make(map[string]*memiavl.Tree, len(db.mu.trees))
	for name, t := range db.mu.trees {
		copies[name] = t.Copy()
		// the keys changed from here on: the rebased trees read the
		// others straight from the new snapshot
		t.StartNextTouches()
	}
	gen := db.mu.gen
	gen.acquire() // the copies read its snapshots
	ctx, cancel := context.WithCancel(db.ctx)
	job := &rewriteJob{version: v, cancel: cancel, done: make(chan struct{})}
	db.mu.rewrite = job
	db.mu.lastSnap = v // a failed rewrite is retried one interval later
	// the log entries after the snapshot start a segment, so that the
	// prune after the switch removes every entry the snapshot holds
	db.log.RollAt(v + 1)
	initial := db.mu.initial
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		defer close(job.done)
		defer cancel()
		res := &rewriteResult{caughtUp: v}
		job.res = res
		maps := map[string]*memiavl.NodeMap{}
		err := db.vetSnapshotDir(v, gen.version, copies)
		var st *stagedSnapshot
		if err == nil {
			st, err = stageSnapshotDir(ctx, db.dir, v, initial, copies, db.opts.RewriteConcurrency, maps, db.rewriteLimiter())
		}
		// the written trees hold every node the live trees have replaced
		// since; they must not stay reachable through the catch-up
		copies = nil
		gen.release()
		if err != nil {
			res.err = err
			return
		}
		// The new snapshot is mapped where it was written, then made
		// durable and current while the catch-up runs: the fsyncs wait
		// on the disk, the catch-up on the processor.
		sdir := filepath.Join(db.dir, snapshotDirName(v))
		if st != nil {
			res.gen, res.trees, res.err = openGenerationAs(st.tmp, sdir, v, 0)
		} else {
			res.gen, res.trees, res.err = openGeneration(db.dir, v)
		}
		if res.err != nil {
			if st != nil {
				st.abandon()
			}
			return
		}
		db.adopt(res.gen)
		// recorded before the directory is installed (listed), so that a
		// version rebuilt from it before the switch shares this mapping
		db.mapGeneration(res.gen)
		installed := make(chan error, 1)
		go func() {
			if h := db.beforeInstall; h != nil {
				h(ctx, v)
			}
			installed <- db.installRewrite(st, v)
		}()
		if h := db.afterWrite; h != nil {
			h(ctx, v)
		}
		res.err = db.catchUp(ctx, res, maps)
		if err := <-installed; err != nil {
			res.err = errors.Join(err, res.err)
		} else if res.err == nil {
			// the versions committed while the install waited on the
			// disk, which grows with the snapshot: not for the
			// switching Commit
			res.err = db.catchUpRounds(ctx, res)
		}
		if res.err != nil && res.gen != nil {
			res.gen.release()
			res.gen = nil
		}
	}()
}

// installRewrite makes a background rewrite's snapshot of version v, staged
// as st (nil if its directory was already in place), durable and current.
func (db *DB) installRewrite(st *stagedSnapshot, v int64) (err error) {
	if st != nil {
		defer func() {
			if err != nil {
				err = errors.Join(err, db.dropUnlessCurrent(v))
			}
		}()
		if err := st.install(); err != nil {
			return err
		}
		// written from checked sources (see checkSnapshotOnce)
		db.markChecked(v)
	}
	// the log must be durable up to the snapshot before current points
	// at it, so that the log continues where it ends, whatever the fsync
	// policy: under SyncNone a power loss could otherwise leave current
	// naming v beside a log that ends before it, which Open repairs by
	// removing the older snapshots SnapshotKeepRecent keeps and emptying
	// the log
	if err := db.log.Sync(); err != nil {
		return err
	}
	return writeFileAtomic(db.dir, currentFileName, encodeCurrent(v))
}

// catchUp brings a rewrite's new trees up to the versions committed while
// it wrote, off the commit path, in rounds (catchUpRounds) that each start
// from the latest committed version. The rounds stop when the gap no
// longer shrinks (commits arrive as fast as a round runs), or after
// maxCatchUpRounds; the rewrite runs more rounds once its snapshot is
// installed, and the switching Commit catches up with the rest.
//
// A round rebases the latest version's trees onto the new snapshot
// (memiavl.Rebaser): the nodes of versions up to the snapshot's become
// references into it and only the nodes created since the previous round
// are copied. When the trees cannot be rebased (a store was added, renamed
// or deleted since the snapshot's version, or a rebase failed, which would
// be a bug), the rounds replay the log instead, which also works.
func (db *DB) catchUp(ctx context.Context, res *rewriteResult, maps map[string]*memiavl.NodeMap) error {
	res.rebasers = newRebasers(res.trees, maps)
	return db.catchUpRounds(ctx, res)
}

// catchUpRounds runs catch-up rounds from res.caughtUp (see catchUp).
func (db *DB) catchUpRounds(ctx context.Context, res *rewriteResult) error {
	prevGap := int64(-1)
	for round := 0; round < maxCatchUpRounds && ctx.Err() == nil; round++ {
		if res.rebasers != nil {
			vw, err := db.View()
			if err != nil {
				return err
			}
			latest := vw.st.version
			gap := latest - res.caughtUp
			if gap <= 0 || (prevGap >= 0 && gap >= prevGap) {
				vw.Release()
				return nil
			}
			trees, err := rebaseAll(ctx, res.rebasers, vw.st.trees, db.opts.RewriteConcurrency)
			vw.Release()
			if err == nil {
				res.trees, res.caughtUp = trees, latest
				prevGap = gap
				db.rebases.Add(1)
				continue
			}
			if ctx.Err() != nil {
				return nil // closing or dropped: the switch never comes
			}
			db.countRebaseFailure(err)
			res.rebasers = nil
		}
		// up to the last committed version: after an Open at an older
		// TargetVersion the log goes on past it, with the versions the
		// caller is about to commit again
		last := min(db.log.LastVersion(), db.Version())
		gap := last - res.caughtUp
		if gap <= 0 || (prevGap >= 0 && gap >= prevGap) {
			return nil
		}
		if err := db.replay(res.trees, res.caughtUp, last); err != nil {
			return err
		}
		res.caughtUp = last
		prevGap = gap
	}
	return nil
}

// errStoresChanged reports that the stores differ from the rewritten ones.
var errStoresChanged = errors.New("multitree: stores changed since the snapshot")

func (db *DB) countRebaseFailure(err error) {
	if errors.Is(err, errStoresChanged) {
		db.rebaseSkips.Add(1)
	} else {
		db.rebaseErrs.Add(1)
	}
}

// newRebasers returns a rebaser per store onto the new trees, or nil if a
// store's write was not mapped.
func newRebasers(trees map[string]*memiavl.Tree, maps map[string]*memiavl.NodeMap) map[string]*memiavl.Rebaser {
	rbs := make(map[string]*memiavl.Rebaser, len(trees))
	for name, t := range trees {
		rb, err := memiavl.NewRebaser(t, maps[name])
		if err != nil {
			return nil
		}
		rbs[name] = rb
	}
	return rbs
}

// rebaseAll rebases every store's tree, stores in parallel; trees must
// hold exactly the rewritten stores.
func rebaseAll(ctx context.Context, rbs map[string]*memiavl.Rebaser, trees map[string]*memiavl.Tree, workers int) (map[string]*memiavl.Tree, error) {
	if len(trees) != len(rbs) {
		return nil, errStoresChanged
	}
	names := make([]string, 0, len(trees))
	for name, t := range trees {
		// a store of the same name may be another tree: deleted and
		// added again, or another store's renamed to it
		if rbs[name] == nil || !rbs[name].Follows(t) {
			return nil, errStoresChanged
		}
		names = append(names, name)
	}
	largestFirst(names, trees)
	rebased := make([]*memiavl.Tree, len(names))
	errs := make([]error, len(names))
	parallel(len(names), workers, func(i int) {
		rebased[i], errs[i] = rbs[names[i]].Rebase(ctx, trees[names[i]])
	})
	out := make(map[string]*memiavl.Tree, len(names))
	for i, name := range names {
		if errs[i] != nil {
			return nil, fmt.Errorf("store %q: %w", name, errs[i])
		}
		out[name] = rebased[i]
	}
	return out, nil
}

// switchIfDoneLocked switches the working trees to a finished rewrite's.
// The pause is the rebase (or, across store upgrades, the replay) of the
// versions committed since the rewrite's catch-up, which does not depend on
// the size of the state.
func (db *DB) switchIfDoneLocked() {
	job := db.mu.rewrite
	if job == nil {
		return
	}
	select {
	case <-job.done:
	default:
		return
	}
	db.mu.rewrite = nil
	res := job.res
	if res.err == nil {
		db.switchGap.Store(db.mu.version - res.caughtUp)
	}
	if res.err == nil && res.rebasers != nil && res.caughtUp < db.mu.version {
		// copies the nodes created since the last catch-up round
		if trees, err := rebaseAll(db.ctx, res.rebasers, db.mu.trees, db.opts.RewriteConcurrency); err == nil {
			res.trees, res.caughtUp = trees, db.mu.version
			db.rebases.Add(1)
		} else if db.ctx.Err() == nil {
			db.countRebaseFailure(err)
		}
	}
	if res.err == nil {
		res.err = db.replay(res.trees, res.caughtUp, db.mu.version)
	}
	if res.err == nil {
		res.err = sameRoots(res.trees, db.mu.trees)
	}
	if res.err != nil {
		if res.gen != nil {
			res.gen.release()
		}
		if err := job.failure(); err != nil {
			db.mu.bgErr = errors.Join(db.mu.bgErr, err)
		}
		return
	}
	old := db.mu.gen
	db.mu.trees, db.mu.gen = res.trees, res.gen
	db.mapGeneration(res.gen)
	old.replaced.Store(true)
	old.release()
	db.startPruneLocked()
}

func sameRoots(a, b map[string]*memiavl.Tree) error {
	if len(a) != len(b) {
		return fmt.Errorf("%w: rewritten snapshot has %d stores, live state %d", ErrCorrupt, len(a), len(b))
	}
	for name, t := range a {
		o, ok := b[name]
		if !ok || t.Version() != o.Version() {
			return fmt.Errorf("%w: store %q differs between rewritten snapshot and live state", ErrCorrupt, name)
		}
		h, err := t.RootHashChecked()
		if err != nil {
			return corruptStore(name, err)
		}
		oh, err := o.RootHashChecked()
		if err != nil {
			return corruptStore(name, err)
		}
		if !bytes.Equal(h, oh) {
			return fmt.Errorf("%w: store %q differs between rewritten snapshot and live state", ErrCorrupt, name)
		}
	}
	return nil
}

// startPruneLocked removes snapshots beyond SnapshotKeepRecent and the log
// entries older than the oldest kept snapshot, in the background. Called
// while a prune runs, it has that prune go again for the current snapshot.
func (db *DB) startPruneLocked() {
	if db.mu.closed {
		return
	}
	if db.mu.pruning {
		db.mu.pruneAgain = true
		return
	}
	db.mu.pruning = true
	cur := db.mu.gen.version
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		for {
			err := db.prune(cur)
			db.mu.Lock()
			if err != nil {
				db.mu.bgErr = errors.Join(db.mu.bgErr, fmt.Errorf("%w: pruning: %w", ErrRewrite, err))
			}
			if !db.mu.pruneAgain || err != nil {
				db.mu.pruning, db.mu.pruneAgain = false, false
				db.mu.Unlock()
				return
			}
			db.mu.pruneAgain = false
			cur = db.mu.gen.version
			db.mu.Unlock()
		}
	}()
}

func (db *DB) prune(cur int64) error {
	if h := db.beforePrune; h != nil {
		if err := h(cur); err != nil {
			return err
		}
	}
	versions, err := listSnapshots(db.dir)
	if err != nil {
		return err
	}
	var older []int64
	for _, v := range versions {
		if v < cur {
			older = append(older, v)
		}
	}
	keep := len(older) - db.opts.SnapshotKeepRecent
	if keep < 0 {
		keep = 0
	}
	remove := removeSnapshotDir
	if db.pruneRemove != nil {
		remove = db.pruneRemove
	}
	// what the database keeps of the removed snapshots goes with them:
	// the record of their checks, and the cached views rebuilt from them
	// (which would keep their files mapped until evicted); a snapshot
	// still under its name after a failed removal stays in use
	var gone []int64
	defer func() { db.forgetSnapshots(gone) }()
	for _, v := range older[:keep] {
		if err := remove(db.dir, v); err != nil {
			if _, serr := os.Lstat(filepath.Join(db.dir, snapshotDirName(v))); errors.Is(serr, fs.ErrNotExist) {
				gone = append(gone, v) // renamed away: its files are going
			}
			return err
		}
		gone = append(gone, v)
	}
	if keep > 0 {
		if err := syncDir(db.dir); err != nil {
			return err
		}
	}
	oldest := cur
	if len(older) > keep {
		oldest = older[keep]
	}
	return db.log.TruncateFront(oldest + 1)
}

// forgetSnapshots drops the checks recorded of the snapshots of versions
// and the cached views rebuilt from them, once the prune removes them.
func (db *DB) forgetSnapshots(versions []int64) {
	if len(versions) == 0 {
		return
	}
	db.snapsChecked.Lock()
	for id := range db.snapsChecked.m {
		if slices.Contains(versions, id.version) {
			delete(db.snapsChecked.m, id)
		}
	}
	db.snapsChecked.Unlock()
	db.views.Lock()
	defer db.views.Unlock()
	db.views.pruned = max(db.views.pruned, slices.Max(versions))
	db.views.prunedAny = true
	db.dropViewsLocked(func(_ int64, st *state) bool { return slices.Contains(versions, st.gen.version) })
}

// writeSnapshotDir writes the saved version of trees as snapshot directory
// version in dir, trees in parallel, and makes it durable. With maps set,
// the writes are mapped (memiavl.Tree.WriteSnapshotMapped) and maps receives
// each store's map; at most one mapped write may run at a time.
//
// A non-nil limiter paces the writes of all the trees together.
func writeSnapshotDir(ctx context.Context, dir string, version, initial int64, trees map[string]*memiavl.Tree, concurrency int, maps map[string]*memiavl.NodeMap, limiter snapshot.Limiter) error {
	st, err := stageSnapshotDir(ctx, dir, version, initial, trees, concurrency, maps, limiter)
	if err != nil || st == nil {
		return err
	}
	return st.install()
}

// stagedSnapshot is a snapshot directory written under its temporary name
// and not yet durable: install makes it durable and renames it into place,
// abandon removes it.
type stagedSnapshot struct {
	dir, tmp, final string
	syncs           *snapshot.SyncGroup
}

// stageSnapshotDir writes the snapshot directory as writeSnapshotDir does,
// up to its fsyncs and its rename: the files are complete in the page cache
// under st.tmp, and the caller must install or abandon st. It returns a nil
// st if the snapshot directory already exists.
func stageSnapshotDir(ctx context.Context, dir string, version, initial int64, trees map[string]*memiavl.Tree, concurrency int, maps map[string]*memiavl.NodeMap, limiter snapshot.Limiter) (_ *stagedSnapshot, err error) {
	final := filepath.Join(dir, snapshotDirName(version))
	if _, err := os.Stat(final); err == nil {
		return nil, nil // already written
	}
	meta := metadata{Version: version, InitialVersion: initial}
	names := make([]string, 0, len(trees))
	for name, t := range trees {
		if t.Version() != version {
			return nil, fmt.Errorf("%w: store %q is at version %d, snapshot %d", ErrCorrupt, name, t.Version(), version)
		}
		h, err := t.RootHashChecked()
		if err != nil {
			return nil, corruptStore(name, err)
		}
		meta.Stores = append(meta.Stores, storeInfo{Name: name, Hash: h})
		names = append(names, name)
	}
	largestFirst(names, trees)
	split := splitStore(names, trees, concurrency)
	// created once the trees are known to be writable, so that a refusal
	// above leaves nothing behind
	tmp := final + tmpSuffix
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	// Nothing under tmp is in reach until the rename of install, so the
	// stores' fsyncs wait and then run together (see snapshot.SyncGroup).
	st := &stagedSnapshot{dir: dir, tmp: tmp, final: final, syncs: &snapshot.SyncGroup{}}
	defer func() {
		if err != nil {
			st.abandon()
		}
	}()
	nodeMaps := make([]*memiavl.NodeMap, len(names))
	errs := make([]error, len(names))
	parallelTasks(len(names), concurrency, func(i int, spawn func(func())) {
		t, tdir := trees[names[i]], filepath.Join(tmp, treeDirName(names[i]))
		opts := []memiavl.WriteOption{memiavl.WithLimiter(limiter), memiavl.WithSyncGroup(st.syncs)}
		if names[i] == split {
			opts = append(opts, memiavl.WithSplitRunner(spawn))
		}
		if maps != nil {
			nodeMaps[i], errs[i] = t.WriteSnapshotMapped(ctx, tdir, opts...)
		} else {
			errs[i] = t.WriteSnapshot(ctx, tdir, opts...)
		}
		if errs[i] != nil {
			errs[i] = corruptStore(names[i], errs[i])
		}
	})
	if maps != nil {
		for i, name := range names {
			if errs[i] == nil {
				maps[name] = nodeMaps[i]
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := writeSyncedLater(st.syncs, filepath.Join(tmp, metadataFileName), meta.encode()); err != nil {
		return nil, err
	}
	if err := st.syncs.AddDir(tmp); err != nil {
		return nil, err
	}
	return st, nil
}

// install makes the staged snapshot durable, renames it into place and
// makes the rename durable. After a failure it removes the staged files.
func (st *stagedSnapshot) install() error {
	if err := st.syncs.Sync(); err != nil {
		st.abandon()
		return err
	}
	if err := os.Rename(st.tmp, st.final); err != nil {
		st.abandon()
		return err
	}
	return syncDir(st.dir)
}

// abandon closes the staged snapshot's files and removes them.
func (st *stagedSnapshot) abandon() {
	_ = st.syncs.Close() // after Sync: nothing to close
	_ = os.RemoveAll(st.tmp)
}

// RewriteSnapshot synchronously writes a snapshot of the last committed
// version and switches the working trees to it. It is meant for offline
// use; a background rewrite in progress is waited for first (or until ctx
// ends). It may be called beside Commit on another goroutine. It refuses
// with ErrUncommitted while the working version has changes. When the
// current snapshot already holds the last committed version nothing is
// written. Either way, snapshots older than the current one beyond
// SnapshotKeepRecent, and the log entries only they needed, are then
// pruned in the background, as after a background rewrite: removing files
// can take longer than writing them (on a file system that discards freed
// blocks at once), and nothing waits on it.
// Close waits for the pruning and returns its failure if no Commit has
// reported it. A checksum mismatch in the files of the current snapshot
// that the write copies from fails it with ErrCorrupt (see
// memiavl.Tree.WriteSnapshot); VerifySnapshot checks more.
func (db *DB) RewriteSnapshot(ctx context.Context) (err error) {
	defer func() { err = asCorrupt(err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	// The background rewrite is waited for without the lock: a Commit on
	// another goroutine may then switch to it and start the next one, or
	// change the working version, so both are checked again after each
	// wait. The write below must not run beside a background rewrite,
	// which stages and installs its snapshot in the same places.
	for {
		if p := db.mu.pending; len(p.ChangeSets) > 0 || !noUpgrades(p.Upgrades) {
			return fmt.Errorf("%w: commit the working version's changes before rewriting the snapshot", ErrUncommitted)
		}
		// a finished rewrite is switched to only here, with no changes
		// pending, as Commit does after saving the version: the
		// switch compares the rewritten trees with the working ones
		db.switchIfDoneLocked()
		job := db.mu.rewrite
		if job == nil {
			break
		}
		db.mu.Unlock()
		if h := db.rewriteWait; h != nil {
			h()
		}
		select {
		case <-job.done:
		case <-ctx.Done():
		}
		db.mu.Lock()
		if err := db.writable(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	v := db.mu.version
	if db.mu.gen.version == v {
		// nothing to write: the current snapshot holds v; older
		// snapshots beyond SnapshotKeepRecent still go, as after a write
		if st := db.state.Load(); st != nil && st.gen != db.mu.gen {
			// a background rewrite was switched to above: readers
			// move to it now, not at the next commit, so that the
			// old snapshot can be unmapped and pruned
			db.publishLocked()
		}
		db.startPruneLocked()
		return nil
	}
	// durable whatever the fsync policy: current is to name v, and the
	// log must continue where v's snapshot ends (see installRewrite)
	if err := db.log.Sync(); err != nil {
		return err
	}
	db.log.RollAt(v + 1)
	if err := db.snapshotNowLocked(ctx, v, nil); err != nil {
		return fmt.Errorf("snapshot at version %d: %w", v, err)
	}
	db.publishLocked()
	db.startPruneLocked()
	// the log segment holding v goes with the prune after the next commit
	db.mu.pruneAt = v + 1
	return nil
}

// snapshotNowLocked writes a snapshot of the working trees, saved at
// version v, synchronously, makes it current, runs then (if not nil) and
// switches the working trees to the snapshot.
func (db *DB) snapshotNowLocked(ctx context.Context, v int64, then func() error) error {
	if err := db.vetSnapshotDir(v, db.mu.gen.version, db.mu.trees); err != nil {
		return err
	}
	// nil if the directory was in place (written by an earlier session
	// and vetted above): not this call's to remove
	st, err := stageSnapshotDir(ctx, db.dir, v, db.mu.initial, db.mu.trees, db.opts.RewriteConcurrency, nil, nil)
	if err != nil {
		return err
	}
	if st != nil {
		if err := st.install(); err != nil {
			// the directory may be in place already (the fsync of its
			// parent after the rename failed): as after a failed
			// background install, nothing would use or prune it
			return errors.Join(err, db.dropUnlessCurrent(v))
		}
	}
	db.markChecked(v) // written from checked sources (see checkSnapshotOnce)
	if err := writeFileAtomic(db.dir, currentFileName, encodeCurrent(v)); err != nil {
		if st != nil {
			err = errors.Join(err, db.dropUnlessCurrent(v))
		}
		return err
	}
	if then != nil {
		if err := then(); err != nil {
			return err
		}
	}
	gen, trees, err := openGeneration(db.dir, v)
	if err != nil {
		return err
	}
	db.adopt(gen)
	old := db.mu.gen
	db.mu.trees, db.mu.gen = trees, gen
	db.mapGeneration(gen)
	db.mu.lastSnap = v
	old.release()
	return nil
}

// vetSnapshotDir decides whether a snapshot directory of version v that a
// rewrite finds in place, written by an earlier session (a database opened
// at an older TargetVersion without Rollback, committing the same versions
// again), stands for trees, which the rewrite would write: its checksums
// are checked (as checkSnapshotOnce checks a kept snapshot, unless
// OpenCheckNone) and its root hashes compared with the trees'. A directory
// that fails is removed, after current, if it names v, is pointed at base
// (the snapshot the trees read from, which the log continues), so that the
// rewrite writes it anew; nothing was using it (a rebuild that mapped it
// keeps its mapping). Errors other than damage are returned.
func (db *DB) vetSnapshotDir(v, base int64, trees map[string]*memiavl.Tree) error {
	if _, err := os.Stat(filepath.Join(db.dir, snapshotDirName(v))); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for name, t := range trees {
		// the trees' own damage is theirs, not the directory's (below,
		// sameRoots reads their hashes as computed here)
		if _, err := t.RootHashChecked(); err != nil {
			return corruptStore(name, err)
		}
	}
	gen, got, err := openGeneration(db.dir, v)
	if err == nil {
		err = db.checkSnapshotOnce(gen, v)
		if err == nil {
			err = sameRoots(got, trees)
		}
		gen.release()
	}
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return err
	}
	if cur, err := readCurrent(db.dir); err != nil {
		return err
	} else if cur == v {
		if err := writeFileAtomic(db.dir, currentFileName, encodeCurrent(base)); err != nil {
			return err
		}
	}
	return db.dropSnapshotDir(v)
}

// dropUnlessCurrent removes the snapshot directory of version v, which a
// rewrite that then failed put in place, unless current names it: nothing
// would use it, and no prune would remove it (the prune removes only
// snapshots older than the current one), so a failure that lasts would
// leave a copy of the state per attempt. When current cannot be read, the
// directory stays.
func (db *DB) dropUnlessCurrent(v int64) error {
	if cur, err := readCurrent(db.dir); err != nil || cur == v {
		return nil
	}
	return db.dropSnapshotDir(v)
}

// dropSnapshotDir removes the snapshot directory of version v and forgets
// its check: a directory written anew may reuse the inode number, and with
// it the identity of the check's result.
func (db *DB) dropSnapshotDir(v int64) error {
	if id, ok := db.snapshotIDOf(v); ok {
		db.snapsChecked.Lock()
		delete(db.snapsChecked.m, id)
		db.snapsChecked.Unlock()
	}
	return removeSnapshotDir(db.dir, v)
}

// rewriteBurst is the most a paced rewrite writes at once: the buffer of
// a snapshot file, which goes out in one write.
const rewriteBurst = 256 << 10

// rewriteLimiter returns the limiter a background rewrite's trees share,
// nil when RewriteRateLimit is 0.
func (db *DB) rewriteLimiter() snapshot.Limiter {
	if db.opts.RewriteRateLimit == 0 {
		return nil
	}
	var l snapshot.Limiter = newPaceLimiter(db.opts.RewriteRateLimit)
	if db.wrapLimiter != nil {
		l = db.wrapLimiter(l)
	}
	return l
}

// newPaceLimiter returns a limiter of bytesPerSec for background file I/O.
func newPaceLimiter(bytesPerSec int64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(bytesPerSec), rewriteBurst)
}

// writeSyncedLater writes data to a new file at path and hands it to g,
// which syncs and closes it.
func writeSyncedLater(g *snapshot.SyncGroup, path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return g.Add(f)
}
