package multitree

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// VerifyReport summarizes a successful Verify.
type VerifyReport struct {
	Version         int64    // latest version
	AppHash         []byte   // its app hash
	Snapshots       []int64  // kept snapshot versions, all verified (one a writer pruned meanwhile is left out)
	Stores          []string // stores at the latest version
	WALFirst        int64    // first and last version of the log
	WALLast         int64
	CheckedReplayed bool // the replayed trees were checked node by node
	// WALTornTail, when set, is a torn tail at the end of the log, left in
	// place: the interrupted append of a version after WALLast, or a
	// damaged last record, which looks the same. The next writable Open
	// truncates it.
	WALTornTail *wal.TornTail
	// RollbackTo, when not 0, is the target of a rollback that was
	// interrupted: Version is that target, and the next writable Open
	// finishes the rollback (Options.Rollback).
	RollbackTo int64
}

// Verify checks a database directory without modifying it: every kept
// snapshot's file checksums and tree structure (heights, balance, sizes, key
// order, every hash), each snapshot's metadata against its trees' roots, the
// log's checksums and version continuity from the oldest kept snapshot on,
// each kept snapshot but the newest rolled forward through the log to the
// next one's stores and root hashes (a replay of the log between them, as
// a ViewAt of the next one's version from it), and the latest version's
// trees node by node after replay. A snapshot
// linked back under its name whose target cannot be read is reported as
// ErrCorrupt. The first
// problem is returned as an error naming the file and offset where known.
//
// A writer may run beside it, switching to new snapshots and pruning old
// ones and the log before them. A snapshot pruned while it is checked is
// left out, and the log's reach is checked against the snapshots listed
// after it. A check that still fails while the writer changed the
// directory is run again (retryBesideWriter): a directory that changes
// under the check is not reported as damaged (ErrBusy if the writer removed
// files under every attempt), nor one that an import's swap replaced while
// it was checked (it checks the new database). Where an import's swap was interrupted
// between its two renames, it checks the database the next writable open
// moves to dir (see Options.ReadOnly).
func Verify(dir string) (_ *VerifyReport, err error) {
	defer func() { err = asCorrupt(err) }() // damage any layer finds, as Open's
	if err := checkDirPath(dir); err != nil {
		return nil, err
	}
	// an import interrupted while it swapped in a database leaves it
	// beside dir until a writable open finishes the swap
	return retryBesideWriter(dir, func() (*VerifyReport, error) {
		return sameDirAcross(swapSource(dir), verifyOnce, nil)
	})
}

// errDirReplaced: the directory a reader read was replaced by another (an
// import's swap) while it read, so that what it read may come from two
// databases; retryBesideWriter reads again.
var errDirReplaced = errors.New("multitree: the directory was replaced while it was read")

// dirIdentity is the device and inode of the directory at a path.
type dirIdentity struct{ dev, ino uint64 }

func identityOf(path string) (dirIdentity, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return dirIdentity{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirIdentity{}, false
	}
	return dirIdentity{dev: uint64(st.Dev), ino: st.Ino}, true
}

// sameDirAcross calls read(dir) and fails it with errDirReplaced (after
// release of what it returned, if release is set) when the directory at
// dir is another one afterwards than before: an import's swap exchanges
// whole directories (see ImportOptions.Replace), and a reader that opens
// the files of one by path, one after the other, may have read some from
// each: the current pointer and a snapshot of the old database and the
// log of the new one, say, whose replay then gives a state neither held,
// or a snapshot's metadata from one and its trees from the other, which
// reads as damage. (A directory whose inode number is reused by a second
// swap within the one read would go unseen.)
func sameDirAcross[T any](dir string, read func(string) (T, error), release func(T)) (T, error) {
	before, ok := identityOf(dir)
	v, err := read(dir)
	if !ok {
		return v, err // no directory there to begin with: read said why
	}
	if after, ok := identityOf(dir); ok && after == before {
		return v, err
	}
	if err == nil && release != nil {
		release(v)
	}
	var zero T
	if err != nil {
		return zero, fmt.Errorf("%w (%s): the read failed: %v", errDirReplaced, dir, err)
	}
	return zero, fmt.Errorf("%w (%s)", errDirReplaced, dir)
}

// pruned reports whether the snapshot of version v is no longer listed
// (false if the directory cannot be read).
func pruned(dir string, v int64) bool {
	versions, err := listSnapshots(dir)
	return err == nil && !slices.Contains(versions, v)
}

// dirState is what a reader beside the writer compares before and after it
// reads (snapshotState): the current snapshot's version, the kept ones,
// the target of a rollback under way and the count of rollbacks begun.
type dirState struct {
	ok        bool // false if the state could not be read
	current   int64
	versions  string
	rollback  int64
	rollbacks uint64
}

// snapshotState returns dir's dirState.
func snapshotState(dir string) dirState {
	cur, err := readCurrent(dir)
	if err != nil {
		return dirState{}
	}
	versions, err := listSnapshots(dir)
	if err != nil {
		return dirState{}
	}
	rollback, err := readRollback(dir)
	if err != nil {
		return dirState{}
	}
	rollbacks, err := readRollbacks(dir)
	if err != nil {
		return dirState{}
	}
	return dirState{ok: true, current: cur, versions: fmt.Sprint(versions), rollback: rollback, rollbacks: rollbacks}
}

// besideWriterAttempts bounds the attempts of a reader that a writer
// beside it keeps moving (retryBesideWriter, loadVersion).
const besideWriterAttempts = 8

// retryBesideWriter calls try, a reader of dir, and calls it again when it
// fails and a writer has changed dir meanwhile: the current snapshot, the
// kept ones or the count of rollbacks differ from before the call
// (snapshotState), a rollback was under way (it cuts the log back under
// the reader; the next attempt then waits a little, longer each time)
// unless the call refused what it was asked (ErrVersion, ErrNotFound,
// ErrInvalidOptions), or a file the call listed is gone (the prune of log
// segments the snapshot holds). It returns the results of the call that
// succeeded or of the first one that failed with nothing changed. When the
// last of besideWriterAttempts calls failed while a rollback was under way
// or had begun, or on a missing file (fs.ErrNotExist) while the writer
// switched or pruned snapshots, it returns ErrBusy, with that failure as
// text only: the writer changed or removed what the call read, nothing is
// damaged. Any other last failure, and any failure when the directory
// looks the same as before the first call (a rollback file that an
// interrupted rollback left, with no writer to finish it), is returned as
// it is. A call that fails with errDirReplaced (an import swapped another
// database in under it, see sameDirAcross) is made again too, whatever it
// met, and ErrBusy ends the last attempt.
func retryBesideWriter[T any](dir string, try func() (T, error)) (T, error) {
	var first dirState
	for attempt := 1; ; attempt++ {
		before := snapshotState(dir)
		if attempt == 1 {
			first = before
		}
		v, err := try()
		if err == nil {
			return v, nil
		}
		if errors.Is(err, errDirReplaced) {
			// an import swapped another database in under the call
			if attempt == besideWriterAttempts {
				return v, fmt.Errorf("%w: %s was replaced under each of %d attempts: %v", ErrBusy, dir, attempt, err)
			}
			continue
		}
		after := snapshotState(dir)
		gone := errors.Is(err, fs.ErrNotExist)
		// The rollback file is written before the count, and removed
		// once the log is cut back: a call that overlapped the cut saw
		// the file before or after, or the count change. A refusal of
		// what was asked is not the cut's doing unless the state moved.
		underway := before.rollback > 0 || after.rollback > 0
		refusal := errors.Is(err, ErrVersion) || errors.Is(err, ErrInvalidOptions) || errors.Is(err, ErrNotFound)
		rolling := after.rollbacks != before.rollbacks || underway && !refusal
		// dir gone under the call: an import's first rename of its swap
		// (the next attempt reads the database beside it)
		midSwap := !after.ok && swapSource(dir) != dir
		if !midSwap && (!after.ok || after == before && !gone && !rolling) {
			return v, err
		}
		if attempt == besideWriterAttempts {
			if after == first || !rolling && (after == before || !gone) {
				// nothing moved (a rollback file left by an
				// interrupted rollback, with no writer to finish it),
				// a missing file with no switch or prune seen (the
				// prune of log segments, or damage), or a failure a
				// writer does not cause (the files it removes are
				// missing, never changed)
				return v, err
			}
			return v, fmt.Errorf("%w: %s changed under each of %d attempts, the last failed on what it changed: %v", ErrBusy, dir, attempt, err)
		}
		if underway {
			// give the rollback time to finish: 20 ms, then twice as
			// long each attempt (2.5 s in all)
			time.Sleep(20 * time.Millisecond << (attempt - 1))
		}
	}
}

func verifyOnce(dir string) (*VerifyReport, error) {
	if err := referenceLayout(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, currentFileName)); err != nil {
		if rerr := refuseOrphaned(dir); rerr != nil {
			return nil, rerr
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, dir, err)
	}
	// a snapshot linked back whose target is gone is a kept snapshot
	// missing (a disk not mounted, a target removed by hand)
	versions, broken, err := scanSnapshots(dir)
	if err != nil {
		return nil, err
	}
	if broken != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, broken)
	}
	rep := &VerifyReport{}
	for _, v := range versions {
		gen, _, err := openGeneration(dir, v)
		if err == nil {
			err = gen.verify()
			gen.release()
			if errors.Is(err, snapshot.ErrCorrupt) {
				err = fmt.Errorf("%w: snapshot %s: %w", ErrCorrupt, snapshotDirName(v), err)
			} else if err != nil {
				err = fmt.Errorf("snapshot %s: %w", snapshotDirName(v), err)
			}
		}
		if err != nil {
			if pruned(dir, v) { // by a writer, meanwhile
				continue
			}
			return rep, err
		}
		rep.Snapshots = append(rep.Snapshots, v)
	}
	// the snapshots are verified above, the checksums among the rest
	// open, not Open: Verify already starts again beside a writer
	db, err := open(dir, Options{ReadOnly: true, SnapshotInterval: -1, ViewCacheSize: -1, OpenCheck: OpenCheckNone})
	if err != nil {
		return rep, err
	}
	defer db.Close()
	rep.WALFirst, rep.WALLast = db.log.FirstVersion(), db.log.LastVersion()
	rep.RollbackTo = db.rollbackTo
	if tt, ok := db.log.TornTail(); ok {
		rep.WALTornTail = &tt
	}
	// every record's checksum and the versions' continuity
	if err := db.log.Verify(); err != nil {
		return rep, err
	}
	// The log must reach back to the oldest kept snapshot. A writer
	// removes a snapshot before the log it holds, so the snapshots are
	// listed again after the log was: a prune in between can then only
	// make the oldest one newer, never report a gap that is not there.
	if versions, err = listSnapshots(dir); err != nil {
		return rep, err
	}
	if len(versions) > 0 && rep.WALLast > versions[0] && rep.WALFirst > versions[0]+1 && versions[0] != 0 {
		return rep, fmt.Errorf("%w: log starts at %d, oldest kept snapshot is %d", ErrCorrupt, rep.WALFirst, versions[0])
	}
	if len(versions) > 1 && versions[0] == 0 && rep.WALFirst > 1 {
		// The empty snapshot 0 is followed by the database's first
		// version, which its initial version (SetInitialVersion, not
		// recorded with snapshot 0) may put later than 1: the log after
		// snapshot 0 may start later. A newer snapshot records the
		// initial version the database had when it was written.
		path, m, err := readSnapshotMetadata(dir, versions[1])
		if err != nil {
			if pruned(dir, versions[1]) {
				return rep, fmt.Errorf("snapshot %d was removed while it was verified: %w", versions[1], err)
			}
			return rep, err
		}
		if first := max(m.InitialVersion, 1); rep.WALFirst > first && rep.WALLast >= first {
			return rep, fmt.Errorf("%w: log starts at %d, but snapshot 0 is kept and the first version is %d (%s)", ErrCorrupt, rep.WALFirst, first, path)
		}
	}
	// Each kept snapshot but the newest is tied to the history: rolled
	// forward through the log, it must give the next one's trees, as a
	// ViewAt of a version between them does. Without it an older
	// snapshot whose files are sound but whose trees are not the
	// committed ones (a store left out of its metadata, a tree written
	// wrong and hashed anew) would serve those versions' reads.
	for i := 0; i+1 < len(versions); i++ {
		base, next := versions[i], versions[i+1]
		if next > db.Version() || next > rep.WALLast {
			// a rollback's leftover, or one its open removes; or a log
			// that ends before the next snapshot (a crash inside a
			// commit by snapshot, a relaxed fsync policy's lost tail):
			// the next writable open removes the older snapshots
			break
		}
		if err := db.checkSnapshotChain(base, next); err != nil {
			if pruned(dir, base) || pruned(dir, next) { // by a writer, meanwhile
				continue
			}
			return rep, err
		}
	}
	view, err := db.View()
	if err != nil {
		return rep, err
	}
	defer view.Release()
	rep.Version = view.Version()
	rep.AppHash = view.CommitInfo().Hash()
	rep.Stores = view.StoreNames()
	for _, name := range rep.Stores {
		if err := view.Tree(name).Check(); err != nil {
			return rep, fmt.Errorf("store %q at version %d: %w", name, rep.Version, err)
		}
	}
	rep.CheckedReplayed = true
	return rep, nil
}

// readSnapshotMetadata reads and decodes the metadata of the snapshot of
// version v in dir, and returns it with its path.
func readSnapshotMetadata(dir string, v int64) (string, *metadata, error) {
	path := filepath.Join(dir, snapshotDirName(v), metadataFileName)
	b, err := readRegularFile(path)
	if err != nil {
		return path, nil, err
	}
	m, err := decodeMetadata(path, b)
	return path, m, err
}

// checkSnapshotChain rebuilds version next from the kept snapshot base and
// the log, and compares its stores and root hashes with those snapshot next
// records in its metadata: an ErrCorrupt if they differ.
func (db *DB) checkSnapshotChain(base, next int64) error {
	path, m, err := readSnapshotMetadata(db.dir, next)
	if err != nil {
		return err
	}
	st, err := db.loadFrom(base, next)
	if err != nil {
		return fmt.Errorf("snapshot %s rolled forward to version %d: %w", snapshotDirName(base), next, err)
	}
	defer st.gen.release()
	got := st.info.StoreInfos // sorted by name, as the metadata's stores
	differ := func(what string) error {
		return fmt.Errorf("%w: snapshot %s rolled forward through the log to version %d does not give the trees snapshot %s records in %s: %s",
			ErrCorrupt, snapshotDirName(base), next, snapshotDirName(next), path, what)
	}
	if len(got) != len(m.Stores) {
		return differ(fmt.Sprintf("%d stores, %d recorded", len(got), len(m.Stores)))
	}
	for i, si := range got {
		if si.Name != m.Stores[i].Name {
			return differ(fmt.Sprintf("store %q where %q is recorded", si.Name, m.Stores[i].Name))
		}
		if !bytes.Equal(si.CommitId.Hash, m.Stores[i].Hash) {
			return differ(fmt.Sprintf("store %q has root hash %X, %X recorded", si.Name, si.CommitId.Hash, m.Stores[i].Hash))
		}
	}
	return nil
}

// VerifySnapshot checks the files of the snapshot the database works from
// (SnapshotVersion) as Verify checks each kept snapshot: every store's
// checksums and tree structure, with every hash recomputed. It reads the
// whole snapshot; commits and reads go on meanwhile. Every rewrite already
// checks the checksums of the files it copies from, so that it never puts
// damaged bytes under checksums of its own; VerifySnapshot also finds
// damage the checksums cannot (files written wrong), and the command-line
// rewrite-snapshot runs it before it writes and prunes. Errors wrap
// ErrCorrupt.
func (db *DB) VerifySnapshot() error {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	gen := db.mu.gen
	gen.acquire()
	db.mu.Unlock()
	defer gen.release()
	if err := gen.verify(); err != nil {
		return fmt.Errorf("%w: snapshot %s: %w", ErrCorrupt, snapshotDirName(gen.version), err)
	}
	return nil
}
