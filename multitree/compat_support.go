package multitree

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// Small additions used by the Cosmos SDK adapters (package compat).

// Pin takes one more reference on the snapshots the view reads, provided
// they are still held for it: it succeeds while v or any other holder of
// the same generation keeps them, even after v itself was released (for a
// view of View, another such view or the database's own working state,
// until it switches to a newer snapshot; for a version rebuilt by ViewAt,
// another view of that rebuild or the cache), and reports false once they
// have all let go. The generation that mapped a snapshot is also held by
// the versions rebuilt later on top of it, which share its mapping, so a
// view of it may still be pinned after the last holder of its own version
// let go, for as long as those keep the files mapped; such reads are sound
// (the view holds its own in-memory nodes). While pinned, the view's trees
// may be read. Each successful Pin must be paired with one Unpin.
//
// Pin lets a long-lived reader that cannot be closed (a branch handed to an
// SDK query) hold no reference between operations: it pins around each read
// and fails cleanly, instead of reading unmapped memory, once its version
// has been given up.
func (v *View) Pin() bool {
	if !v.st.gen.tryAcquire() {
		return false
	}
	v.pins.Add(1)
	return true
}

// Unpin releases a reference taken by Pin. An Unpin without a Pin of the
// same view still held panics, and releases nothing: releasing another
// holder's reference would unmap the snapshots under its reads.
func (v *View) Unpin() {
	for {
		n := v.pins.Load()
		if n <= 0 {
			panic("multitree: View.Unpin without a Pin held")
		}
		if v.pins.CompareAndSwap(n, n-1) {
			v.st.gen.release()
			return
		}
	}
}

// SnapshotVersions returns the versions of the complete snapshot
// directories in dir, ascending, as the database lists them: a snapshot
// directory linked back under its name (one moved to another disk) counts,
// a link whose target is gone or a name that is not a snapshot's does not.
// It takes no lock; beside a writer the list can change at any moment.
// Where an import's swap was interrupted between its two renames, it lists
// the database the next writable open moves to dir (see Options.ReadOnly).
func SnapshotVersions(dir string) ([]int64, error) {
	if err := checkDirPath(dir); err != nil {
		return nil, err
	}
	return listSnapshots(swapSource(dir))
}

// LatestVersion returns the version Open would open dir at without a
// TargetVersion: the newest of the current snapshot and the log, or the
// target of an unfinished rollback. It reads the current pointer, the
// rollback file and the log's tail, maps nothing and takes no lock, so it
// may be called while a writer has the database open. A directory without
// a database has version 0, unless an import was interrupted while it
// swapped a database in: then it is the version of the database the next
// writable Open moves in (see ImportOptions.Replace). A directory that lost
// its current pointer, which Open refuses, fails with ErrCorrupt, and one
// holding an unfinished import (see ImportOptions.Finish) with
// ErrUnfinishedImport.
//
// A writer that switches snapshots or rolls back meanwhile makes it read
// again, up to besideWriterAttempts times, then fail with ErrBusy: the
// current pointer, the rollback file and the log are read at different
// moments, and only a read that no such change straddles is consistent.
func LatestVersion(dir string) (_ int64, err error) {
	defer func() { err = asCorrupt(err) }() // as Open's
	if err := checkDirPath(dir); err != nil {
		return 0, err
	}
	for attempt := 1; ; attempt++ {
		before := snapshotState(dir)
		v, err := latestVersionOnce(dir)
		// a log segment gone between the log's listing and its open is
		// a prune's (which also runs at a commit that switches nothing)
		gone := errors.Is(err, fs.ErrNotExist) && attempt < besideWriterAttempts
		if snapshotState(dir) == before && !gone {
			return v, err
		}
		// a read straddling the writer's change, whatever it met (the
		// log's first segment pruned with snapshot 0, say), is read again
		if attempt == besideWriterAttempts {
			if err != nil {
				return 0, fmt.Errorf("%w: %s changed under each of %d reads of its latest version (the last failed: %v)", ErrBusy, dir, attempt, err)
			}
			return 0, fmt.Errorf("%w: %s changed under each of %d reads of its latest version", ErrBusy, dir, attempt)
		}
	}
}

// latestVersionReadCurrent, when set (by tests), is called by each read of
// LatestVersion once it has read dir's current pointer.
var latestVersionReadCurrent func(dir string)

func latestVersionOnce(dir string) (int64, error) {
	current, err := readCurrent(dir)
	if err == nil && latestVersionReadCurrent != nil {
		latestVersionReadCurrent(dir)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if from := swapSource(dir); from != dir {
				return latestVersionOnce(from)
			}
			// no database, unless it lost its current pointer
			return 0, refuseOrphaned(dir)
		}
		return 0, err
	}
	if err := refuseUnfinished(dir); err != nil {
		return 0, err
	}
	pending, err := readRollback(dir)
	if err != nil {
		return 0, err
	}
	// the log as Open reads it: a missing log directory is damage, and
	// damage after an unfinished rollback's target is the rollback's cut
	// of the log, interrupted (see Options.Discarding)
	if err := checkLogDir(dir); err != nil {
		return 0, err
	}
	walDir := filepath.Join(dir, walDirName)
	log, err := wal.Open(walDir, wal.Options{ReadOnly: true, Discarding: pending})
	if err != nil {
		return 0, err
	}
	last, first := log.LastVersion(), log.FirstVersion()
	if err := log.Close(); err != nil {
		return 0, err
	}
	if current == 0 {
		// read after the log, as Open (the first commit writes it
		// before its entry)
		rec, err := readFirst(dir)
		if err != nil {
			return 0, err
		}
		if first != 0 && rec != 0 && first != rec {
			return 0, firstSegmentMissing(dir, first, rec)
		}
	}
	if latest := max(current, last); pending == 0 || pending >= latest {
		return latest, nil
	}
	return pending, nil // an unfinished rollback's target (Options.Rollback)
}

// canonicalEntry returns e with its change sets grouped by store, in store
// name order, each store's pairs in their original order. Two entries with
// the same canonical form produce the same trees: the order of changes
// across stores does not matter, only within a store. The SDK writes a
// block's stores in map order (cachemulti.Store.Write), so a re-executed
// block reaches the database with its stores in another order. Change sets
// without pairs change nothing and are left out. The stores an upgrade adds
// or deletes are sorted too (the deletions apply first, then the renames
// in order, then the additions, so neither list's order matters), and so
// are the renames when their order cannot matter (canonicalRenames).
func canonicalEntry(e wal.Entry) wal.Entry {
	byStore := map[string][]wal.KVPair{}
	var names []string
	for _, cs := range e.ChangeSets {
		if len(cs.Pairs) == 0 {
			continue
		}
		if _, ok := byStore[cs.Name]; !ok {
			names = append(names, cs.Name)
		}
		byStore[cs.Name] = append(byStore[cs.Name], cs.Pairs...)
	}
	sort.Strings(names)
	out := e
	out.Upgrades.Added = slices.Sorted(slices.Values(e.Upgrades.Added))
	out.Upgrades.Deleted = slices.Sorted(slices.Values(e.Upgrades.Deleted))
	out.Upgrades.Renamed = canonicalRenames(e.Upgrades.Renamed)
	out.ChangeSets = make([]wal.ChangeSet, len(names))
	for i, name := range names {
		out.ChangeSets[i] = wal.ChangeSet{Name: name, Pairs: coalescedPairs(byStore[name])}
	}
	return out
}

// coalescedPairs returns pairs with each Set of a key whose last pair
// before it is a Set given to that earlier pair (which takes its value),
// as DB.Set logs them: both make the same tree, since the later Set only
// changes the value of the leaf the earlier one wrote.
func coalescedPairs(pairs []wal.KVPair) []wal.KVPair {
	out := make([]wal.KVPair, 0, len(pairs))
	last := make(map[string]int, len(pairs))
	for _, p := range pairs {
		if i, ok := last[string(p.Key)]; ok && !p.Delete && !out[i].Delete {
			out[i].Value = p.Value
			continue
		}
		last[string(p.Key)] = len(out)
		out = append(out, p)
	}
	return out
}

// canonicalRenames returns renames sorted by old name when no rename's new
// name is another's old name: each then moves a store the others leave
// alone, and their order changes nothing. Otherwise (a chain such as a->b,
// b->c) they stay in the order given, which is the order they apply in.
func canonicalRenames(r []wal.RenamedStore) []wal.RenamedStore {
	if len(r) < 2 {
		return r
	}
	olds := make(map[string]bool, len(r))
	for _, x := range r {
		olds[x.OldName] = true
	}
	for _, x := range r {
		if olds[x.NewName] {
			return r
		}
	}
	out := slices.Clone(r)
	slices.SortFunc(out, func(a, b wal.RenamedStore) int {
		return cmp.Or(strings.Compare(a.OldName, b.OldName), strings.Compare(a.NewName, b.NewName))
	})
	return out
}

// StoreNamesAt returns the stores of version, sorted: the last committed
// version's (also for version 0), an older version's (rebuilt as ViewAt does), or, for a writer
// opened at an older version (TargetVersion), a later version the log
// holds, from the store upgrades the log records after the open version.
func (db *DB) StoreNamesAt(version int64) (_ []string, err error) {
	defer func() { err = asCorrupt(err) }()
	info := db.LastCommitInfo()
	if info == nil {
		return nil, ErrClosed
	}
	cur := info.Version
	if version < cur {
		v, err := db.ViewAt(version)
		if err != nil {
			return nil, err
		}
		defer v.Release()
		return v.StoreNames(), nil
	}
	stores := map[string]string{} // as upgradeOrigins applies upgrades
	for _, si := range info.StoreInfos {
		stores[si.Name] = ""
	}
	if version > cur {
		if db.rollbackTo > 0 && version > db.rollbackTo {
			// the log's later versions are the ones the rollback discards
			return nil, fmt.Errorf("%w: %d is after %d, the target of an unfinished rollback", ErrVersion, version, db.rollbackTo)
		}
		if last := db.log.LastVersion(); version > last {
			return nil, fmt.Errorf("%w: %d is after the log's last version %d", ErrVersion, version, last)
		}
		err := db.log.Replay(cur+1, version, func(e wal.Entry) (err error) {
			stores, err = upgradeOrigins(stores, e.Upgrades)
			return err
		})
		if errors.Is(err, wal.ErrClosed) {
			return nil, fmt.Errorf("%w: %w", ErrClosed, err) // by Close, meanwhile
		}
		if err != nil {
			return nil, err
		}
	}
	return slices.Sorted(maps.Keys(stores)), nil
}

// RollbackTarget returns the target of the unfinished rollback that a
// read-only Open stopped at (see Options.Rollback), 0 if none: the version
// the database is at until a writable Open finishes the rollback. A
// record of a rollback whose target is the latest version is finished.
func (db *DB) RollbackTarget() int64 { return db.rollbackTo }

// UnfinishedRollback returns the target of the rollback that the database
// in dir has begun and not finished (see Options.Rollback), 0 when there is
// none: every Open stops at that version, and the next writable Open
// discards the log's later entries. It reads one small file and takes no
// lock.
func UnfinishedRollback(dir string) (int64, error) {
	if err := checkDirPath(dir); err != nil {
		return 0, err
	}
	return readRollback(dir)
}
