package multitree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// maxCatchUpRounds bounds the background catch-up of a rewrite.
const maxCatchUpRounds = 8

// rewriteJob is a background snapshot rewrite. Its goroutine writes the
// snapshot of an immutable version, maps it, and replays the log entries
// committed meanwhile onto the new trees; the writer switches to them at a
// later Commit, replaying only the few entries logged since.
type rewriteJob struct {
	version int64
	done    chan struct{} // closed when res is set
	res     *rewriteResult
}

type rewriteResult struct {
	gen      *generation
	trees    map[string]*memiavl.Tree
	caughtUp int64 // the version trees are at
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
	}
	gen := db.mu.gen
	gen.acquire() // the copies read its snapshots
	job := &rewriteJob{version: v, done: make(chan struct{})}
	db.mu.rewrite = job
	db.mu.lastSnap = v // a failed rewrite is retried one interval later
	initial := db.mu.initial
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		defer close(job.done)
		res := &rewriteResult{caughtUp: v}
		job.res = res
		res.err = writeSnapshotDir(db.ctx, db.dir, v, initial, copies, db.opts.RewriteConcurrency)
		gen.release()
		if res.err == nil {
			// the log must be durable up to the snapshot before current
			// points at it, so that the log continues where it ends
			res.err = db.log.Flush()
		}
		if res.err == nil {
			res.err = writeFileAtomic(db.dir, currentFileName, encodeCurrent(v))
		}
		if res.err == nil {
			res.gen, res.trees, res.err = openGeneration(db.dir, v)
		}
		// Catch up with the versions committed while writing, off the
		// commit path, in rounds: each replays what was logged by its
		// start. The rounds stop when the gap no longer shrinks (commits
		// arrive as fast as they replay) or after maxCatchUpRounds; the
		// switching Commit replays the rest, the versions logged during
		// the last round.
		prevGap := int64(-1)
		for round := 0; res.err == nil && round < maxCatchUpRounds; round++ {
			last := db.log.LastVersion()
			gap := last - res.caughtUp
			if gap <= 0 || db.ctx.Err() != nil || (prevGap >= 0 && gap >= prevGap) {
				break
			}
			res.err = db.replay(res.trees, res.caughtUp, last)
			res.caughtUp = last
			prevGap = gap
		}
		if res.err != nil && res.gen != nil {
			res.gen.release()
			res.gen = nil
		}
	}()
}

// switchIfDoneLocked switches the working trees to a finished rewrite's.
// The pause is the replay of the versions committed since the rewrite's
// catch-up, which does not depend on the size of the state.
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
		res.err = db.replay(res.trees, res.caughtUp, db.mu.version)
	}
	if res.err == nil {
		res.err = sameRoots(res.trees, db.mu.trees)
	}
	if res.err != nil {
		if res.gen != nil {
			res.gen.release()
		}
		if !errors.Is(res.err, context.Canceled) {
			db.mu.bgErr = fmt.Errorf("%w: snapshot at version %d: %w", ErrRewrite, job.version, res.err)
		}
		return
	}
	old := db.mu.gen
	db.mu.trees, db.mu.gen = res.trees, res.gen
	old.release()
	db.startPruneLocked()
}

func sameRoots(a, b map[string]*memiavl.Tree) error {
	if len(a) != len(b) {
		return fmt.Errorf("%w: rewritten snapshot has %d stores, live state %d", ErrCorrupt, len(a), len(b))
	}
	for name, t := range a {
		o, ok := b[name]
		if !ok || t.Version() != o.Version() || string(t.RootHash()) != string(o.RootHash()) {
			return fmt.Errorf("%w: store %q differs between rewritten snapshot and live state", ErrCorrupt, name)
		}
	}
	return nil
}

// startPruneLocked removes snapshots beyond SnapshotKeepRecent and the log
// entries older than the oldest kept snapshot, in the background.
func (db *DB) startPruneLocked() {
	if db.mu.pruning || db.mu.closed {
		return
	}
	db.mu.pruning = true
	cur := db.mu.gen.version
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		err := db.prune(cur)
		db.mu.Lock()
		db.mu.pruning = false
		if err != nil && db.mu.bgErr == nil {
			db.mu.bgErr = fmt.Errorf("%w: pruning: %w", ErrRewrite, err)
		}
		db.mu.Unlock()
	}()
}

func (db *DB) prune(cur int64) error {
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
	for _, v := range older[:keep] {
		if err := os.RemoveAll(filepath.Join(db.dir, snapshotDirName(v))); err != nil {
			return err
		}
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

// writeSnapshotDir writes the saved version of trees as snapshot directory
// version in dir, trees in parallel, and makes it durable.
func writeSnapshotDir(ctx context.Context, dir string, version, initial int64, trees map[string]*memiavl.Tree, concurrency int) error {
	final := filepath.Join(dir, snapshotDirName(version))
	if _, err := os.Stat(final); err == nil {
		return nil // already written
	}
	tmp := final + tmpSuffix
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	meta := metadata{Version: version, InitialVersion: initial}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, max(1, concurrency))
	)
	for name, t := range trees {
		if t.Version() != version {
			return fmt.Errorf("%w: store %q is at version %d, snapshot %d", ErrCorrupt, name, t.Version(), version)
		}
		meta.Stores = append(meta.Stores, storeInfo{Name: name, Hash: t.RootHash()})
		wg.Add(1)
		sem <- struct{}{}
		go func(name string, t *memiavl.Tree) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := t.WriteSnapshot(ctx, filepath.Join(tmp, treeDirName(name))); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("store %q: %w", name, err))
				mu.Unlock()
			}
		}(name, t)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := writeFileAtomic(tmp, metadataFileName, meta.encode()); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncDir(dir)
}

// RewriteSnapshot synchronously writes a snapshot of the last committed
// version, switches the working trees to it and prunes old snapshots. It is
// meant for offline use; a background rewrite in progress is waited for
// first. It refuses with ErrUncommitted while the working version has
// changes.
func (db *DB) RewriteSnapshot(ctx context.Context) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if p := db.mu.pending; len(p.ChangeSets) > 0 || len(p.Upgrades.Added)+len(p.Upgrades.Renamed)+len(p.Upgrades.Deleted) > 0 {
		return fmt.Errorf("%w: commit the working version's changes before rewriting the snapshot", ErrUncommitted)
	}
	if job := db.mu.rewrite; job != nil {
		db.mu.Unlock()
		<-job.done
		db.mu.Lock()
		db.switchIfDoneLocked()
		if db.mu.closed {
			return ErrClosed
		}
	}
	v := db.mu.version
	if db.mu.gen.version == v {
		return nil
	}
	if err := db.log.Flush(); err != nil {
		return err
	}
	if err := writeSnapshotDir(ctx, db.dir, v, db.mu.initial, db.mu.trees, db.opts.RewriteConcurrency); err != nil {
		return err
	}
	if err := writeFileAtomic(db.dir, currentFileName, encodeCurrent(v)); err != nil {
		return err
	}
	gen, trees, err := openGeneration(db.dir, v)
	if err != nil {
		return err
	}
	old := db.mu.gen
	db.mu.trees, db.mu.gen = trees, gen
	db.mu.lastSnap = v
	old.release()
	db.publishLocked()
	db.mu.Unlock()
	err = db.prune(v)
	db.mu.Lock()
	return err
}
