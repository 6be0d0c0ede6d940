package multitree

import (
	"errors"
	"fmt"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// Sentinel errors. Errors returned by the database wrap them with context;
// test them with errors.Is.
var (
	ErrNotFound       = errors.New("multitree: database not found")
	ErrLocked         = errors.New("multitree: database is locked by another writer")
	ErrReadOnly       = errors.New("multitree: database is read-only")
	ErrClosed         = errors.New("multitree: database is closed")
	ErrCorrupt        = errors.New("multitree: corrupt database")
	ErrUnknownStore   = errors.New("multitree: unknown store")
	ErrStoreExists    = errors.New("multitree: store already exists")
	ErrInvalidOptions = errors.New("multitree: invalid options")
	ErrVersion        = errors.New("multitree: version not available")
	ErrConflict       = errors.New("multitree: version already committed with different content")
	// ErrBeforeFirstVersion wraps ErrVersion for a version before the
	// database's first one (its initial version, or the version it was
	// imported at), which was never committed.
	ErrBeforeFirstVersion = fmt.Errorf("%w: before the database's first version", ErrVersion)
	// ErrReleased is returned by reads through a View after its Release.
	ErrReleased = errors.New("multitree: view released")
	// ErrBroken is returned by every change and commit after a change
	// failed inside a tree (a corrupt snapshot, also wrapped as
	// ErrCorrupt) or a commit could not write the log (a full disk):
	// committed versions stay readable, and reopening the database
	// continues from the last version the log holds. With an asynchronous
	// log (AsyncCommitBuffer), the versions it had not written when it
	// failed are lost: View still reads the latest, ViewAt of the others
	// fails with an error wrapping ErrVersion.
	ErrBroken = errors.New("multitree: an earlier change or commit failed, reopen the database")
	// ErrUncommitted is returned by RewriteSnapshot while the working
	// version has changes: they must be committed first; and by
	// ApplyUpgrades after them: a version's upgrades come first.
	ErrUncommitted = errors.New("multitree: working version has uncommitted changes")
	// ErrRewrite reports a failed background snapshot rewrite. Commit
	// returns it wrapped after committing successfully: the version is
	// durable, the database keeps working from its previous snapshot and
	// retries at the next interval.
	ErrRewrite = errors.New("multitree: background snapshot rewrite failed")

	// ErrBusy is returned by a read-only Open or by Verify beside a writer
	// that switched snapshots and pruned the files the reader was reading
	// under each of its attempts (see Open): the last attempt failed on a
	// file the writer removed, nothing was found damaged, and a later
	// attempt, once the writer is less busy, can succeed. It does not wrap
	// ErrCorrupt.
	ErrBusy = errors.New("multitree: the writer kept changing the directory under the reader")

	// ErrReferenceFormat is returned by Open, LatestVersion, Verify and
	// RemoveDatabase, and by Import and NewImporter wrapped in ErrExists,
	// for a directory that holds a database of the reference memiavl
	// (github.com/crypto-org-chain/cronos/memiavl v0.1.0), whose format
	// this one does not read: compat.ImportMemIAVL (the command's
	// import-memiavl) converts it into a new directory. Nothing is created
	// or changed in the directory.
	ErrReferenceFormat = errors.New("multitree: directory holds a database in the reference memiavl's format")

	// ErrExists is returned by Import and NewImporter when the directory already
	// holds a database that may not be replaced.
	ErrExists = errors.New("multitree: database already exists")

	// ErrUnfinishedImport is returned by Open for a directory holding the
	// database of an import with a Finish step (ImportOptions.Finish) that
	// was interrupted before that step completed: it is not the import's
	// result. An import into the directory, or RemoveDatabase, removes it.
	// A damaged marker of an import (see the package's file layout) is
	// taken for one too, and the error then also wraps ErrCorrupt.
	ErrUnfinishedImport = errors.New("multitree: an import into the directory did not finish")
)

// asCorrupt makes damage met by a tree, a snapshot or the log (their
// ErrCorrupt, which err wraps) the database's ErrCorrupt as well, so that
// errors.Is(err, ErrCorrupt) finds it whichever layer met it. Background
// failures (ErrRewrite) are left as they are: Commit reports them after
// committing, joined, and their parts are told apart by the caller.
func asCorrupt(err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrRewrite) {
		return err
	}
	if errors.Is(err, memiavl.ErrCorrupt) || errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, wal.ErrCorrupt) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}
