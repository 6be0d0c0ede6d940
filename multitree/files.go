package multitree

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// syncDir fsyncs a directory so that renames and removals in it are durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// mkdirDurable creates dir, with missing parents, and makes the entry of
// each directory it created durable in its parent; an existing dir is left
// as it is. A dir that is a symbolic link to a missing path (a data
// directory linked to another disk before its first start) is created at
// the link's target.
func mkdirDurable(dir string) error {
	dir = osfile.FollowDangling(filepath.Clean(dir))
	var missing []string // dir and its missing parents, innermost first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- { // outermost first
		if err := syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic replaces dir/name with data: it writes a temporary file,
// fsyncs it, renames it into place and fsyncs dir.
func writeFileAtomic(dir, name string, data []byte) error {
	if err := writeFileReplace(dir, name, data); err != nil {
		return err
	}
	return syncDir(dir)
}

// writeFileReplace is writeFileAtomic without the fsync of dir: the new
// file is whole when it appears, but a power loss may bring the old one
// back.
func writeFileReplace(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// lockFileOpened, when set, runs in lockDir between the open of the lock
// file and its flock.
var lockFileOpened func(path string)

// lockDir takes the writer's lock on dir/LOCK.
//
// The lock is on the file that path names once it is held: a holder that
// removes the file (a failed import gives up the directory it made, or the
// lock file it created) may have done so between this open and its flock,
// leaving a lock on a file no other process can find; lockDir then opens
// the path again.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	for tries := 0; ; tries++ {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		if h := lockFileOpened; h != nil {
			h(path)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s", ErrLocked, path)
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		held, err := f.Stat()
		if err != nil {
			unlockDir(f)
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		named, err := os.Stat(path)
		if err == nil && os.SameFile(held, named) {
			return f, nil
		}
		unlockDir(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if tries == 100 {
			return nil, fmt.Errorf("lock %s: the file is removed each time it is locked", path)
		}
	}
}

func unlockDir(f *os.File) error {
	if f == nil {
		return nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}

// listSnapshots returns the versions of the complete snapshot directories in
// dir, ascending.
func listSnapshots(dir string) ([]int64, error) {
	out, _, err := scanSnapshots(dir)
	return out, err
}

// scanSnapshots returns the versions of the complete snapshot directories in
// dir, ascending, and the first snapshot linked back under its name whose
// target cannot be read as a directory (nil if none), which the versions
// leave out.
func scanSnapshots(dir string) (_ []int64, broken error, _ error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []int64
	for _, e := range ents {
		v, ok := parseSnapshotDirName(e.Name())
		if !ok {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			// a snapshot moved to another disk and linked back: the
			// opens read through the link, and so does the listing
			// (a prune removes the link)
			path := filepath.Join(dir, e.Name())
			fi, err := os.Stat(path)
			ok = err == nil && fi.IsDir()
			if !ok && broken == nil {
				if err == nil {
					err = errors.New("not a directory")
				}
				target, _ := os.Readlink(path)
				broken = fmt.Errorf("snapshot %s links to %s, which cannot be read: %w", e.Name(), target, err)
			}
		} else {
			ok = e.IsDir()
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, broken, nil // ReadDir sorts by name, and names sort by version
}

// maxReadFile bounds what readRegularFile reads: far more than any
// metadata, marker or count file of a database holds.
const maxReadFile = 64 << 20

// readRegularFile reads the file at path, which must be a regular file
// of at most maxReadFile bytes: anything else (a FIFO, which would block
// the read forever, a device, a directory) is ErrCorrupt. A missing file
// is an error wrapping fs.ErrNotExist, as from os.ReadFile.
func readRegularFile(path string) ([]byte, error) {
	b, err := osfile.ReadRegular(path, maxReadFile)
	if errors.Is(err, osfile.ErrNotRegular) || errors.Is(err, osfile.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return b, err
}

func readCurrent(dir string) (int64, error) {
	path := filepath.Join(dir, currentFileName)
	b, err := readRegularFile(path)
	if err != nil {
		if ferr := referenceLayout(dir); ferr != nil {
			return 0, ferr
		}
		return 0, err
	}
	return decodeCurrent(path, b)
}

// referenceLayout returns ErrReferenceFormat when dir holds a database of
// the reference memiavl (github.com/crypto-org-chain/cronos/memiavl), whose
// "current" is a symbolic link to its snapshot directory, which holds a
// "__metadata" file; nil otherwise. This database's "current" is a regular
// file, and both default to the directory name memiavl.db in a node's
// home, so a node switched to this store without converting its data
// meets one.
func referenceLayout(dir string) error {
	cur := filepath.Join(dir, currentFileName)
	fi, err := os.Lstat(cur)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, err := os.Readlink(cur)
	if err != nil || !strings.HasPrefix(filepath.Base(target), "snapshot-") {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(dir, filepath.Base(target), "__metadata")); err != nil {
		return nil
	}
	d := filepath.Clean(dir)
	return fmt.Errorf("%w: %s (its current points at %s); convert it with 'memiavl import-memiavl <its directory> <new directory>', "+
		"and to keep its path move it aside first: mv %s %s.ref && memiavl import-memiavl %s.ref %s",
		ErrReferenceFormat, d, target, d, d, d, d)
}

// readRollback returns the target of the rollback that dir's "rollback"
// file records, 0 when there is none.
func readRollback(dir string) (int64, error) {
	return readSmallFile(dir, rollbackFileName, decodeRollback)
}

// readFirst returns the database's first version (of its first commit, or
// of its import) that dir's "first" file records, 0 when there is none.
func readFirst(dir string) (int64, error) {
	return readSmallFile(dir, firstFileName, decodeFirst)
}

// readRollbacks returns the count of rollbacks begun in dir that its
// "rollbacks" file records, 0 when there is none.
func readRollbacks(dir string) (uint64, error) {
	n, err := readSmallFile(dir, rollbacksName, decodeRollbacks)
	if errors.Is(err, ErrCorrupt) {
		// only a change counter: a writer does not need it
		err = fmt.Errorf("%w (read-only opens need this count of rollbacks; the next writable open replaces the file)", err)
	}
	return n, err
}

// readSmallFile decodes dir's small file name (see encodeSmall), the zero
// value when there is none.
func readSmallFile[T any](dir, name string, decode func(path string, b []byte) (T, error)) (T, error) {
	var zero T
	path := filepath.Join(dir, name)
	b, err := readRegularFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return zero, nil
	}
	if err != nil {
		return zero, err
	}
	return decode(path, b)
}

// countRollback adds one to the count of rollbacks begun in dir. A damaged
// count is replaced (repairRollbacks).
func countRollback(dir string) error {
	n, err := readRollbacks(dir)
	if errors.Is(err, ErrCorrupt) {
		return repairRollbacks(dir)
	}
	if err != nil {
		return err
	}
	// only readers running beside compare the count, and none survives
	// a power loss: its rename need not be durable
	return writeFileReplace(dir, rollbacksName, encodeRollbacks(n+1))
}

// repairRollbacks replaces a damaged "rollbacks" file with a count no
// reader can hold: readers only compare the count for a change, and those
// that read the damaged file failed. The count is taken from the clock, so
// that it differs from whatever a reader read before the damage.
func repairRollbacks(dir string) error {
	return writeFileReplace(dir, rollbacksName, encodeRollbacks(uint64(time.Now().UnixNano())|1<<63))
}

// removeRollback removes dir's "rollback" file, durably.
func removeRollback(dir string) error {
	if err := os.Remove(filepath.Join(dir, rollbackFileName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(dir)
}

// removeSnapshotDir removes the snapshot directory of version v. It first
// renames it to a temporary name, so that a reader listing the snapshots
// (a historical view, a read-only open) sees it whole or not at all, never
// with some of its files gone; an interrupted removal leaves a temporary
// directory for removeLeftovers.
func removeSnapshotDir(dir string, v int64) error {
	path := filepath.Join(dir, snapshotDirName(v))
	gone := path + prunedSuffix + tmpSuffix
	if err := os.RemoveAll(gone); err != nil { // an earlier removal's, interrupted
		return err
	}
	if err := os.Rename(path, gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	// the rename must be durable before the files go: a power loss could
	// otherwise keep the removals inside and lose the rename, leaving a
	// snapshot in part under its own name
	if err := syncDir(dir); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// removeSnapshotsBefore removes the snapshot directories of versions
// below v and makes the removal durable. A prune removing the same ones
// meanwhile is harmless: removeSnapshotDir passes over a directory gone.
func removeSnapshotsBefore(dir string, v int64) (removed []int64, err error) {
	versions, err := listSnapshots(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range versions {
		if s < v {
			if err := removeSnapshotDir(dir, s); err != nil {
				return removed, err
			}
			removed = append(removed, s)
		}
	}
	if len(removed) > 0 {
		return removed, syncDir(dir)
	}
	return nil, nil
}

// removeLeftovers deletes what interrupted writes left behind: temporary
// files and directories, and snapshot directories newer than current (a
// rollback's too), each through removeSnapshotDir, so that an interrupted
// removal never leaves one in part under its own name.
func removeLeftovers(dir string, current int64) error {
	var newer []int64
	err := removeEntries(dir, func(name string) bool {
		if v, isSnap := parseSnapshotDirName(name); isSnap && v > current {
			newer = append(newer, v)
			return false
		}
		return ownTemporary(name)
	})
	if err != nil || len(newer) == 0 {
		return err
	}
	for _, v := range newer {
		if err := removeSnapshotDir(dir, v); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// ownTemporary reports whether name is a temporary entry the database
// writes in its directory: a snapshot directory written or being removed,
// or the temporary file of current, rollback or rollbacks. Other names
// ending in ".tmp" are someone else's and stay.
func ownTemporary(name string) bool {
	base, ok := strings.CutSuffix(name, tmpSuffix)
	if !ok {
		return false
	}
	if _, isSnap := parseSnapshotDirName(strings.TrimSuffix(base, prunedSuffix)); isSnap {
		return true
	}
	switch base {
	case currentFileName, rollbackFileName, rollbacksName, firstFileName:
		return true
	}
	return false
}

// orphanedState describes what makes dir, which has no current pointer,
// more than an interrupted create or import leaves there: a snapshot
// directory other than snapshot 0, or a log with entries, without the
// import marker (importFileName) that says an interrupted import wrote
// them. Such a directory is a database that lost its current pointer:
// creating a database there would remove its snapshots and replay its log
// onto empty trees, and an import would remove both. It returns "" when
// dir holds nothing of the kind (or does not exist).
func orphanedState(dir string) (string, error) {
	// the marker is a regular file (writeMarker); an entry of that name
	// that is not one says nothing of whose the files are
	if fi, err := os.Lstat(filepath.Join(dir, importFileName)); err == nil && fi.Mode().IsRegular() {
		return "", nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	versions, err := listSnapshots(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var found []string
	for _, v := range versions {
		if v != 0 {
			found = append(found, snapshotDirName(v))
		}
	}
	walDir := filepath.Join(dir, walDirName)
	if _, err := os.Lstat(walDir); err == nil {
		log, err := wal.Open(walDir, wal.Options{ReadOnly: true})
		if err != nil {
			found = append(found, fmt.Sprintf("a log that cannot be read (%v)", err))
		} else {
			if last := log.LastVersion(); last != 0 {
				found = append(found, fmt.Sprintf("a log of versions %d..%d", log.FirstVersion(), last))
			}
			_ = log.Close()
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return strings.Join(found, ", "), nil
}

// refuseOrphaned fails with ErrCorrupt when dir, which has no current
// pointer, holds a database's state (see orphanedState).
func refuseOrphaned(dir string) error {
	what, err := orphanedState(dir)
	if err != nil || what == "" {
		return err
	}
	if exists, _ := hasDatabase(dir); exists {
		// an import (a reader's open does not hold the lock) wrote
		// current and removed its marker meanwhile
		return nil
	}
	return fmt.Errorf("%w: %s has no %s file but holds %s: a database that lost its %s file (restore it, or move the directory away)",
		ErrCorrupt, dir, currentFileName, what, currentFileName)
}

// writeImportMarker makes the import marker of dir (see importFileName)
// exist, durably: an empty file, so that it can be made on a full disk,
// where giving a database up must still work. An existing marker keeps its
// content.
func writeImportMarker(dir string) error { return writeMarker(dir, nil) }

// finishingMarker is the content of the import marker of an import with a
// Finish step (see ImportOptions.Finish): until the marker is removed, the
// database it wrote is not the import's result, and Open refuses it
// (ErrUnfinishedImport). An empty marker, with current written, is an
// import stopped after it completed, whose database stands.
var finishingMarker = []byte("finishing\n")

// writeMarker makes the import marker of dir with the given content,
// durably (an existing one keeps its content when content is nil).
func writeMarker(dir string, content []byte) error {
	path := filepath.Join(dir, importFileName)
	flags := os.O_CREATE | os.O_WRONLY
	if content != nil {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(dir)
}

// unfinishedImport reports whether dir holds the marker of an import whose
// Finish step has not completed (see finishingMarker). A marker with other
// content than that or nothing counts as one too: only damage gives it
// other bytes (it is written before anything of the database), most
// likely to finishingMarker's, and a database that may lack its Finish
// step must not be taken for the import's result.
func unfinishedImport(dir string) (bool, error) {
	b, err := readImportMarker(dir)
	return len(b) > 0, err
}

// readImportMarker returns the content of dir's import marker, nil if it
// has none.
func readImportMarker(dir string) ([]byte, error) {
	b, err := readRegularFile(filepath.Join(dir, importFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// refuseUnfinished fails with ErrUnfinishedImport when dir holds the
// database of an import whose Finish step has not completed, also with
// ErrCorrupt when the marker saying so is damaged.
func refuseUnfinished(dir string) error {
	b, err := readImportMarker(dir)
	if err != nil || len(b) == 0 {
		return err
	}
	if path := filepath.Join(dir, importFileName); !bytes.Equal(b, finishingMarker) {
		return fmt.Errorf("%w (%w: %s holds %q, not %q): %s holds the database of an import that may not have finished: run the import again, or remove the database (RemoveDatabase, or delete the directory)",
			ErrUnfinishedImport, ErrCorrupt, path, b, finishingMarker, dir)
	}
	return fmt.Errorf("%w: %s holds the database of an import that was interrupted before it finished (its %s file says so): run the import again, or remove the database (RemoveDatabase, or delete the directory)",
		ErrUnfinishedImport, dir, importFileName)
}

// removeImportMarker removes the import marker of dir (see
// importFileName), if there is one, durably.
func removeImportMarker(dir string) error {
	err := os.Remove(filepath.Join(dir, importFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// removeEntries removes the entries of dir whose names match, and fsyncs dir
// if it removed any.
func removeEntries(dir string, match func(name string) bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	changed := false
	for _, e := range ents {
		if match(e.Name()) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
			changed = true
		}
	}
	if changed {
		return syncDir(dir)
	}
	return nil
}
