package multitree

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// DelayRewrites makes db's background rewrites wait, once their snapshot is
// written, until lag more versions are committed or the database closes,
// so that their catch-up always has versions to rebase and replay. It must
// be called before the first Commit.
func DelayRewrites(db *DB, lag int64) {
	db.afterWrite = func(ctx context.Context, v int64) {
		for db.Version() < v+lag && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
}

// DelayInstalls makes db's background rewrites wait, before they make
// their snapshot durable and current (beside their catch-up), until lag
// more versions are committed or the database closes, as a slow disk
// would. It must be called before the first Commit.
func DelayInstalls(db *DB, lag int64) {
	db.beforeInstall = func(ctx context.Context, v int64) {
		for db.Version() < v+lag && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
}

// SwitchGap returns how many versions the last switch to a background
// rewrite's trees caught up itself, on the commit path.
func SwitchGap(db *DB) int64 { return db.switchGap.Load() }

// WaitRewriteBehind waits for the background rewrite running in db if it
// started lag or more versions before db's version. A test that needs
// rewrites to switch calls it after each commit, so that they do however
// slow the machine's rewrites are against its commits.
func WaitRewriteBehind(db *DB, lag int64) {
	db.mu.Lock()
	job, v := db.mu.rewrite, db.mu.version
	db.mu.Unlock()
	if job != nil && v-job.version >= lag {
		<-job.done
	}
}

// RebaseCounts returns how many catch-up rounds and switches of background
// rewrites rebased, how many could not because the stores had changed, and
// how many rebases failed; after the last two the log is replayed.
func RebaseCounts(db *DB) (rebased, skipped, failed int64) {
	return db.rebases.Load(), db.rebaseSkips.Load(), db.rebaseErrs.Load()
}

// SetUnmapHook makes every background unmapping of db's released snapshots
// call f first. It must be called before the first Commit.
func SetUnmapHook(db *DB, f func()) { db.unmapHook = f }

// SetMaxLoggedEntry makes db commit every version whose log entry would
// encode to more than n bytes by a snapshot, as it does for entries over
// wal.MaxEntrySize. It must be called before the first Commit.
func SetMaxLoggedEntry(db *DB, n int) { db.maxLogged = n }

// SnapshotCommits returns how many versions db committed by a snapshot.
func SnapshotCommits(db *DB) int64 { return db.snapshotCommits.Load() }

// RefuseExchange makes imports that replace a database swap it in as on a
// file system without RENAME_EXCHANGE (two renames), until t ends.
func RefuseExchange(t testing.TB) {
	exchange = func(string, string) error { return unix.EINVAL }
	t.Cleanup(func() { exchange = exchangeDirs })
}
