package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	storetypes "cosmossdk.io/store/types"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// DB is a database of named IAVL trees, one per module store.
//
// Writes (Set, Delete, ApplyChangeSets, ApplyUpgrades, Commit,
// RewriteSnapshot, Close) are serialized by the DB and meant to come from
// one goroutine; called from several, each is still whole, in some order
// (a Commit commits whatever changes were applied before it). Reads of
// committed state go through View and ViewAt, which take no lock that
// Commit holds and may run on any number of goroutines.
type DB struct {
	dir  string
	opts Options
	lock *os.File // the importer's when opts.importLock is set
	log  *wal.Log

	// state is the last committed version, published for readers.
	state atomic.Pointer[state]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background rewrite and prune goroutines
	// closeDone is closed when the first Close has finished: a
	// concurrent second Close waits for it, so that its return means
	// the lock is released
	closeDone chan struct{}

	// unmapper runs the unmapping of released generations in the
	// background until Close, which waits for it (see unmapLater).
	unmapper struct {
		sync.Mutex
		closed bool
		wg     sync.WaitGroup
	}
	unmapHook func() // tests: runs before each background unmapping

	// mapped holds the generations of the database's own snapshot
	// directories that it maps (the working state's; the versions
	// rebuilt for views), by version, so that a version rebuilt from a
	// snapshot mapped already shares that mapping (sharedGeneration)
	// instead of mapping the files again: a store's snapshot is up to 5
	// memory maps, and a process may have only so many
	// (vm.max_map_count). An entry may be a released generation, which
	// tryAcquire refuses and the next mapGeneration removes.
	mapped struct {
		sync.Mutex
		m map[int64]*generation
	}

	// mu serializes the writer. Lock order: mu, then views.mu.
	mu struct {
		sync.Mutex
		closed  bool
		trees   map[string]*memiavl.Tree // working trees
		gen     *generation              // snapshots under trees; the DB holds one reference
		version int64                    // last committed version
		initial int64                    // initial version
		first   int64                    // what the "first" file records (0: none)
		info    *storetypes.CommitInfo   // of version
		pending wal.Entry                // changes of the working version
		// rewrites indexes, for each store a Set rewrote a key of (see
		// coalescePendingLocked), the last pending pair of each key of
		// the store; nil until then
		rewrites map[string]map[string]pairRef
		// origins maps the stores after the working version's upgrades
		// so far to the stores at its start whose pairs they hold ("" for
		// a new store), and start the stores at its start to themselves;
		// both nil before its first upgrade (ApplyUpgrades)
		origins, start map[string]string
		touched        map[string]bool // stores changed in the working version
		rewrite        *rewriteJob     // running background rewrite
		pruning        bool
		// pruneAgain has the running prune go again, for a snapshot
		// switched to while it ran
		pruneAgain bool
		// pruneAt, when set, is the version whose record starts a log
		// segment after the current snapshot (RollAt) and has not been
		// written yet; once it is, the segment before it holds only
		// entries the snapshot has, and a prune can remove it
		pruneAt int64
		bgErr   error // failure of a background job, reported by the next Commit or by Close
		// broken is set when a change failed inside a tree (a corrupt
		// snapshot), or a commit saved the trees but could not log the
		// version: the working trees may then hold part of a change, or
		// be a version ahead of the log, so no further change or commit
		// is accepted.
		broken   error
		lastSnap int64 // version of the newest snapshot written or being written
	}

	// maxLogged is the largest encoded log entry a Commit appends; a larger
	// version is committed by a snapshot (snapshotCommitLocked), counted
	// in snapshotCommits.
	maxLogged       int
	snapshotCommits atomic.Int64

	// rebases counts the catch-up rounds and switches of background
	// rewrites that rebased; rebaseSkips those that could not because the
	// stores changed, and rebaseErrs rebases that failed; after either the
	// rewrite replays the log instead (see catchUp).
	rebases, rebaseSkips, rebaseErrs atomic.Int64
	// switchGap is how many versions the last switch to a rewrite's
	// trees caught up itself, on the commit path.
	switchGap atomic.Int64
	// beforeInstall, when set (by tests), runs in a background rewrite
	// before it makes its snapshot durable and current.
	beforeInstall func(ctx context.Context, version int64)
	// afterWrite, when set (by tests), runs in a background rewrite after
	// its snapshot is written and mapped, before the catch-up.
	afterWrite func(ctx context.Context, version int64)
	// afterRebuild, when set (by tests), runs in ViewAt after it rebuilt
	// a version, before it caches it.
	afterRebuild func(version int64)
	// rewriteWait, when set (by tests), runs in RewriteSnapshot each time
	// it begins to wait for a background rewrite, without the lock.
	rewriteWait func()
	// beforePrune, when set (by tests), runs at the start of each prune;
	// an error fails the prune.
	beforePrune func(cur int64) error
	// pruneRemove, when set (by tests), removes a snapshot directory in
	// the prune instead of removeSnapshotDir.
	pruneRemove func(dir string, v int64) error
	// wrapLimiter, when set (by tests), wraps the limiter of each paced
	// background rewrite.
	wrapLimiter func(snapshot.Limiter) snapshot.Limiter
	// checked is closed when the background check that Open started
	// (OpenCheckBackground) ends, checkErr set before; nil without one.
	checked  chan struct{}
	checkErr error
	// rollbackTo is the target of an unfinished rollback that a read-only
	// Open stopped at (Options.Rollback), 0 if none
	rollbackTo int64
	// rollbacks is the count of rollbacks begun in the database when a
	// read-only Open started (see the "rollbacks" file in format.go)
	rollbacks uint64

	// checked holds the snapshots whose checksums were checked, or are
	// checked by the open's check: a rebuild of an older version from one
	// of the others checks it first (see checkSnapshotOnce)
	snapsChecked struct {
		sync.Mutex
		m map[snapshotID]*snapshotCheck
	}

	views struct {
		sync.Mutex
		cache  map[int64]*state
		order  []int64 // least recently used first
		closed bool    // set by releaseAll: cache nothing more
		// floor is the version of the last snapshot commit: ViewAt
		// refuses the versions before it (see dropViewsBefore)
		floor int64
		// pruned is the newest snapshot version a prune removed: a
		// view rebuilt from it (or an older one) while it was removed
		// is handed out but not cached (see forgetSnapshots); valid
		// once prunedAny is set
		pruned    int64
		prunedAny bool
		// dirTime, in a read-only database, is the modification time
		// of dir when sweepPrunedViews last listed it (zero: list it
		// next time)
		dirTime time.Time
		// rebuilding has each version a ViewAt is rebuilding: other
		// callers of that version wait for it instead of rebuilding it
		rebuilding map[int64]*rebuildCall
		// slots bounds the rebuilds running at once (maxRebuilds)
		slots chan struct{}
	}
}

// state is a committed version as readers see it. Its trees are never
// mutated; it holds one reference on gen.
type state struct {
	version int64
	info    *storetypes.CommitInfo
	trees   map[string]*memiavl.Tree
	gen     *generation
}

// Open opens (or, with CreateIfMissing, creates) the database in dir.
//
// A read-only open runs beside the writer, which may switch to a new
// snapshot and prune the old one, and the log before the new one, while
// the open reads them: it starts again as retryBesideWriter says, and
// returns ErrBusy if the writer changed the directory under every attempt.
// It also starts again when an import's swap (ImportOptions.Replace)
// replaced dir while it read, so that it serves one database, the old or
// the new, never parts of both.
func Open(dir string, opts Options) (_ *DB, err error) {
	defer func() { err = asCorrupt(err) }()
	if err := checkDirPath(dir); err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		return open(dir, opts)
	}
	// an import interrupted while it swapped in a database leaves it
	// beside dir until a writable open finishes the swap
	return retryBesideWriter(dir, func() (*DB, error) {
		return sameDirAcross(swapSource(dir), func(src string) (*DB, error) { return open(src, opts) }, func(db *DB) { _ = db.Close() })
	})
}

// checkDirPath refuses an empty directory path, which some calls would
// resolve in the working directory and others not at all.
func checkDirPath(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: empty directory path", ErrInvalidOptions)
	}
	return nil
}

// afterReadCurrent, when set, is called by open once it has read the
// current snapshot's version, and beforeOpenLog once it has mapped the
// snapshot, before it opens the log. Tests use them to move a writer on
// meanwhile.
var (
	afterReadCurrent func(dir string, current int64)
	beforeOpenLog    func(dir string)
	// duringRollback, after the file recording a rollback is written:
	// an error fails Open there, as a crash would stop it
	duringRollback func(db *DB, cut int64) error
	// beforeCreateLock, when an open that may create the database found
	// none, before it takes the lock
	beforeCreateLock func(dir string)
)

func open(dir string, opts Options) (_ *DB, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// before anything is created in it, a lock file included
	if err := referenceLayout(dir); err != nil {
		return nil, err
	}
	db := &DB{dir: dir, opts: opts, maxLogged: wal.MaxEntrySize, closeDone: make(chan struct{})}
	db.ctx, db.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			db.cancel()
			if db.log != nil {
				if tt, ok := db.log.TornTail(); ok && !opts.ReadOnly {
					// cut already: the next open finds no torn tail
					// to report
					err = fmt.Errorf("%w (this open cut a torn tail off the log first: %d bytes at offset %d of %s)", err, tt.Bytes, tt.Offset, tt.Path)
				}
				_ = db.log.Close()
			}
			db.releaseAll()
			db.stopUnmapper()
			if opts.importLock == nil {
				_ = unlockDir(db.lock)
			}
		}
	}()

	if opts.importLock != nil {
		db.lock = opts.importLock // (finishOptions: a writer)
	} else if !opts.ReadOnly {
		// an import interrupted while it swapped in a database
		if err := finishSwap(dir); err != nil {
			return nil, err
		}
	}
	exists, err := hasDatabase(dir)
	if err != nil {
		return nil, err
	}
	if exists && opts.importLock == nil {
		if err := refuseUnfinished(dir); err != nil {
			return nil, err
		}
	}
	if !exists {
		if !opts.CreateIfMissing {
			if err := refuseOrphaned(dir); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s", ErrNotFound, dir)
		}
		// refused before anything is written: a database created and
		// left behind by a failed open would be one nobody asked for
		if opts.TargetVersion > 0 {
			return nil, fmt.Errorf("%w: TargetVersion %d of a database not created yet", ErrVersion, opts.TargetVersion)
		}
		if err := mkdirDurable(dir); err != nil {
			return nil, err
		}
		if h := beforeCreateLock; h != nil {
			h(dir)
		}
		if db.lock, err = lockDir(dir); err != nil {
			return nil, err
		}
		// again under the lock: a writer or an import that held it
		// may have made the database meanwhile
		if exists, err = hasDatabase(dir); err != nil {
			return nil, err
		}
		if !exists {
			// under the lock, which an import at work holds
			if err := refuseOrphaned(dir); err != nil {
				return nil, err
			}
			// a log directory of other files is not this database's to
			// write segments into (nor, later, to remove with it)
			if foreignLogDir(dir) {
				return nil, fmt.Errorf("%w: %s holds no database, and its %s is not a log (it holds other files): a database is created where that directory is missing or holds only log segments",
					ErrExists, dir, walDirName)
			}
			// what an interrupted create, import or removal left (a
			// removal's log may still hold entries, the marker says
			// whose they are)
			if err := removeImportLeftovers(dir); err != nil {
				return nil, err
			}
			if err := db.create(); err != nil {
				return nil, err
			}
		}
	}
	if exists && !opts.ReadOnly {
		if db.lock == nil {
			if db.lock, err = lockDir(dir); err != nil {
				return nil, err
			}
		}
		// A killed writer's renames (current, a snapshot, the rollback
		// file) may not be durable yet: this writer acts on what it
		// reads (it removes the snapshots current no longer names), so
		// what it reads is made durable first.
		if err := syncDir(dir); err != nil {
			return nil, err
		}
		if opts.importLock == nil {
			// the marker of an import stopped after it wrote current
			if err := removeImportMarker(dir); err != nil {
				return nil, err
			}
			// what an interrupted import that was to replace this
			// database staged beside it (an import at work there holds
			// the lock on dir, which this writer now has); best effort,
			// as the import that next replaces the database removes it
			// too
			_ = removeStaging(besidePath(dir, stagingSuffix))
		}
	}

	if opts.ReadOnly {
		// read first: a rollback counts itself before it changes
		// anything, so an unchanged count at the end means that what
		// was read is the database's history
		if db.rollbacks, err = readRollbacks(dir); err != nil {
			return nil, err
		}
	}
	current, err := readCurrent(dir)
	if err != nil {
		return nil, err
	}
	if h := afterReadCurrent; h != nil {
		h(dir, current)
	}
	if !opts.ReadOnly {
		if _, err := readRollbacks(dir); errors.Is(err, ErrCorrupt) {
			// the readers beside fail on it until it is replaced
			if err := repairRollbacks(dir); err != nil {
				return nil, err
			}
		}
	}
	// an unfinished rollback: its target is the latest version
	pending, err := readRollback(dir)
	if err != nil {
		return nil, err
	}
	if pending > 0 && opts.TargetVersion > pending {
		// refused before anything is read or changed (a stale record
		// names a version at or after the latest, so the target would
		// be refused all the same)
		return nil, fmt.Errorf("%w: target %d is newer than %d, the target of the rollback that %s records", ErrVersion, opts.TargetVersion, pending, filepath.Join(dir, rollbackFileName))
	}
	at := opts.TargetVersion
	if at == 0 {
		at = pending
	}
	base := current
	if at > 0 && at < current {
		// an older kept snapshot at or below the target
		versions, err := listSnapshots(dir)
		if err != nil {
			return nil, err
		}
		base = -1
		for _, v := range versions {
			if v <= at {
				base = v
			}
		}
		if base < 0 {
			return nil, notKept(dir, at)
		}
	}
	gen, trees, err := openGeneration(dir, base)
	if err != nil {
		return nil, err
	}
	db.mu.gen, db.mu.trees = db.adopt(gen), trees
	db.mapGeneration(gen)
	if !opts.ReadOnly {
		// The snapshots newer than current are an interrupted rewrite's
		// and are removed, but only once current's snapshot opens: were
		// current damaged or stale (restored from a backup, or copied
		// from another database), the newest of them could be the only
		// whole state left. An open at an older snapshot (a
		// TargetVersion, a rollback past a damaged current snapshot) does
		// not need current's and leaves the newer ones for a later open.
		currentOpens := true
		if base != current {
			g, _, err := openGeneration(dir, current)
			if err == nil {
				g.release()
			}
			currentOpens = err == nil
		}
		if currentOpens {
			if err := removeLeftovers(dir, current); err != nil {
				return nil, err
			}
		}
	}
	// the background check of the snapshot's checksums, started once the
	// database is open (it holds a reference on gen while it runs)
	var checkGen *generation
	var checkPace snapshot.Limiter
	if opts.OpenCheck != OpenCheckNone {
		db.markChecked(base)
		if opts.OpenCheck == OpenCheckSync {
			if err := gen.checkChecksums(context.Background(), nil); err != nil {
				return nil, err
			}
		} else {
			checkGen = gen
			if opts.RewriteRateLimit > 0 {
				// paced like a background rewrite: it reads as much
				checkPace = newPaceLimiter(opts.RewriteRateLimit)
			}
		}
	}
	db.mu.version = base
	db.mu.initial = gen.meta.InitialVersion
	db.mu.lastSnap = current

	if h := beforeOpenLog; h != nil {
		h(dir)
	}
	// every database has the log's directory from its creation on (see
	// create and Importer.Commit): without it the versions after the
	// snapshot are lost, which an open would hide by starting a new log
	if err := checkLogDir(dir); err != nil {
		return nil, err
	}
	db.log, err = wal.Open(filepath.Join(dir, walDirName), wal.Options{
		Sync:        opts.Sync,
		AsyncBuffer: opts.AsyncCommitBuffer,
		SegmentSize: opts.WALSegmentSize,
		ReadOnly:    opts.ReadOnly,
		// an unfinished rollback's cut of the log may have left damage
		// after its target's record (a power loss inside TruncateBack)
		Discarding: pending,
	})
	if errors.Is(err, wal.ErrInvalidOptions) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err != nil {
		return nil, err
	}
	last := db.log.LastVersion()
	// read after the log: the first commit writes it before its entry
	if db.mu.first, err = readFirst(dir); err != nil {
		return nil, err
	}
	if base == 0 {
		// snapshot 0 records the initial version of the database's
		// creation; SetInitialVersion may have changed it before the
		// first commit, which the log starts with (a later snapshot
		// records it, and Verify checks the log against it)
		first := db.log.FirstVersion()
		if rec := db.mu.first; first != 0 && rec != 0 && first != rec {
			if opts.ReadOnly {
				// a writer's prune beside cut the log after it
				// removed snapshot 0: a read to start again
				if err := checkBaseKept(dir, base); err != nil {
					return nil, err
				}
			}
			return nil, firstSegmentMissing(dir, first, rec)
		}
		if first > 1 || (first == 1 && db.mu.initial > 1) {
			// (lowered to 1, or to 0, which numbers the same)
			db.mu.initial = first
		}
	}
	if !opts.ReadOnly && !opts.Rollback && pending == 0 && base < current && last < current {
		// The log ends before the current snapshot (see below), and the
		// writer asked for an older version without a rollback: the
		// versions it would commit again up to the current snapshot's
		// could not all be checked against the log, and the current
		// snapshot would be kept beside different ones. The next Open
		// without a target repairs this state; a rollback to the older
		// version works from it.
		return nil, fmt.Errorf("%w: target %d: the log ends at version %d, before the current snapshot's %d; without a rollback, versions before %d cannot be loaded for writing",
			ErrVersion, at, last, current, current)
	}
	if !opts.ReadOnly && base > 0 && last < base {
		// The snapshot is newer than the durable end of the log, or the
		// log is empty: a crash inside a version committed by a snapshot
		// (which empties the log), or a machine crash under a relaxed
		// fsync policy that lost log entries a snapshot already covers.
		// The log cannot roll the older snapshots forward, so they are
		// removed, then a log that ends behind the snapshot is emptied,
		// as the next entry must follow the snapshot.
		if _, err := removeSnapshotsBefore(dir, base); err != nil {
			return nil, err
		}
		if last != 0 {
			if err := db.log.Reset(logResumeAt(base)); err != nil {
				return nil, err
			}
			last = 0
		}
	}
	onDisk := max(last, current) // the newest version the files hold
	if pending >= onDisk {
		// the rollback discarded everything after its target and was
		// interrupted before it removed the file that records it
		pending = 0
		if !opts.ReadOnly {
			if err := removeRollback(dir); err != nil {
				return nil, err
			}
		}
	}
	target, latest := last, max(last, base)
	unfinished := ""
	if pending > 0 {
		target, latest = pending, pending
		unfinished = fmt.Sprintf(" (a rollback to %d is unfinished)", pending)
	}
	if opts.TargetVersion > 0 {
		if opts.TargetVersion > latest {
			if pending == 0 && opts.TargetVersion < current {
				// the log ends before the current snapshot: the
				// versions between are in neither
				return nil, fmt.Errorf("%w: target %d cannot be loaded: the log ends at version %d and the next snapshot holds version %d", ErrVersion, opts.TargetVersion, last, current)
			}
			return nil, fmt.Errorf("%w: target %d is newer than the latest version %d%s", ErrVersion, opts.TargetVersion, latest, unfinished)
		}
		target = opts.TargetVersion
	}
	if err := db.replay(db.mu.trees, base, target); err != nil {
		if opts.ReadOnly {
			// a writer's prune beside removed the snapshot read and
			// the log after it: a read to start again, not damage
			if kerr := checkBaseKept(dir, base); kerr != nil {
				return nil, fmt.Errorf("%w (the replay failed: %v)", kerr, err)
			}
		}
		return nil, err
	}
	if target > base {
		db.mu.version = target
	}
	// A rollback discards the versions after cut: the one asked for, or
	// the unfinished one's (a writer finishes it first, whatever version
	// it opens at). The file recording it makes it all or nothing: until
	// it is removed, every Open stops at cut.
	cut := pending
	if opts.Rollback && (cut == 0 || target < cut) {
		cut = target
	}
	if !opts.ReadOnly && cut > 0 && cut < onDisk {
		if cut != pending {
			if err := writeFileAtomic(dir, rollbackFileName, encodeRollback(cut)); err != nil {
				return nil, err
			}
		}
		// After the rollback file, before anything is discarded: a
		// reader beside that saw neither (retryBesideWriter, the end of
		// a read-only open, loadFrom) sees the count change.
		if err := countRollback(dir); err != nil {
			return nil, err
		}
		if h := duringRollback; h != nil {
			if err := h(db, cut); err != nil {
				return nil, err
			}
		}
		if err := db.rollback(current, cut); err != nil {
			return nil, err
		}
		if err := removeRollback(dir); err != nil {
			return nil, err
		}
	}
	if opts.ReadOnly {
		db.rollbackTo = pending
		if err := checkBaseKept(dir, base); err != nil {
			return nil, err
		}
		// a writer began a rollback meanwhile: the version read may
		// be one it discards, so the read starts again and stops at
		// its target (retryBesideWriter)
		if p, err := readRollback(dir); err != nil {
			return nil, err
		} else if p > 0 && p < db.mu.version {
			return nil, fmt.Errorf("%w: %s: a rollback to %d began while version %d was read", ErrBusy, dir, p, db.mu.version)
		}
		if rb, err := db.rolledBack(); err != nil {
			return nil, err
		} else if rb {
			return nil, fmt.Errorf("%w: %s: a rollback began while version %d was read", ErrBusy, dir, db.mu.version)
		}
	}
	info, err := commitInfo(db.mu.trees, db.mu.version)
	if err != nil {
		return nil, err
	}
	db.mu.info = info
	db.mu.touched = map[string]bool{}
	if !opts.ReadOnly && db.mu.gen.version > 0 && db.log.LastVersion() == db.mu.gen.version {
		// the snapshot holds every logged entry (say, after an offline
		// rewrite): the next entry starts a segment, and the prune after
		// it removes the log before it
		db.log.RollAt(db.mu.gen.version + 1)
		db.mu.pruneAt = db.mu.gen.version + 1
	}
	db.publishLocked()
	// a child of the database's generation (which Open's references keep
	// alive until here): it keeps the files mapped while the check runs,
	// not the trees a switch meanwhile replaces
	if c := checkGen; c != nil {
		if c = c.newChild(); c != nil {
			db.checked = make(chan struct{})
			db.wg.Add(1)
			go db.backgroundCheck(c, checkPace)
		}
	}
	return db, nil
}

// rolledBack reports, for a read-only database, whether a writer has begun
// a rollback since Open started: it cuts the log back in place, and its
// next commits write other versions where the discarded ones were, so the
// log read since may hold them.
func (db *DB) rolledBack() (bool, error) {
	if !db.opts.ReadOnly {
		return false, nil
	}
	n, err := readRollbacks(db.dir)
	return err == nil && n != db.rollbacks, err
}

// checkBaseKept fails, wrapping fs.ErrNotExist, when the snapshot of
// version base, which a read beside the writer rebuilt a version from, is
// no longer listed. The writer removes a snapshot before it truncates or
// empties the log behind it (prune, snapshotCommitLocked), so while the
// snapshot is listed after the replay, the log the replay read reached
// back to it; once it is gone, the replay may have read a log that no
// longer does (the empty snapshot 0 would even take such a log for the
// database's first versions), so the read starts again from a kept
// snapshot (retryBesideWriter, loadVersion).
func checkBaseKept(dir string, base int64) error {
	if pruned(dir, base) {
		return fmt.Errorf("multitree: snapshot %d was removed while a version was rebuilt from it: %w", base, fs.ErrNotExist)
	}
	return nil
}

// backgroundCheck runs Open's check of the checksums of gen's snapshot
// files (OpenCheckBackground), paced by l unless it is nil, and leaves a
// failure for the next Commit or Close. gen is a child of the database's
// generation, which it releases when done: until then a switch to a newer
// snapshot leaves the files mapped (and a pruned directory's files
// allocated), not the replaced trees. Close cancels it: a check stopped
// before it found damage reports nothing.
func (db *DB) backgroundCheck(gen *generation, l snapshot.Limiter) {
	defer db.wg.Done()
	defer close(db.checked)
	err := gen.checkChecksums(db.ctx, l)
	gen.release()
	if err != nil && !errors.Is(err, ErrCorrupt) && db.ctx.Err() != nil {
		err = ErrClosed
	}
	db.checkErr = err
	if err == nil || err == ErrClosed {
		return
	}
	db.mu.Lock()
	db.mu.bgErr = errors.Join(db.mu.bgErr, fmt.Errorf("check of the snapshot opened: %w", err))
	db.mu.Unlock()
}

// WaitOpenCheck waits for the check of the snapshot's checksums that Open
// started in the background (OpenCheckBackground) and returns its result:
// nil for sound files, or when no check runs in the background
// (OpenCheckSync checks before Open returns, OpenCheckNone not at all); an
// error wrapping ErrCorrupt for damage, which the next Commit, or a Close
// after the check ended, reports all the same; ErrClosed if Close stopped
// the check before it ended; ctx's error if ctx ends first (a check
// already finished gives its result even then).
func (db *DB) WaitOpenCheck(ctx context.Context) error {
	if db.checked == nil {
		return nil
	}
	select {
	case <-db.checked:
		return db.checkErr
	default:
	}
	select {
	case <-db.checked:
		return db.checkErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// create writes the empty database: a snapshot at version 0 with the initial
// stores, and the current pointer.
func (db *DB) create() error {
	trees := map[string]*memiavl.Tree{}
	for _, name := range db.opts.InitialStores {
		t, err := memiavl.New(memiavl.Options{InitialVersion: db.opts.InitialVersion})
		if err != nil {
			return err
		}
		trees[name] = t
	}
	// (open removed what an interrupted create, import or removal left:
	// a snapshot 0 is not this database's, which is written anew)
	if err := writeSnapshotDir(context.Background(), db.dir, 0, db.opts.InitialVersion, trees, 1, nil, nil); err != nil {
		return err
	}
	// the log's directory before current: a database without one has
	// lost its log (see Open)
	if err := mkdirDurable(filepath.Join(db.dir, walDirName)); err != nil {
		return err
	}
	return writeFileAtomic(db.dir, currentFileName, encodeCurrent(0))
}

// replay applies the log entries after version from, up to to, to trees,
// which must be at version from and read by nobody else meanwhile. Only
// the last version is hashed: the intermediate ones are saved with
// deferred hashes, so nodes rewritten again later are never hashed. The
// nodes the replay creates are its own, so later versions update them in
// place (memiavl.Tree.SetExclusive) instead of copying them.
func (db *DB) replay(trees map[string]*memiavl.Tree, from, to int64) error {
	if to <= from {
		return nil
	}
	for _, t := range trees {
		t.SetExclusive(from)
	}
	defer func() {
		for _, t := range trees {
			t.ClearExclusive()
		}
	}()
	if first := db.log.FirstVersion(); first == 0 || first > from+1 {
		// An empty log or one that starts later is fine only when the
		// first version to replay is the database's first version.
		if !(from == 0 && first != 0) {
			return fmt.Errorf("%w: the log holds versions %d..%d, replay needs %d..%d", ErrCorrupt, first, db.log.LastVersion(), from+1, to)
		}
		if to < first {
			// a version before the database's first (its initial
			// version), which the empty trees are not
			return fmt.Errorf("%w: %d is before the first version %d", ErrBeforeFirstVersion, to, first)
		}
		from = first - 1
	}
	err := db.log.Replay(from+1, to, func(e wal.Entry) error {
		detachValues(e)
		return applyEntry(trees, e, e.Version == to)
	})
	if w := db.log.WrittenVersion(); err != nil && w < to && !errors.Is(err, wal.ErrClosed) {
		// Replay waits for queued entries; it stopped at the failure
		// of an asynchronous log, which never wrote these versions, or
		// of an fsync, which cut off the records written since the
		// last one
		return fmt.Errorf("%w: versions %d..%d were committed but the log failed before it held them durably (their states were only in memory): %w",
			ErrVersion, w+1, to, err)
	}
	return err
}

// detachValues gives every set of e its own copies of its key and value. A
// replayed entry's bytes alias the buffer of its whole log record, so a
// tree that kept them would keep every record that still has one live
// value: after a reopen, the heap would hold the log since the snapshot,
// overwritten values and all, instead of the live values a running
// database holds. Key and value are copied apart: a key set again later
// keeps its first key (in its leaf, updated in place during the replay,
// and in the inner nodes made when it was inserted), which must not keep
// its first value. Deletes keep nothing.
func detachValues(e wal.Entry) {
	for _, cs := range e.ChangeSets {
		for i := range cs.Pairs {
			p := &cs.Pairs[i]
			if p.Delete {
				continue
			}
			// (never nil, as the decoded empty ones are not)
			p.Key, p.Value = append([]byte{}, p.Key...), append([]byte{}, p.Value...)
		}
	}
}

// applyEntry applies one logged version to trees and saves it, computing
// the hashes only when hash is set (see memiavl.Tree.SaveVersionDeferHash).
func applyEntry(trees map[string]*memiavl.Tree, e wal.Entry, hash bool) error {
	for _, t := range trees {
		if t.Version() == 0 && t.IsEmpty() {
			// the database's first version sets the initial version
			// (which SetInitialVersion may have changed, lowered too,
			// from the one the empty snapshot records)
			if err := t.SetInitialVersion(e.Version); err != nil {
				return err
			}
		}
	}
	if err := applyUpgrades(trees, e.Upgrades, e.Version); err != nil {
		return fmt.Errorf("replaying version %d: %w", e.Version, err)
	}
	if err := applyChangeSets(trees, e.ChangeSets); err != nil {
		return fmt.Errorf("replaying version %d: %w", e.Version, err)
	}
	for name, t := range trees {
		var v int64
		var err error
		if hash {
			_, v, err = t.SaveVersion()
		} else {
			v, err = t.SaveVersionDeferHash()
		}
		if err != nil {
			return err
		}
		if v != e.Version {
			return fmt.Errorf("%w: store %q saved version %d while replaying %d", ErrCorrupt, name, v, e.Version)
		}
	}
	return nil
}

// applyUpgrades adds, renames and deletes stores as the SDK's rootmulti
// store does for StoreUpgrades: an added store is an empty tree whose first
// version is v; a renamed store is a new tree of version v into which the old
// store's pairs are inserted in key order, the old store being removed (the
// checksums of the old store's snapshot files it reads are checked first).
func applyUpgrades(trees map[string]*memiavl.Tree, u wal.Upgrades, v int64) error {
	for _, name := range u.Deleted {
		if _, ok := trees[name]; !ok {
			return fmt.Errorf("%w: cannot delete %q", ErrUnknownStore, name)
		}
		delete(trees, name)
	}
	for _, r := range u.Renamed {
		old, ok := trees[r.OldName]
		if !ok {
			return fmt.Errorf("%w: cannot rename %q", ErrUnknownStore, r.OldName)
		}
		if _, ok := trees[r.NewName]; ok {
			return fmt.Errorf("%w: cannot rename %q to %q", ErrStoreExists, r.OldName, r.NewName)
		}
		if err := validateStoreName(r.NewName); err != nil {
			return err
		}
		if s := old.Snapshot(); s != nil {
			// the new tree has no snapshot under it, so its next
			// snapshot write checks nothing it copies: damage of the
			// files read here (before Open's background check has
			// found it, or without that check) would be written out
			// with valid checksums
			if err := s.VerifyChecksums(context.Background(), snapshot.FileLeaves, snapshot.FileKVs); err != nil {
				return fmt.Errorf("%w: store %q, renamed to %q: %w", ErrCorrupt, r.OldName, r.NewName, err)
			}
		}
		nt, err := memiavl.New(memiavl.Options{InitialVersion: v})
		if err != nil {
			return err
		}
		it := old.Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			if _, err := nt.Set(bytes.Clone(it.Key()), bytes.Clone(it.Value())); err != nil {
				return err
			}
		}
		if err := it.Error(); err != nil {
			return err
		}
		delete(trees, r.OldName)
		trees[r.NewName] = nt
	}
	for _, name := range u.Added {
		if _, ok := trees[name]; ok {
			return fmt.Errorf("%w: cannot add %q", ErrStoreExists, name)
		}
		if err := validateStoreName(name); err != nil {
			return err
		}
		t, err := memiavl.New(memiavl.Options{InitialVersion: v})
		if err != nil {
			return err
		}
		trees[name] = t
	}
	return nil
}

// CheckUpgrades returns why ApplyUpgrades would refuse u on a database
// whose working version has the stores names and no upgrades yet, nil if
// it would apply them: an unknown store deleted or renamed, a store renamed
// twice, an existing name added or renamed to, a name outside 1 to 119
// bytes. It reads no database, so that a caller can refuse upgrades before
// it closes and reopens one.
func CheckUpgrades(names []string, u wal.Upgrades) error {
	origins := make(map[string]string, len(names))
	for _, name := range names {
		origins[name] = name
	}
	if _, err := upgradeOrigins(origins, u); err != nil {
		return err
	}
	for _, r := range u.Renamed {
		if err := validateStoreName(r.NewName); err != nil {
			return err
		}
	}
	for _, name := range u.Added {
		if err := validateStoreName(name); err != nil {
			return err
		}
	}
	return nil
}

// upgradeOrigins applies u to origins (store name -> the store at the
// version's start whose pairs it holds, "" for a new store) in the order and
// with the checks of applyUpgrades, and returns the result.
func upgradeOrigins(origins map[string]string, u wal.Upgrades) (map[string]string, error) {
	m := maps.Clone(origins)
	for _, name := range u.Deleted {
		if _, ok := m[name]; !ok {
			return nil, fmt.Errorf("%w: cannot delete %q", ErrUnknownStore, name)
		}
		delete(m, name)
	}
	for _, r := range u.Renamed {
		o, ok := m[r.OldName]
		if !ok {
			if _, was := origins[r.OldName]; was {
				return nil, fmt.Errorf("%w: cannot rename %q to %q: the same upgrades deleted or renamed it before (a store is renamed once)", ErrUnknownStore, r.OldName, r.NewName)
			}
			return nil, fmt.Errorf("%w: cannot rename %q", ErrUnknownStore, r.OldName)
		}
		if _, ok := m[r.NewName]; ok {
			return nil, fmt.Errorf("%w: cannot rename %q to %q", ErrStoreExists, r.OldName, r.NewName)
		}
		delete(m, r.OldName)
		m[r.NewName] = o
	}
	for _, name := range u.Added {
		if _, ok := m[name]; ok {
			return nil, fmt.Errorf("%w: cannot add %q", ErrStoreExists, name)
		}
		m[name] = ""
	}
	return m, nil
}

// applyChangeSets applies a replayed version's css to trees (applyByStore)
// and returns the error of the first change set, in css's order, that
// failed; the trees are then left part applied, which a replay abandons.
func applyChangeSets(trees map[string]*memiavl.Tree, css []wal.ChangeSet) error {
	var first *storeTask
	for _, tk := range applyByStore(trees, css, replayParallelPairs, false) {
		if tk.err != nil && (first == nil || tk.css[tk.done] < first.css[first.done]) {
			first = tk
		}
	}
	if first != nil {
		return first.err
	}
	return nil
}

// storeTask is the change sets of one store in a batch, which one task
// applies in order.
type storeTask struct {
	css   []int // indexes into the batch, in order
	pairs int
	done  int   // change sets applied
	err   error // of change set css[done]
	// rewrites are the sets that rewrote a leaf an earlier set of the
	// working version wrote (memiavl.Tree.WorkingLeafRewritten), noted
	// for the working version's changes: cs indexes into the batch
	rewrites []pairRef
}

// applyByStore applies css to trees. The stores' trees are independent:
// each store's change sets are applied in order by a task of its own, and
// the tasks run in parallel, largest first, unless the second largest has
// fewer than minPairs pairs (its share would not pay for a goroutine).
// With working set (the working version's changes, not a replay), each
// task notes its sets that rewrote a working leaf (storeTask.rewrites) and
// then hashes its tree if it applied at least hashAfterApplyPairs pairs; a
// corrupt snapshot is left for the caller's SaveVersion to report. It
// returns the tasks, largest first.
func applyByStore(trees map[string]*memiavl.Tree, css []wal.ChangeSet, minPairs int, working bool) []*storeTask {
	byStore := make(map[string]*storeTask, len(css))
	var tasks []*storeTask
	for i, cs := range css {
		tk := byStore[cs.Name]
		if tk == nil {
			tk = &storeTask{}
			byStore[cs.Name] = tk
			tasks = append(tasks, tk)
		}
		tk.css = append(tk.css, i)
		tk.pairs += len(cs.Pairs)
	}
	sort.SliceStable(tasks, func(a, b int) bool { return tasks[a].pairs > tasks[b].pairs })
	workers := runtime.GOMAXPROCS(0)
	if len(tasks) < 2 || tasks[1].pairs < minPairs {
		workers = 1
	}
	parallel(len(tasks), workers, func(i int) {
		tk := tasks[i]
		for _, j := range tk.css {
			var rewrote func(k int)
			if working {
				rewrote = func(k int) { tk.rewrites = append(tk.rewrites, pairRef{j, k}) }
			}
			if tk.err = applyChangeSet(trees, css[j], rewrote); tk.err != nil {
				return
			}
			tk.done++
		}
		if working && tk.pairs >= hashAfterApplyPairs {
			_ = trees[css[tk.css[0]].Name].ComputeHashes()
		}
	})
	return tasks
}

// replayParallelPairs is the fewest pairs the second largest store of a
// replayed version needs for the stores to be applied in parallel.
const replayParallelPairs = 64

// applyChangeSet applies cs to its tree; a non-nil rewrote is called with
// the index of each set that rewrote a leaf an earlier set of the working
// version wrote.
func applyChangeSet(trees map[string]*memiavl.Tree, cs wal.ChangeSet, rewrote func(k int)) error {
	t, ok := trees[cs.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownStore, cs.Name)
	}
	for k, p := range cs.Pairs {
		if err := applyPair(t, cs.Name, p); err != nil {
			return err
		}
		if rewrote != nil && !p.Delete && t.WorkingLeafRewritten() {
			rewrote(k)
		}
	}
	return nil
}

// applyPair applies one set or delete to store's tree t.
func applyPair(t *memiavl.Tree, store string, p wal.KVPair) error {
	var err error
	if p.Delete {
		_, err = t.Remove(p.Key)
	} else {
		_, err = t.Set(p.Key, p.Value)
	}
	if err != nil {
		return fmt.Errorf("store %q: %w", store, err)
	}
	return nil
}

// commitInfo builds the SDK commit info of trees at version from their root
// hashes: the working hashes, which equal the saved ones right after a save
// or a replay. It fails with ErrCorrupt when a snapshot cannot be read.
func commitInfo(trees map[string]*memiavl.Tree, version int64) (*storetypes.CommitInfo, error) {
	hashes := make(map[string][]byte, len(trees))
	for name, t := range trees {
		h, err := t.RootHashChecked()
		if err != nil {
			return nil, corruptStore(name, err)
		}
		hashes[name] = h
	}
	return commitInfoOf(hashes, version), nil
}

// commitInfoOf builds the SDK commit info of the stores' root hashes at
// version.
func commitInfoOf(hashes map[string][]byte, version int64) *storetypes.CommitInfo {
	names := make([]string, 0, len(hashes))
	for name := range hashes {
		names = append(names, name)
	}
	sort.Strings(names)
	infos := make([]storetypes.StoreInfo, len(names))
	for i, name := range names {
		infos[i] = storetypes.StoreInfo{Name: name, CommitId: storetypes.CommitID{Version: version, Hash: hashes[name]}}
	}
	return &storetypes.CommitInfo{Version: version, StoreInfos: infos}
}

// corruptStore names the store of a tree's error, and makes a tree's
// ErrCorrupt (an unreadable snapshot) the database's.
func corruptStore(name string, err error) error {
	if errors.Is(err, memiavl.ErrCorrupt) && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("%w: store %q: %w", ErrCorrupt, name, err)
	}
	return fmt.Errorf("store %q: %w", name, err)
}

// publishLocked makes the last committed version visible to readers.
func (db *DB) publishLocked() {
	trees := make(map[string]*memiavl.Tree, len(db.mu.trees))
	for name, t := range db.mu.trees {
		trees[name] = t.Copy()
	}
	db.mu.gen.acquire()
	st := &state{version: db.mu.version, info: db.mu.info, trees: trees, gen: db.mu.gen}
	if old := db.state.Swap(st); old != nil {
		old.gen.release()
	}
}

// LogTornTail returns the torn tail the open found at the end of the log
// (wal.Log.TornTail): bytes after the last whole record, what an append
// that a crash interrupted leaves, or a damaged last record. A writer's
// open cut it off; a read-only one ignores it. The database is at the
// version before it either way; callers should report it. A writer's open
// that cut one and then failed names it in its error.
func (db *DB) LogTornTail() (wal.TornTail, bool) { return db.log.TornTail() }

// Version returns the last committed version, 0 once the database is
// closed.
func (db *DB) Version() int64 {
	if st := db.state.Load(); st != nil {
		return st.version
	}
	return 0
}

// LastCommitInfo returns the commit info of the last committed version. It
// is the database's own, shared with every caller: it must not be modified.
func (db *DB) LastCommitInfo() *storetypes.CommitInfo {
	if st := db.state.Load(); st != nil {
		return st.info
	}
	return nil
}

// Dir returns the database directory.
func (db *DB) Dir() string { return db.dir }

// SnapshotVersion returns the version of the snapshot the working trees are
// built on, 0 once the database is closed.
func (db *DB) SnapshotVersion() int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.gen == nil {
		return 0 // closed
	}
	return db.mu.gen.version
}

func (db *DB) writable() error {
	if db.mu.closed {
		return ErrClosed
	}
	if db.mu.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, db.mu.broken)
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	return nil
}

func (db *DB) workingVersionLocked() int64 {
	v := db.mu.version + 1
	if db.mu.version == 0 && db.mu.initial > 1 {
		v = db.mu.initial
	}
	return v
}

// lastVersionLocked fails once the last version a database can have is
// committed: there is no working version to change or commit.
func (db *DB) lastVersionLocked() error {
	if db.mu.version == math.MaxInt64 {
		return fmt.Errorf("%w: version %d is the last one a database can have", ErrVersion, db.mu.version)
	}
	return nil
}

// WorkingVersion returns the version the next Commit creates, 0 once the
// database is closed (as Version), or after the last version a database
// can have (math.MaxInt64), which has no next one.
func (db *DB) WorkingVersion() int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed || db.mu.version == math.MaxInt64 {
		return 0
	}
	return db.workingVersionLocked()
}

// SetInitialVersion sets the version of the first commit. It is only valid
// before anything is committed; changes already made to the working version
// are kept and committed at the new one, as rootmulti does. After a
// WorkingCommitInfo, rootmulti over cosmos/iavl would keep hashes computed
// at the old version (see memiavl.Tree.SetInitialVersion); this database
// hashes them again.
func (db *DB) SetInitialVersion(v int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("%w: negative initial version %d", ErrInvalidOptions, v)
	}
	if db.mu.version != 0 {
		return fmt.Errorf("%w: initial version can only be set before the first commit", ErrVersion)
	}
	for _, t := range db.mu.trees {
		if err := t.SetInitialVersion(v); err != nil {
			return err
		}
	}
	db.mu.initial = v
	return nil
}

// ApplyUpgrades adds, renames and deletes stores in the working version, as
// StoreUpgrades do in the SDK: the deletions first, then the renames in
// order, then the additions. It must come before any change of the version.
// A name that held a store (deleted in the same set or earlier, or renamed
// away) may be added or renamed to, starting a new store, where rootmulti
// refuses the load because the name's old iavl versions are still stored.
//
// The log records a version's upgrades as one such set, so a further call
// in the same version is accepted only when the set of all the version's
// upgrades, applied in that order, gives the same stores with the same
// pairs as the calls one after the other (adding two stores in two calls
// does; adding a store and renaming it in the next call does not, and is
// refused: apply them in one call, or as the set they amount to).
func (db *DB) ApplyUpgrades(u wal.Upgrades) (err error) {
	defer func() { err = asCorrupt(err) }()
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if len(db.mu.pending.ChangeSets) > 0 {
		return fmt.Errorf("%w: store upgrades must be applied before the version's changes", ErrUncommitted)
	}
	// an empty set changes nothing, also at the last version (the SDK
	// adapter's loads apply their upgrades, mostly none)
	if noUpgrades(u) {
		return nil
	}
	if err := db.lastVersionLocked(); err != nil {
		return err
	}
	start, origins := db.mu.start, db.mu.origins
	if start == nil {
		start = make(map[string]string, len(db.mu.trees))
		for name := range db.mu.trees {
			start[name] = name
		}
		origins = start
	}
	after, err := upgradeOrigins(origins, u)
	if err != nil {
		return err
	}
	if db.mu.start != nil {
		// the version's upgrades as the log will replay them, from
		// the stores at its start
		p := db.mu.pending.Upgrades
		all := wal.Upgrades{
			Added:   append(slices.Clone(p.Added), u.Added...),
			Renamed: append(slices.Clone(p.Renamed), u.Renamed...),
			Deleted: append(slices.Clone(p.Deleted), u.Deleted...),
		}
		if replayed, err := upgradeOrigins(start, all); err != nil || !maps.Equal(replayed, after) {
			return fmt.Errorf("%w: these store upgrades, after the version's earlier ones, are not what the log would replay (a version's upgrades are one set: deletions, renames, then additions); apply them in one call", ErrConflict)
		}
	}
	// apply to a copy of the map so that a failing upgrade changes nothing
	trees := make(map[string]*memiavl.Tree, len(db.mu.trees))
	for k, v := range db.mu.trees {
		trees[k] = v
	}
	if err := applyUpgrades(trees, u, db.workingVersionLocked()); err != nil {
		return err
	}
	db.mu.trees = trees
	db.mu.start, db.mu.origins = start, after
	p := &db.mu.pending.Upgrades
	p.Added = append(p.Added, u.Added...)
	p.Renamed = append(p.Renamed, u.Renamed...)
	p.Deleted = append(p.Deleted, u.Deleted...)
	for _, name := range u.Added {
		db.mu.touched[name] = true
	}
	for _, r := range u.Renamed {
		db.mu.touched[r.NewName] = true
	}
	return nil
}

// ApplyChangeSets applies changes to the working trees. Keys and values are
// retained: the caller must not modify them afterwards; the slices of pairs
// are not, and may be reused once the call returns. The names are all
// checked first: an unknown store fails the call before any change. The
// stores apply in parallel (a store named several times applies its change
// sets in order), and a store with many changes is hashed right after
// them, so Commit has less left to hash; all of it ends before the call
// returns. As with Set, a set of a key already set in the working version
// (and not deleted since) gives the logged set its value instead of being
// logged again, so the version's log entry holds one value per key.
func (db *DB) ApplyChangeSets(css []wal.ChangeSet) (err error) {
	defer func() { err = asCorrupt(err) }()
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.lastVersionLocked(); err != nil {
		return err
	}
	for _, cs := range css {
		if _, ok := db.mu.trees[cs.Name]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownStore, cs.Name)
		}
		for _, p := range cs.Pairs {
			switch {
			case p.Key == nil:
				return fmt.Errorf("store %q: %w", cs.Name, memiavl.ErrNilKey)
			case !p.Delete && p.Value == nil:
				return fmt.Errorf("store %q: %w: key %s", cs.Name, memiavl.ErrNilValue, hexkey.Upper(p.Key))
			case !p.Delete:
				if err := memiavl.CheckSize(p.Key, p.Value); err != nil {
					return fmt.Errorf("store %q: %w", cs.Name, err)
				}
			}
		}
	}
	if css, err = db.detachHeld(css); err != nil {
		return err
	}
	// No task is running when the call returns, so no other method ever
	// sees one in progress.
	tasks := applyByStore(db.mu.trees, css, 0, true)
	// record what was applied, in the given order
	applied := make(map[int]bool, len(css))
	var rewrites map[pairRef]bool
	var first error
	for _, tk := range tasks {
		for _, i := range tk.css[:tk.done] {
			applied[i] = true
		}
		for _, r := range tk.rewrites {
			if rewrites == nil {
				rewrites = map[pairRef]bool{}
			}
			rewrites[r] = true
		}
		if tk.err != nil && (first == nil) {
			first = tk.err
		}
		if tk.err != nil {
			db.breakOn(tk.err)
		}
	}
	for i, cs := range css {
		if !applied[i] {
			continue
		}
		if rewrites == nil {
			db.addPendingLocked(cs.Name, cs.Pairs...)
			continue
		}
		// a set that rewrote a leaf of the working version gives the
		// pending set of its key its value, as Set does, instead of
		// being logged too (the pairs before it are logged first: the
		// set it rewrote may be one of them)
		start := 0
		for k, p := range cs.Pairs {
			if !rewrites[pairRef{i, k}] {
				continue
			}
			db.addPendingLocked(cs.Name, cs.Pairs[start:k]...)
			if !db.coalescePendingLocked(cs.Name, p) {
				db.addPendingLocked(cs.Name, p)
			}
			start = k + 1
		}
		db.addPendingLocked(cs.Name, cs.Pairs[start:]...)
	}
	return first
}

// hashAfterApplyPairs is the fewest pairs of a store for which
// ApplyChangeSets hashes its tree right after applying them.
const hashAfterApplyPairs = 64

// Set sets key to value in store's working tree. The tree retains both.
// value may be a slice of a working tree's snapshot (GetZeroCopy): it is
// copied, read under a fault guard, so that a file cut short under its
// mapping meanwhile fails here with ErrCorrupt instead of faulting in the
// log's write; so is one read through a View, which may be released
// before the version is committed.
func (db *DB) Set(store string, key, value []byte) error {
	return db.write(store, wal.KVPair{Key: key, Value: value})
}

// Delete removes key from store's working tree.
func (db *DB) Delete(store string, key []byte) error {
	return db.write(store, wal.KVPair{Delete: true, Key: key})
}

func (db *DB) write(store string, p wal.KVPair) (err error) {
	defer func() { err = asCorrupt(err) }()
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.lastVersionLocked(); err != nil {
		return err
	}
	t, ok := db.mu.trees[store]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	if !p.Delete {
		if err := memiavl.CheckSize(p.Key, p.Value); err != nil {
			return fmt.Errorf("store %q: %w", store, err) // before a copy of it
		}
	}
	if p.Key, err = copyMapped(p.Key); err != nil {
		return fmt.Errorf("store %q: %w", store, err)
	}
	if p.Value, err = copyMapped(p.Value); err != nil {
		return fmt.Errorf("store %q: %w", store, err)
	}
	if err := applyPair(t, store, p); err != nil {
		db.breakOn(err)
		return err
	}
	if !p.Delete && t.WorkingLeafRewritten() && db.coalescePendingLocked(store, p) {
		return nil
	}
	db.addPendingLocked(store, p)
	return nil
}

// pairRef locates a pair of the pending entry: db.mu.pending.ChangeSets[cs].Pairs[pair].
type pairRef struct{ cs, pair int }

// coalescePendingLocked gives the pending Set of p's key the value of p, a
// Set of the same key that the tree applied by rewriting the leaf that
// Set wrote (memiavl.Tree.WorkingLeafRewritten): the tree's shape and the
// replayed hashes are those of the log entry with p appended, and the
// entry holds one value per key written again and again (a counter set by
// every transaction of a block) instead of every value until Commit. The
// first such Set of a store indexes the store's pending pairs; the index
// is kept up to date by addPendingLocked until Commit. It reports false,
// having changed nothing, when the key's last pending pair is not a Set.
func (db *DB) coalescePendingLocked(store string, p wal.KVPair) bool {
	idx, ok := db.mu.rewrites[store]
	if !ok {
		idx = map[string]pairRef{}
		for c, cs := range db.mu.pending.ChangeSets {
			if cs.Name != store {
				continue
			}
			for i, q := range cs.Pairs {
				idx[string(q.Key)] = pairRef{c, i}
			}
		}
		if db.mu.rewrites == nil {
			db.mu.rewrites = map[string]map[string]pairRef{}
		}
		db.mu.rewrites[store] = idx
	}
	ref, ok := idx[string(p.Key)]
	if !ok {
		return false
	}
	q := &db.mu.pending.ChangeSets[ref.cs].Pairs[ref.pair]
	if q.Delete {
		return false
	}
	q.Value = p.Value
	return true
}

// detachHeld returns css with the keys and values that are slices of an
// open snapshot (from GetZeroCopy) copied (see copyMapped), css itself when
// there are none: the trees and the log's write of the version then hold
// nothing mapped. css is left as it is.
func (db *DB) detachHeld(css []wal.ChangeSet) ([]wal.ChangeSet, error) {
	var out []wal.ChangeSet
	for i, cs := range css {
		var pairs []wal.KVPair
		for j, p := range cs.Pairs {
			if snapshot.Mapping(p.Key) == nil && snapshot.Mapping(p.Value) == nil {
				continue
			}
			if out == nil {
				out = slices.Clone(css)
			}
			if pairs == nil {
				pairs = slices.Clone(cs.Pairs)
				out[i].Pairs = pairs
			}
			var err error
			if pairs[j].Key, err = copyMapped(p.Key); err != nil {
				return nil, fmt.Errorf("store %q: %w", cs.Name, err)
			}
			if pairs[j].Value, err = copyMapped(p.Value); err != nil {
				return nil, fmt.Errorf("store %q: %w", cs.Name, err)
			}
		}
	}
	if out == nil {
		return css, nil
	}
	return out, nil
}

// breakOn marks the database broken after err, a failed change, if it came
// from inside a tree: a corrupt snapshot met halfway through a change can
// leave the working tree with part of it, which must not be committed.
func (db *DB) breakOn(err error) {
	if errors.Is(err, memiavl.ErrCorrupt) && db.mu.broken == nil {
		db.mu.broken = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
}

// addPendingLocked records pairs applied to store for the version's log
// entry. No pairs is no change: it neither marks the store nor counts as
// the version's changes (which store upgrades must come before).
func (db *DB) addPendingLocked(store string, pairs ...wal.KVPair) {
	if len(pairs) == 0 {
		return
	}
	db.mu.touched[store] = true
	css := db.mu.pending.ChangeSets
	if n := len(css); n > 0 && css[n-1].Name == store {
		css[n-1].Pairs = append(css[n-1].Pairs, pairs...)
	} else {
		db.mu.pending.ChangeSets = append(css, wal.ChangeSet{Name: store, Pairs: append([]wal.KVPair(nil), pairs...)})
	}
	if idx, ok := db.mu.rewrites[store]; ok {
		c := len(db.mu.pending.ChangeSets) - 1
		all := db.mu.pending.ChangeSets[c].Pairs
		for i := len(all) - len(pairs); i < len(all); i++ {
			idx[string(all[i].Key)] = pairRef{c, i}
		}
	}
}

// Get reads key from store's working tree (uncommitted changes included).
// Only the writer's goroutine may call it; readers use View.
func (db *DB) Get(store string, key []byte) (_ []byte, err error) {
	defer func() { err = asCorrupt(err) }()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return nil, ErrClosed
	}
	t, ok := db.mu.trees[store]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	return t.Get(key)
}

// WorkingReader reads a store's working tree: the last committed version
// with the working version's changes made so far, as they are made. It has
// the read methods of memiavl.Tree; the writes of a working version go
// through the DB (Set, Delete, ApplyChangeSets), which logs them.
type WorkingReader interface {
	Get(key []byte) ([]byte, error)
	GetZeroCopy(key []byte) ([]byte, error)
	Has(key []byte) (bool, error)
	Iterator(start, end []byte, ascending bool) *memiavl.Iterator
	GetMembershipProof(key []byte) (*ics23.CommitmentProof, error)
	GetNonMembershipProof(key []byte) (*ics23.CommitmentProof, error)
	RootHash() []byte
	RootHashChecked() ([]byte, error)
	Version() int64
	WorkingVersion() int64
	Size() int64
	SizeChecked() (int64, error)
	Height() uint8
	HeightChecked() (uint8, error)
	IsEmpty() bool
}

// WorkingTree returns a reader of store's working tree for the writer's
// direct use (reads, iteration, proofs of the working state): a tree whose
// changes went around the DB would not be logged, so it gives no write
// methods. nil if there is no such store or the database is closed. It is
// valid until the next Commit, RewriteSnapshot or Close: a Commit may
// switch the working trees to a new snapshot and unmap the old one, which
// the reader reads; call WorkingTree again after each of them (or read
// through a View).
//
// An iterator from the reader is the exception: it holds the snapshot it
// reads until its Close (memiavl.Iterator.Hold), so it may be kept across
// a Commit, a switch to a new snapshot and Close. It sees the writes to
// its tree made while it is open, as memiavl.Iterator describes, until
// the DB replaces the tree (a switch to a new snapshot, Close); from then
// on it reads the tree as it was last changed, as a View would: the
// writes of later versions go to the tree that replaced it. While it is
// open, the old snapshot stays mapped and its files (if pruned) keep
// their disk space; close iterators when done.
func (db *DB) WorkingTree(store string) WorkingReader {
	db.mu.Lock()
	defer db.mu.Unlock()
	if t := db.mu.trees[store]; t != nil { // none once closed
		return treeReader{t: t, gen: db.mu.gen}
	}
	return nil
}

// treeReader is a WorkingReader: the tree without its write methods. gen
// is the generation the tree reads, which its iterators hold.
type treeReader struct {
	t   *memiavl.Tree
	gen *generation
}

func (r treeReader) Get(key []byte) ([]byte, error)         { return r.t.Get(key) }
func (r treeReader) GetZeroCopy(key []byte) ([]byte, error) { return r.t.GetZeroCopy(key) }
func (r treeReader) Has(key []byte) (bool, error)           { return r.t.Has(key) }
func (r treeReader) Iterator(start, end []byte, ascending bool) *memiavl.Iterator {
	// a reader kept past the release of its generation has nothing to
	// hold: its iterator stops with snapshot.ErrClosed (or reads memory
	// only, for a tree with no snapshot)
	held := r.gen != nil && r.gen.tryAcquire()
	it := r.t.Iterator(start, end, ascending)
	if held {
		it.Hold(r.gen)
	}
	return it
}
func (r treeReader) GetMembershipProof(key []byte) (*ics23.CommitmentProof, error) {
	return r.t.GetMembershipProof(key)
}
func (r treeReader) GetNonMembershipProof(key []byte) (*ics23.CommitmentProof, error) {
	return r.t.GetNonMembershipProof(key)
}
func (r treeReader) RootHash() []byte                 { return r.t.RootHash() }
func (r treeReader) RootHashChecked() ([]byte, error) { return r.t.RootHashChecked() }
func (r treeReader) Version() int64                   { return r.t.Version() }
func (r treeReader) WorkingVersion() int64            { return r.t.WorkingVersion() }
func (r treeReader) Size() int64                      { return r.t.Size() }
func (r treeReader) SizeChecked() (int64, error)      { return r.t.SizeChecked() }
func (r treeReader) Height() uint8                    { return r.t.Height() }
func (r treeReader) HeightChecked() (uint8, error)    { return r.t.HeightChecked() }
func (r treeReader) IsEmpty() bool                    { return r.t.IsEmpty() }

// StoreNames returns the names of the working version's stores, sorted;
// none once the database is closed.
func (db *DB) StoreNames() []string {
	db.mu.Lock()
	defer db.mu.Unlock()
	names := make([]string, 0, len(db.mu.trees))
	for n := range db.mu.trees {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WorkingCommitInfo returns the commit info the next Commit will produce:
// its Hash() is the app hash of the working version. It returns nil once
// the database is closed, and after the last version a database can have
// (math.MaxInt64), which no Commit follows. It panics with an error wrapping ErrCorrupt when
// a snapshot cannot be read (a file cut short under its mapping, a failed
// disk read), as the SDK's WorkingHash has no error to return; the
// database is then broken (see ErrBroken), and Commit fails.
func (db *DB) WorkingCommitInfo() *storetypes.CommitInfo {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed || db.mu.version == math.MaxInt64 {
		return nil
	}
	db.hashTreesLocked()
	info, err := commitInfo(db.mu.trees, db.workingVersionLocked())
	if err != nil {
		db.breakOn(err)
		panic(err)
	}
	return info
}

// hashTreesLocked computes the working hashes of the changed trees, in
// parallel when several changed.
func (db *DB) hashTreesLocked() {
	var changed []*memiavl.Tree
	for name := range db.mu.touched {
		if t, ok := db.mu.trees[name]; ok {
			changed = append(changed, t)
		}
	}
	if len(changed) < 2 {
		return
	}
	parallel(len(changed), db.opts.RewriteConcurrency, func(i int) {
		// a corrupt snapshot is reported by Commit's SaveVersion
		_ = changed[i].ComputeHashes()
	})
}

// Commit saves the working version of every store, logs its changes and
// returns its commit info. A version that the log already holds (after a
// TargetVersion open without rollback) must be re-committed with the same
// changes (in any order of stores; for a version without store upgrades,
// give or take deletes of absent keys), which are then not logged again;
// other changes fail with ErrConflict.
//
// If a background rewrite failed, Commit still commits and returns the
// committed info together with an error wrapping ErrRewrite; so it does
// when the background check of the snapshot's checksums that Open started
// (OpenCheckBackground) found damage, with an error wrapping ErrCorrupt.
func (db *DB) Commit() (_ *storetypes.CommitInfo, err error) {
	defer func() { err = asCorrupt(err) }()
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable(); err != nil {
		return nil, err
	}
	if err := db.lastVersionLocked(); err != nil {
		return nil, err
	}
	v := db.workingVersionLocked()
	entry := db.mu.pending
	entry.Version = v
	logged := v <= db.log.LastVersion()
	if logged {
		if err := db.checkLoggedLocked(entry); err != nil {
			return nil, err
		}
	} else if db.mu.version == 0 && db.mu.first != v {
		// the database's first commit: recorded before the log has
		// it (see firstFileName)
		if err := writeFileAtomic(db.dir, firstFileName, encodeFirst(v)); err != nil {
			return nil, fmt.Errorf("multitree: recording the first version %d: %w", v, err)
		}
		db.mu.first = v
	}
	db.hashTreesLocked()
	hashes := make(map[string][]byte, len(db.mu.trees))
	for name, t := range db.mu.trees {
		if h, tv, err := t.SaveVersion(); err != nil {
			db.breakOn(err) // the stores saved so far are a version ahead
			return nil, err
		} else if tv != v {
			return nil, fmt.Errorf("%w: store %q saved version %d, expected %d", ErrCorrupt, name, tv, v)
		} else {
			hashes[name] = h
		}
	}
	if !logged {
		if err := db.logLocked(entry); err != nil {
			// The trees are saved at v, which neither the log nor a
			// snapshot holds (a full disk, an I/O error): the next
			// commit would put the trees a version ahead of what is
			// durable. What is committed stays readable and a reopen
			// continues from the log.
			db.mu.broken = err
			return nil, err
		}
	}
	db.mu.version = v
	db.mu.info = commitInfoOf(hashes, v)
	db.mu.pending, db.mu.rewrites = wal.Entry{}, nil
	db.mu.origins, db.mu.start = nil, nil
	db.mu.touched = map[string]bool{}

	db.switchIfDoneLocked()
	db.publishLocked()
	db.maybeStartRewriteLocked()
	if at := db.mu.pruneAt; at != 0 && db.log.WrittenVersion() >= at {
		db.mu.pruneAt = 0
		db.startPruneLocked()
	}

	info := db.mu.info
	if err := db.mu.bgErr; err != nil {
		db.mu.bgErr = nil
		return info, err
	}
	return info, nil
}

// logLocked appends the entry of the saved version e.Version to the log,
// or, when it is too large for one record (wal.ErrEntryTooLarge, or over
// maxLogged), commits the version by a snapshot (snapshotCommitLocked).
// Append checks the size before it writes or queues anything.
func (db *DB) logLocked(e wal.Entry) error {
	var err error
	if db.maxLogged < wal.MaxEntrySize && wal.EncodedSize(e) > db.maxLogged {
		err = wal.ErrEntryTooLarge // a lower bound, set by tests
	} else {
		err = db.log.Append(e)
	}
	if !errors.Is(err, wal.ErrEntryTooLarge) {
		if err != nil {
			return fmt.Errorf("multitree: logging version %d: %w", e.Version, err)
		}
		return nil
	}
	db.dropRewriteLocked()
	if err := db.snapshotCommitLocked(e.Version); err != nil {
		return fmt.Errorf("multitree: committing version %d by a snapshot: %w", e.Version, err)
	}
	db.snapshotCommits.Add(1)
	return nil
}

// logResumeAt is the version a log emptied after a snapshot of version v
// expects next: v+1, or v itself after the last version (math.MaxInt64),
// which no commit follows, so that the log stays empty.
func logResumeAt(v int64) int64 {
	if v == math.MaxInt64 {
		return v
	}
	return v + 1
}

// snapshotCommitLocked makes the saved version v durable by writing a
// snapshot of it, for a version whose changes are too large for one log
// record (wal.MaxEntrySize), such as a chain's genesis or an upgrade that
// migrates a large store. The log entries before v are flushed first; then
// the snapshot is written and made current, the log is emptied to resume
// at v+1, and the working trees switch to the snapshot. A crash before
// current points at the snapshot loses v, which Commit had not
// acknowledged; one after it reopens at v (Open empties a log that ends
// before the snapshot). The older snapshots are removed, whatever
// SnapshotKeepRecent says: the emptied log could not roll them forward, so
// versions before v can no longer be viewed or opened (ErrVersion).
func (db *DB) snapshotCommitLocked(v int64) error {
	if err := db.log.Flush(); err != nil {
		return err
	}
	err := db.snapshotNowLocked(db.ctx, v, func() error {
		// The log is emptied to resume after v, so the older snapshots
		// could no longer be rolled forward: they go first, durably, so
		// that no crash leaves one beside a log that skips past it (a
		// crash before the reset leaves the log behind the snapshot,
		// which Open handles the same way).
		removed, err := removeSnapshotsBefore(db.dir, v)
		db.forgetSnapshots(removed)
		if err != nil {
			return err
		}
		return db.log.Reset(logResumeAt(v))
	})
	if err != nil {
		return err
	}
	db.mu.pruneAt = 0
	db.dropViewsBefore(v)
	db.startPruneLocked()
	return nil
}

// dropViewsBefore releases the cached historical views of versions before
// v, which a snapshot commit made unreachable, so that ViewAt refuses them
// all alike. Views handed out stay readable until released.
func (db *DB) dropViewsBefore(v int64) {
	db.views.Lock()
	defer db.views.Unlock()
	db.views.floor = max(db.views.floor, v)
	db.dropViewsLocked(func(ver int64, _ *state) bool { return ver < v })
}

// dropRewriteLocked stops a running background rewrite, waits for it and
// discards it, for a commit that writes a newer snapshot itself. The job
// takes no lock of the writer's, so it ends without one.
func (db *DB) dropRewriteLocked() {
	job := db.mu.rewrite
	if job == nil {
		return
	}
	job.cancel()
	<-job.done
	db.mu.rewrite = nil
	if job.res.gen != nil {
		job.res.gen.release()
	}
	if err := job.failure(); err != nil {
		// it failed before it was stopped: reported as a switch would
		db.mu.bgErr = errors.Join(db.mu.bgErr, err)
	}
}

// checkLoggedLocked accepts a re-commit of a logged version only with the
// same content.
func (db *DB) checkLoggedLocked(e wal.Entry) error {
	want, err := wal.AppendEntry(nil, canonicalEntry(e))
	if err != nil {
		return err
	}
	var got []byte
	var logged wal.Entry
	err = db.log.Replay(e.Version, e.Version, func(le wal.Entry) error {
		logged = le // its bytes are its own (see wal.Log.Replay)
		got, err = wal.AppendEntry(nil, canonicalEntry(le))
		return err
	})
	if err != nil {
		return err
	}
	if bytes.Equal(got, want) {
		return nil
	}
	if same, err := db.sameTreesLocked(e, logged); err != nil {
		return err
	} else if !same {
		return fmt.Errorf("%w: version %d", ErrConflict, e.Version)
	}
	return nil
}

// noUpgrades reports whether u upgrades no store.
func noUpgrades(u wal.Upgrades) bool { return len(u.Added)+len(u.Renamed)+len(u.Deleted) == 0 }

// sameTreesLocked reports whether the working trees, which hold e's
// changes, are the trees the logged entry of the same version makes from
// the last committed ones: writes that differ from the logged ones only by
// changing nothing (a delete of an absent key, which a cache store's Write
// emits; a set of a key to its value is a change, as the leaf takes the
// new version) give the same version. Entries with store upgrades are
// not compared this way: they must match the logged entry. It fails when
// a snapshot cannot be read.
func (db *DB) sameTreesLocked(e, logged wal.Entry) (bool, error) {
	if !noUpgrades(e.Upgrades) || !noUpgrades(logged.Upgrades) {
		return false, nil
	}
	trees := make(map[string]*memiavl.Tree, len(db.mu.trees))
	for name, t := range db.mu.trees {
		trees[name] = t.Copy() // the last committed version
	}
	if err := applyEntry(trees, logged, true); err != nil {
		if errors.Is(err, memiavl.ErrCorrupt) {
			return false, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return false, nil
	}
	db.hashTreesLocked()
	for name, t := range db.mu.trees {
		theirs, err := trees[name].RootHashChecked()
		if err != nil {
			return false, corruptStore(name, err)
		}
		ours, err := t.RootHashChecked()
		if err != nil {
			return false, corruptStore(name, err)
		}
		if !bytes.Equal(theirs, ours) {
			return false, nil
		}
	}
	return true, nil
}

// rollback discards the versions after v: current points at the newest
// snapshot at or below v, the snapshots newer than it are removed, the log
// is cut back to v. Open calls it with the file recording the rollback
// written. That snapshot is the opened one, or a newer one when the open
// is at an older target than v (finishing an unfinished rollback to v):
// the rollback leaves what it leaves whatever version the open is at.
func (db *DB) rollback(current, v int64) error {
	base := db.mu.gen.version
	versions, err := listSnapshots(db.dir)
	if err != nil {
		return err
	}
	for _, s := range versions {
		if s > base && s <= v && s <= current {
			base = s
		}
	}
	if base != current {
		if err := writeFileAtomic(db.dir, currentFileName, encodeCurrent(base)); err != nil {
			return err
		}
		if err := removeLeftovers(db.dir, base); err != nil {
			return err
		}
		db.mu.lastSnap = base
	}
	if db.log.LastVersion() > v {
		return db.log.TruncateBack(v)
	}
	return nil
}

// Close stops and joins the background work, flushes the log and releases
// the snapshots and the lock. Views still held keep their snapshots mapped
// until released, and open iterators of the working trees until closed
// (see WorkingTree). Close also returns the failure of a background job (a
// rewrite or the pruning after one) that no Commit has reported; the
// database is closed all the same. A later or concurrent Close returns
// nil once the first has finished.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		<-db.closeDone
		return nil
	}
	db.mu.closed = true
	db.cancel()
	db.mu.Unlock()
	defer close(db.closeDone)
	db.wg.Wait()

	db.mu.Lock()
	defer db.mu.Unlock()
	// a failure of a background job that no Commit has reported, the
	// rewrite's too if it failed before Close stopped it
	errs := []error{db.mu.bgErr}
	db.mu.bgErr = nil
	if job := db.mu.rewrite; job != nil {
		if job.res != nil && job.res.gen != nil {
			job.res.gen.release()
		}
		errs = append(errs, job.failure())
		db.mu.rewrite = nil
	}
	if db.log != nil {
		errs = append(errs, db.log.Close())
	}
	db.releaseAll()
	db.stopUnmapper()
	if db.opts.importLock == nil { // else the importer's, which it unlocks
		errs = append(errs, unlockDir(db.lock))
	}
	db.lock = nil
	return errors.Join(errs...)
}

// adopt makes the generation's last release unmap its files through
// unmapLater.
func (db *DB) adopt(g *generation) *generation {
	g.unmap = db.unmapLater
	return g
}

// mapGeneration records g, a generation of the snapshot directory of its
// version, as the one a rebuild of a version from that snapshot shares,
// and forgets the released ones.
func (db *DB) mapGeneration(g *generation) {
	db.mapped.Lock()
	defer db.mapped.Unlock()
	db.mapLocked(g)
}

func (db *DB) mapLocked(g *generation) {
	if db.mapped.m == nil {
		db.mapped.m = map[int64]*generation{}
	}
	for v, old := range db.mapped.m {
		if old.refs.Load() <= 0 {
			delete(db.mapped.m, v)
		}
	}
	db.mapped.m[g.version] = g
}

// mapRebuilt records g, a generation a rebuild opened, as mapGeneration
// does, unless another one of its version was recorded meanwhile (a
// rebuild beside it): then it returns a child of that one, which the
// caller uses instead of g (and releases g), so that the snapshot stays
// mapped once.
func (db *DB) mapRebuilt(g *generation) *generation {
	db.mapped.Lock()
	defer db.mapped.Unlock()
	if p := db.mapped.m[g.version]; p != nil && p != g {
		if c := p.newChild(); c != nil {
			return c
		}
	}
	db.mapLocked(g)
	return nil
}

// sharedGeneration returns a generation that shares the mapping of the
// snapshot of version (see mapped), holding a reference on it, with one
// reference for the caller and trees built on it; nil if none is mapped.
func (db *DB) sharedGeneration(version int64) (*generation, map[string]*memiavl.Tree, error) {
	db.mapped.Lock()
	var g *generation
	if p := db.mapped.m[version]; p != nil {
		g = p.newChild()
	}
	db.mapped.Unlock()
	if g == nil {
		return nil, nil, nil
	}
	trees, err := g.newTrees(rebuiltChanges)
	if err != nil {
		g.release()
		return nil, nil, err
	}
	return g, trees, nil
}

// stopUnmapper waits for the unmappings running in the background; later
// ones (of views released after Close) run on the releasing goroutine.
func (db *DB) stopUnmapper() {
	db.unmapper.Lock()
	db.unmapper.closed = true
	db.unmapper.Unlock()
	db.unmapper.wg.Wait()
}

// unmapLater runs closeAll, the unmapping of a released generation, on a
// goroutine of its own until Close, and on the caller's after.
//
// For a generation that a Commit replaced with a background rewrite's
// (collect), the goroutine then runs a garbage collection: the old trees'
// in-memory nodes, everything changed since the previous snapshot and most
// of the heap, have just become garbage, while the collector's pace was set
// by the heap before the switch; left to it, the heap would grow to about
// twice that size before the next collection finds them. One collection
// per background rewrite keeps the peak near the live heap instead.
// RewriteSnapshot, meant for offline use, leaves it to the runtime.
// RewriteSnapshot and the commits by a snapshot flush the log themselves
// before they switch; for a background switch the goroutine flushes it
// before it unmaps.
func (db *DB) unmapLater(closeAll func(), collect bool) {
	db.unmapper.Lock()
	if db.unmapper.closed {
		db.unmapper.Unlock()
		closeAll()
		return
	}
	db.unmapper.wg.Add(1)
	db.unmapper.Unlock()
	hook := db.unmapHook
	go func() {
		defer db.unmapper.wg.Done()
		if collect && db.log != nil {
			// The log's queue (AsyncCommitBuffer) may still hold entries
			// of the versions read from these snapshots. Set copies the
			// keys and values that are slices of a snapshot
			// (copyMapped), so none should point into them; they are
			// written before the snapshots are unmapped all the same.
			_ = db.log.Flush()
		}
		if hook != nil {
			hook()
		}
		closeAll()
		if collect {
			runtime.GC()
		}
	}()
}

// releaseAll drops the DB's references: working generation, published
// state and cached views.
func (db *DB) releaseAll() {
	if st := db.state.Swap(nil); st != nil {
		st.gen.release()
	}
	db.views.Lock()
	for _, st := range db.views.cache {
		st.gen.release()
	}
	db.views.cache, db.views.order = nil, nil
	db.views.closed = true
	db.views.Unlock()
	if db.mu.gen != nil {
		db.mu.gen.release()
		db.mu.gen = nil
	}
	// a closed handle pins no tree
	db.mu.trees, db.mu.touched, db.mu.pending, db.mu.rewrites = nil, nil, wal.Entry{}, nil
}

// checkLogDir fails with ErrCorrupt when the database in dir has no log
// directory: every database has it from its creation on (see create and
// Importer.Commit), and without it the versions after the snapshot are
// lost, which an open would hide by starting a new log.
func checkLogDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, walDirName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: the log directory %s is missing", ErrCorrupt, filepath.Join(dir, walDirName))
		}
		return err
	}
	return nil
}

// firstSegmentMissing is the damage of a database still at snapshot 0
// whose log begins at version first where its first commit, recorded in
// the first file, was rec.
func firstSegmentMissing(dir string, first, rec int64) error {
	return fmt.Errorf("%w: the log %s begins at version %d, but the database's first commit was version %d (%s): its first segment is missing",
		ErrCorrupt, filepath.Join(dir, walDirName), first, rec, filepath.Join(dir, firstFileName))
}
