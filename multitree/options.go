package multitree

import (
	"fmt"
	"os"
	"runtime"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// Defaults filled in for zero option fields.
const (
	DefaultSnapshotInterval = 1000
	DefaultViewCacheSize    = 4
)

// MinRewriteRateLimit is the smallest RewriteRateLimit, in bytes per
// second, other than 0 (no bound): a bound below it is taken for a mistake
// of unit, since a rewrite at that pace would not end within any sensible
// interval.
const MinRewriteRateLimit = 64 << 10

// MaxAsyncCommitBuffer bounds Options.AsyncCommitBuffer: the queue is
// allocated whole, and a longer one only holds more unlogged versions.
const MaxAsyncCommitBuffer = wal.MaxAsyncBuffer

// OpenCheck is how Open checks the checksums of the snapshot files it maps.
// Unless it is OpenCheckNone, a version rebuilt from another kept snapshot
// (ViewAt) is served only after that snapshot's files are checked, once
// per snapshot, when the first such version is rebuilt (a snapshot a
// rewrite of the database wrote counts as checked).
// Reads are served from those files as they are, so damage that no check
// has found (a flipped bit of a value, say) would be served. Whatever the
// check, every open compares each tree's root record with the root hash
// the metadata records, and a damaged root record fails it (ErrCorrupt). The files are
// read with read(2), not through their mappings, so a check brings no page
// into the process's memory.
type OpenCheck int

const (
	// OpenCheckBackground checks them on a goroutine of the database
	// after Open returns, so that a restart is as fast as without a
	// check. Damage is reported by the next Commit, after it has
	// committed its version, as an error wrapping ErrCorrupt, or by Close
	// if no Commit came and the check had ended: Close stops a check
	// still running, so a database opened and closed at once may never
	// read its files (WaitOpenCheck waits for the result). Reads before
	// the check ends are not held back.
	OpenCheckBackground OpenCheck = iota
	// OpenCheckSync checks them before Open returns, which then reads
	// every file of the snapshot once (seconds for gigabytes), and fails
	// with ErrCorrupt on damage.
	OpenCheckSync
	// OpenCheckNone does not check them. A background rewrite still
	// checks the files it copies from before it replaces them.
	OpenCheckNone
)

func (c OpenCheck) String() string {
	switch c {
	case OpenCheckBackground:
		return "background"
	case OpenCheckSync:
		return "sync"
	case OpenCheckNone:
		return "none"
	}
	return fmt.Sprintf("OpenCheck(%d)", int(c))
}

// Options configure Open. They are taken by value; Open fills defaults into
// its own copy and validates it.
type Options struct {
	// CreateIfMissing creates an empty database when dir holds none. A
	// dir without the current pointer that holds snapshots or log entries
	// is a database that lost that pointer, not an empty directory: it is
	// refused (ErrCorrupt), unless an interrupted import left them. A dir
	// that is a symbolic link to a missing directory is created at the
	// link's target.
	CreateIfMissing bool
	// InitialStores are the stores of a newly created database. A store
	// name (here, in upgrades and in imports) is 1 to 119 bytes, so that
	// the directory of its tree, named after it, fits a file system.
	InitialStores []string
	// InitialVersion is the version of the first commit of a newly created
	// database (0 and 1 both mean 1).
	InitialVersion int64

	// SnapshotInterval is the least number of versions between background
	// snapshot rewrites: a Commit starts one when its version is at least
	// SnapshotInterval after the last snapshot's and no rewrite is
	// running. One rewrite runs at a time, so when a rewrite takes longer
	// than SnapshotInterval commits, the next one starts at the first
	// commit after it ends, and the snapshots are further apart. 0 means
	// DefaultSnapshotInterval; a negative value disables background
	// rewrites (RewriteSnapshot still works).
	SnapshotInterval int64
	// SnapshotKeepRecent is how many snapshots older than the current one
	// are kept (with the log entries after them) for historical views and
	// TargetVersion opens. A version too large for the log, committed by
	// a snapshot of its own (see the package documentation), removes them
	// all: the log no longer reaches back to them.
	SnapshotKeepRecent int
	// RewriteConcurrency is how many trees a rewrite writes in parallel. 0
	// means GOMAXPROCS. Above 1, the largest tree, when it holds more than
	// a worker's share of all leaves (and memiavl.SplitMinLeaves), is
	// written in two halves, the right one a task of the same workers
	// (memiavl.WithSplitRunner).
	RewriteConcurrency int
	// RewriteRateLimit bounds how fast a background rewrite writes the new
	// snapshot's files, in bytes per second, so that the rewrite leaves
	// the disk and the page cache to the reads and log writes of a running
	// node; 0 means no bound. A rewrite writes about the size of the
	// snapshot, so at N bytes per second it takes at least size/N seconds,
	// which must stay well under SnapshotInterval blocks' time; and the
	// longer a rewrite takes, the more versions are committed meanwhile,
	// whose in-memory nodes the catch-up holds until the switch, so memory
	// grows as the pace slows. Close does not wait for a paced write: it
	// cancels it. RewriteSnapshot, which a caller runs to have a snapshot
	// now, is not paced. The background check of OpenCheckBackground,
	// which reads the whole snapshot once, is paced at the same rate.
	RewriteRateLimit int64

	// AsyncCommitBuffer is the length of the write-ahead log's queue. 0
	// writes each commit's log entry before Commit returns; N > 0 lets N
	// entries wait for the background log writer (group commit), up to
	// MaxAsyncCommitBuffer.
	AsyncCommitBuffer int
	// Sync is the log's fsync policy (see package wal for what a crash can
	// lose under each).
	Sync wal.SyncPolicy
	// WALSegmentSize bounds the size of a log segment file; 0 means the
	// log's default.
	WALSegmentSize int64

	// OpenCheck is how Open checks the checksums of the snapshot it opens;
	// the zero value checks them in the background.
	OpenCheck OpenCheck

	// ReadOnly opens without the writer's lock; nothing on disk is changed.
	// The database opened is the one on disk at the open: a writer beside
	// it may go on committing, and its later versions are not seen. Once
	// a writer has rolled the database back (Rollback), a ViewAt of the
	// read-only database that rebuilds a version from the log fails with
	// ErrVersion: the log it read at the open was cut back and may hold
	// other versions by now; reopen to read them. Where an import's swap
	// of databases was interrupted between its two renames (dir holds
	// none; the old and the new one are beside it), a read-only open
	// reads the one the next writable open moves to dir, moving nothing;
	// once that open has moved it, such a read-only database can no longer
	// rebuild versions from its files (ViewAt fails): reopen it.
	ReadOnly bool
	// TargetVersion opens the database at this version instead of the
	// latest. 0 means the latest. Without Rollback nothing is discarded:
	// the versions after it stay in the log, and a writer's commits must
	// reproduce them (see Commit). A snapshot written in such a session
	// (RewriteSnapshot, a background rewrite) becomes current, and the
	// next writer Open then removes the snapshots newer than it as
	// leftovers, as after an interrupted rewrite; their versions are
	// still in the log, and are replayed from the new current snapshot.
	TargetVersion int64
	// Rollback, with TargetVersion, discards every version after it: newer
	// snapshots are deleted and the log is truncated, its segments newest
	// first. Not with ReadOnly. It is all or nothing: the target is
	// recorded durably before anything is discarded, and until the
	// rollback has finished every Open (read-only ones included) takes
	// the target for the latest version, and the next writer Open, with
	// whatever options, finishes an interrupted or failed one first.
	Rollback bool

	// ViewCacheSize is how many historical views ViewAt keeps open (the
	// most recently used ones; a view goes from the cache when the prune
	// removes the snapshot it was rebuilt from, or, in a read-only
	// database, at its first ViewAt of a version older than its latest
	// after the writer's prune removed it, and every view after a
	// writer's rollback: a View, or a ViewAt of the latest version, does
	// not look at the directory).
	// 0 means DefaultViewCacheSize; negative disables the cache.
	ViewCacheSize int

	// importLock, set by an importer opening the database it wrote for
	// its Finish step, is the writer's lock on dir, which the importer
	// holds: the open uses it (and Close leaves it locked), leaves the
	// import marker, and opens the unfinished import.
	importLock *os.File
}

func (o Options) withDefaults() (Options, error) {
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.RewriteConcurrency == 0 {
		o.RewriteConcurrency = runtime.GOMAXPROCS(0)
	}
	if o.ViewCacheSize == 0 {
		o.ViewCacheSize = DefaultViewCacheSize
	}
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.InitialVersion < 0:
		return bad("negative InitialVersion %d", o.InitialVersion)
	case o.SnapshotKeepRecent < 0:
		return bad("negative SnapshotKeepRecent %d", o.SnapshotKeepRecent)
	case o.RewriteConcurrency < 0:
		return bad("negative RewriteConcurrency %d", o.RewriteConcurrency)
	case o.RewriteRateLimit < 0:
		return bad("negative RewriteRateLimit %d", o.RewriteRateLimit)
	case o.RewriteRateLimit > 0 && o.RewriteRateLimit < MinRewriteRateLimit:
		return bad("RewriteRateLimit %d below the minimum of %d bytes per second", o.RewriteRateLimit, MinRewriteRateLimit)
	case o.WALSegmentSize < 0 || o.WALSegmentSize > 0 && o.WALSegmentSize < wal.MinSegmentSize:
		return bad("WALSegmentSize %d: 0 (the default) or at least %d bytes", o.WALSegmentSize, wal.MinSegmentSize)
	case o.AsyncCommitBuffer < 0:
		return bad("negative AsyncCommitBuffer %d", o.AsyncCommitBuffer)
	case o.AsyncCommitBuffer > MaxAsyncCommitBuffer:
		return bad("AsyncCommitBuffer %d above the maximum of %d", o.AsyncCommitBuffer, MaxAsyncCommitBuffer)
	case o.TargetVersion < 0:
		return bad("negative TargetVersion %d", o.TargetVersion)
	case o.Rollback && o.TargetVersion == 0:
		return bad("Rollback needs a TargetVersion")
	case o.Rollback && o.ReadOnly:
		return bad("Rollback cannot be combined with ReadOnly")
	case o.ReadOnly && o.CreateIfMissing:
		return bad("CreateIfMissing cannot be combined with ReadOnly")
	case o.OpenCheck < OpenCheckBackground || o.OpenCheck > OpenCheckNone:
		return bad("unknown OpenCheck %d", o.OpenCheck)
	case o.Sync < wal.SyncEveryCommit || o.Sync > wal.SyncNone:
		return bad("unknown Sync policy %d", o.Sync)
	}
	seen := map[string]bool{}
	for _, s := range o.InitialStores {
		if err := validateStoreName(s); err != nil {
			return o, err
		}
		if seen[s] {
			return bad("store %q listed twice in InitialStores", s)
		}
		seen[s] = true
	}
	return o, nil
}
