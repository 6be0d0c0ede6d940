package multitree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	storetypes "cosmossdk.io/store/types"
	"golang.org/x/sys/unix"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// stagingSuffix names the directory beside a database in which an import
// that replaces it is written.
const stagingSuffix = ".import.tmp"

// NodeSource yields the export stream of one tree (see memiavl.ExportNode):
// its nodes in post-order, then memiavl.ErrExportDone. A *memiavl.Exporter
// is a NodeSource.
type NodeSource interface {
	Next() (*memiavl.ExportNode, error)
}

// ImportOptions configure Import and NewImporter. The zero value imports
// exactly the stores given, into a directory that holds no database.
type ImportOptions struct {
	// InitialVersion is recorded as the database's initial version. It only
	// matters for an import at version 0, whose first commit it numbers.
	InitialVersion int64
	// Stores, when not empty, lists the stores of the imported database:
	// every imported store must be listed, and listed stores that are not
	// imported are created empty (hash sha256("")), as the SDK's rootmulti
	// store leaves a mounted store that a state-sync snapshot does not
	// mention.
	Stores []string
	// Concurrency is how many stores Import writes in parallel; 0 means
	// GOMAXPROCS.
	Concurrency int
	// Replace allows the import to replace a database in dir whose latest
	// version is 0 (nothing committed) or the imported version. The import
	// is then written beside dir (dir + ".import.tmp") and swapped in only
	// once complete and durable, so a failed import leaves the existing
	// database as it was (a swap that cannot be made durable is undone;
	// only when the undo fails as well does the error say that the
	// imported database is in place). The swap exchanges the two directories in one
	// rename (RENAME_EXCHANGE); on a file system without it, it moves dir
	// aside (dir + ".replaced.tmp") and the new database to dir, and an
	// interruption between those two renames is finished by the next
	// writable Open of dir or import into it. dir is replaced as a whole,
	// files other than the database's included. The existing database
	// must not be open for writing (its writer's lock refuses the
	// import); a read-only Open or Verify beside the swap reads one
	// database or the other, and a read-only DB opened before it keeps
	// serving the version it opened at (older ones it has not loaded are
	// then not found: the new database holds none).
	//
	// When dir is a mount point (a file system other than its parent's),
	// no directory beside it can be renamed over it: a database there at
	// version 0 is removed and the import written in place, as into a
	// directory without a database (an interruption leaves what a failed
	// import leaves, which the next import or writer Open with
	// CreateIfMissing clears; entries other than the database's stay),
	// and one at a committed version is refused with ErrExists.
	Replace bool
	// Check, when set, is called with the commit info of the imported
	// version once every tree is written, before the database is made
	// current: an error aborts the import (the caller compares the root
	// hashes with those it expects, for instance), and so does a panic,
	// which goes on. Check and Finish run inside Importer.Commit, which
	// holds the importer: they must not call its methods, which would
	// wait for Commit to return.
	Check func(info *storetypes.CommitInfo) error
	// Finish, when set, is a last step of the import: once the imported
	// version is complete and durable, the database is opened for writing
	// with FinishOptions (their CreateIfMissing, InitialStores, ReadOnly,
	// TargetVersion and Rollback are ignored) and handed to Finish, which
	// may commit versions after the imported one; it is then closed
	// (which makes the log durable, whatever its sync policy). The import
	// is complete only once Finish has returned nil and the database has
	// closed without error: a failure of either (or a panic of Finish,
	// which goes on) fails the import, which leaves what a failed import
	// leaves, and so does a process killed
	// during Finish (the next Open of dir fails with ErrUnfinishedImport
	// until an import into dir, or RemoveDatabase, removes what it left).
	// The import still returns the commit info of the imported version.
	Finish        func(db *DB) error
	FinishOptions Options
}

// finishOptions returns the options Finish's database is opened with,
// under the importer's lock.
func (o ImportOptions) finishOptions(lock *os.File) Options {
	fo := o.FinishOptions
	fo.CreateIfMissing, fo.InitialStores, fo.ReadOnly, fo.TargetVersion, fo.Rollback = false, nil, false, 0, false
	fo.importLock = lock
	return fo
}

func (o ImportOptions) validate(version int64) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case version < 0:
		return bad("negative import version %d", version)
	case version == math.MaxInt64:
		return bad("import version %d leaves no version to commit after it", version)
	case o.InitialVersion < 0:
		return bad("negative InitialVersion %d", o.InitialVersion)
	case o.Concurrency < 0:
		return bad("negative Concurrency %d", o.Concurrency)
	}
	if o.Finish != nil {
		if _, err := o.finishOptions(nil).withDefaults(); err != nil {
			return fmt.Errorf("FinishOptions: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, s := range o.Stores {
		if err := validateStoreName(s); err != nil {
			return err
		}
		if seen[s] {
			return bad("store %q listed twice in Stores", s)
		}
		seen[s] = true
	}
	return nil
}

// Import creates a new database in dir at version from one export stream
// per store (see NodeSource), written in parallel. The database has a
// snapshot at version holding the imported trees, its metadata, the current
// pointer and an empty log: Open then continues from version, and the next
// commit is version+1. It returns the commit info of version, whose Hash()
// is the app hash. A negative version, or math.MaxInt64 (after which no
// version could be committed), is refused with ErrInvalidOptions.
//
// dir must not hold a database (see ImportOptions.Replace); what an
// interrupted import left in it (snapshot directories, log segments, the
// temporary current pointer, the import marker) is removed first, and any
// other entry is left alone, except that a wal entry that is not a
// directory of log segments is refused (ErrExists). Snapshots (other than
// snapshot 0) or log entries without current and without the marker an
// import writes first are a database that lost its current pointer, and
// are refused (ErrCorrupt). A failed import leaves no database behind, and
// removes dir if it created it, with the parents it created that stay
// empty. Each source is read by one goroutine, up to opts.Concurrency
// sources at a time; when one fails the others stop early.
// Memory is bounded by the trees' heights: nodes go straight to the
// snapshot files.
func Import(dir string, version int64, sources map[string]NodeSource, opts ImportOptions) (*storetypes.CommitInfo, error) {
	return ImportContext(context.Background(), dir, version, sources, opts)
}

// ImportContext is Import, stopped when ctx is done: the stores' imports
// check ctx between nodes (every 1,024) and before the database is made
// current, and a stopped import fails with an error wrapping ctx.Err(),
// leaving what any failed import leaves (no database; a database it was to
// replace as it was). Once the database is being made current, the import
// finishes.
func ImportContext(ctx context.Context, dir string, version int64, sources map[string]NodeSource, opts ImportOptions) (_ *storetypes.CommitInfo, err error) {
	defer func() { err = asCorrupt(err) }()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("multitree: import stopped: %w", err)
	}
	names := make([]string, 0, len(sources))
	for name, src := range sources {
		if src == nil {
			return nil, fmt.Errorf("multitree: import of store %q: nil source", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	im, err := NewImporter(dir, version, opts)
	if err != nil {
		return nil, err
	}
	defer im.Close()
	conc := opts.Concurrency
	if conc == 0 {
		conc = runtime.GOMAXPROCS(0)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		failed atomic.Bool
		sem    = make(chan struct{}, conc)
	)
	for _, name := range names {
		src := sources[name]
		sem <- struct{}{}
		if failed.Load() {
			<-sem
			break
		}
		wg.Add(1)
		go func(name string, src NodeSource) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := im.importStore(ctx, name, src, &failed); err != nil {
				failed.Store(true)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(name, src)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("multitree: import stopped: %w", err)
	}
	return im.Commit()
}

func (im *Importer) importStore(ctx context.Context, name string, src NodeSource, stop *atomic.Bool) error {
	si, err := im.AddStore(name)
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		if i%1024 == 1023 {
			if stop.Load() {
				return fmt.Errorf("multitree: import of store %q stopped by another store's failure", name)
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("multitree: import of store %q stopped: %w", name, err)
			}
		}
		n, err := nextNode(src)
		if errors.Is(err, memiavl.ErrExportDone) {
			break
		}
		if err != nil {
			return fmt.Errorf("multitree: import of store %q: reading node %d: %w", name, i, err)
		}
		if err := si.Add(n); err != nil {
			return fmt.Errorf("multitree: import of store %q: %w", name, err)
		}
	}
	if err := si.Commit(); err != nil {
		return fmt.Errorf("multitree: import of store %q: %w", name, err)
	}
	return nil
}

// nextNode calls src.Next on an import goroutine, where a panic would take
// the process down with no chance for the caller to recover it: a source
// that panics fails its store's import instead, and the import removes what
// it wrote.
func nextNode(src NodeSource) (n *memiavl.ExportNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("the node source panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return src.Next()
}

// Importer creates a new database from export streams fed store by store,
// for callers that receive the stores one after another on one stream (a
// state-sync restore) or want to drive the trees themselves. Import is the
// convenience over it.
//
// AddStore may be called from several goroutines; each returned
// memiavl.Importer is fed by one. Commit writes the database; Close
// without a successful Commit removes everything written. Close may come
// from any goroutine: it waits for the store importers' running calls, and
// their later ones fail.
type Importer struct {
	dir       string // the database directory
	target    string // where the database is written: dir, or the staging directory
	version   int64
	opts      ImportOptions
	tmpSnap   string   // the snapshot directory being written
	lock      *os.File // on target
	existLock *os.File // on dir, when replacing a database there
	owned     bool     // target holds no database but what this import writes
	created   bool     // dir did not exist: a failed import removes it
	// createdLock: dir existed without a lock file, which a failed
	// import removes once lockOurs: no writer created a database in dir
	// between that look and the lock
	createdLock, lockOurs bool
	// createdExistLock: the database replaced had no lock file (a copied
	// directory, say); a failed import removes the one existLock made
	createdExistLock bool
	// createdTop is the outermost of dir and its parents that did not
	// exist either: a failed import removes those that stay empty
	createdTop string
	current    bool // the current pointer of target was written

	mu struct {
		sync.Mutex
		stores map[string]*memiavl.Importer
		done   bool // committed or closed
	}
}

// NewImporter starts the import of a database at version into dir. See
// Import for what is written and ImportOptions for an existing database.
func NewImporter(dir string, version int64, opts ImportOptions) (_ *Importer, err error) {
	if err := checkDirPath(dir); err != nil {
		return nil, err
	}
	if err := opts.validate(version); err != nil {
		return nil, err
	}
	if err := referenceLayout(dir); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrExists, err)
	}
	// the directory itself, so that the directories beside it are beside
	// it even for "." and through symbolic links (see besidePath)
	dir = osfile.RealDir(dir)
	im := &Importer{dir: dir, target: dir, version: version, opts: opts}
	im.mu.stores = map[string]*memiavl.Importer{}
	defer func() {
		if err != nil {
			im.abort()
		}
	}()
	if err := finishSwap(dir); err != nil {
		return nil, err
	}
	if err := clearUnfinished(dir); err != nil {
		return nil, err
	}
	staging := besidePath(dir, stagingSuffix)
	exists, err := hasDatabase(dir)
	if err != nil {
		return nil, err
	}
	if exists {
		if !opts.Replace {
			return nil, fmt.Errorf("%w: %s", ErrExists, dir)
		}
		_, err := os.Lstat(filepath.Join(dir, lockFileName))
		im.createdExistLock = errors.Is(err, fs.ErrNotExist)
		if im.existLock, err = lockDir(dir); err != nil {
			return nil, err
		}
		v, err := checkReplaceable(dir, version)
		if err != nil {
			return nil, err
		}
		if mounted, err := mountPoint(dir); err != nil {
			return nil, err
		} else if mounted {
			// A directory beside dir is on another file system, which
			// the swap's renames cannot cross: a database without a
			// committed version is removed and the import made in
			// place (what an interruption leaves, the next import or
			// writer Open with CreateIfMissing clears); one with a
			// committed version is not removed before the import is
			// complete, so it cannot be replaced.
			if v != 0 {
				return nil, fmt.Errorf("%w: %s is a mount point and its database is at version %d: an import replaces a database on a mount point only at version 0 (remove it first with RemoveDatabase)", ErrExists, dir, v)
			}
			if err := giveUp(dir); err != nil {
				return nil, err
			}
			im.releaseExistLock()
			exists = false
		}
	}
	if exists {
		// an earlier import's, or the database an exchange replaced:
		// removed under the lock on dir, which another import replacing
		// dir would hold
		if err := os.RemoveAll(staging); err != nil {
			return nil, err
		}
		im.target, im.owned = staging, true
	} else if err := removeStaging(staging); err != nil {
		return nil, err
	}
	if im.target == dir {
		if err := checkImportTarget(dir); err != nil {
			return nil, err
		}
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			im.created = true
			im.createdTop = filepath.Clean(dir)
			for d := filepath.Dir(im.createdTop); d != im.createdTop; d = filepath.Dir(d) {
				if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
					break
				}
				im.createdTop = d
			}
		}
	}
	if err := mkdirDurable(im.target); err != nil {
		return nil, err
	}
	if im.target == dir && !im.created {
		// a failure removes the lock file it creates (see abort)
		_, err := os.Lstat(filepath.Join(dir, lockFileName))
		im.createdLock = errors.Is(err, fs.ErrNotExist)
	}
	if im.lock, err = lockDir(im.target); err != nil {
		return nil, err
	}
	if im.target == dir {
		// checked again under the lock: a writer may have created it
		if exists, err := hasDatabase(dir); err != nil || exists {
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrExists, dir)
			}
			return nil, err
		}
		// no writer made a database (and its lock file) meanwhile
		im.lockOurs = true
		if err := checkImportTarget(dir); err != nil { // again, under the lock
			return nil, err
		}
		// a database that lost its current pointer is not an
		// interrupted import's leftovers (refused before the import
		// owns dir, which would have a failure remove them)
		if err := refuseOrphaned(dir); err != nil {
			return nil, err
		}
		im.owned = true
		if err := removeImportLeftovers(dir); err != nil {
			return nil, err
		}
	}
	// before anything of the database: see importFileName (and
	// finishingMarker)
	var marker []byte
	if opts.Finish != nil {
		marker = finishingMarker
	}
	if err := writeMarker(im.target, marker); err != nil {
		return nil, err
	}
	im.tmpSnap = filepath.Join(im.target, snapshotDirName(version)+tmpSuffix)
	if err := os.MkdirAll(im.tmpSnap, 0o755); err != nil {
		return nil, err
	}
	return im, nil
}

// clearUnfinished removes from dir the database of an import interrupted
// during its Finish step (see ErrUnfinishedImport), under the writer's
// lock: an import at work there holds it (ErrLocked).
func clearUnfinished(dir string) error {
	if unfinished, err := unfinishedImport(dir); err != nil || !unfinished {
		return err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlockDir(lock)
	if unfinished, err := unfinishedImport(dir); err != nil || !unfinished {
		return err
	}
	return giveUp(dir)
}

// removeStaging removes what a failed import left in the staging directory
// staging, unless an import at work there holds its lock.
func removeStaging(staging string) error {
	lock, err := lockDir(staging)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrLocked):
		return nil
	case err != nil:
		return err
	}
	defer unlockDir(lock)
	return os.RemoveAll(staging)
}

func hasDatabase(dir string) (bool, error) {
	_, err := os.Lstat(filepath.Join(dir, currentFileName))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// checkReplaceable accepts the database in dir for replacement by an import
// at version when its latest version is 0 or version, and returns that
// version. The caller holds the writer's lock.
func checkReplaceable(dir string, version int64) (int64, error) {
	db, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("%w: %s cannot be opened to check its version: %w", ErrExists, dir, err)
	}
	v := db.Version()
	if err := db.Close(); err != nil {
		return 0, err
	}
	if v != 0 && v != version {
		return 0, fmt.Errorf("%w: %s is at version %d; an import at version %d replaces only a database at version 0 or %d",
			ErrExists, dir, v, version, version)
	}
	return v, nil
}

// mountPoint reports whether dir is the root of a mount: a file system
// mounted on another one than its parent's, or (where the kernel says so)
// a bind mount of a directory of the same file system, which cannot be
// renamed or exchanged either.
func mountPoint(dir string) (bool, error) {
	var d, p unix.Stat_t
	if err := unix.Stat(dir, &d); err != nil {
		return false, &fs.PathError{Op: "stat", Path: dir, Err: err}
	}
	parent := filepath.Dir(dir)
	if err := unix.Stat(parent, &p); err != nil {
		return false, &fs.PathError{Op: "stat", Path: parent, Err: err}
	}
	return d.Dev != p.Dev || osfile.MountRoot(dir), nil
}

// removeImportLeftovers removes what an interrupted import may have left in
// a directory that holds no database: snapshot and temporary directories
// and the log (see importLeftover).
func removeImportLeftovers(dir string) error {
	// with the marker, the log directory is the removed database's or
	// the import's own, whatever it holds (see foreignLogDir)
	marked := hasImportMarker(dir)
	err := removeEntries(dir, func(name string) bool {
		return name != lockFileName && name != importFileName && (importLeftover(dir, name) || marked && name == walDirName)
	})
	if err != nil {
		return err
	}
	// last: until the rest is gone, it tells what the rest is
	return removeImportMarker(dir)
}

// giveUp removes the database in dir, whose lock the caller holds, so that
// an interruption leaves what an interrupted import leaves: the import
// marker is written (durably) before current is removed, and removed after
// the snapshots, the log and the database's other files (see
// importFileName).
func giveUp(dir string) error {
	if err := writeImportMarker(dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	// the whole log directory: the database's, whatever it holds
	if err := os.RemoveAll(filepath.Join(dir, walDirName)); err != nil {
		return err
	}
	return removeImportLeftovers(dir)
}

// RemoveDatabase removes the database in dir: its current pointer, then its
// snapshots, log and other files (the lock file stays), in an order that
// leaves an interrupted removal what an interrupted import leaves, which the
// next import or writer Open with CreateIfMissing clears. Entries of dir
// that are not the database's stay. It fails with ErrLocked while the
// database is open for writing, and with ErrNotFound, removing nothing,
// when dir holds no database and its log directory holds anything but log
// segments (so it is not a database's log).
func RemoveDatabase(dir string) error {
	if err := checkDirPath(dir); err != nil {
		return err
	}
	if err := referenceLayout(dir); err != nil {
		return err
	}
	// a replacing import interrupted beside it: finished first, or the
	// database it replaced would come back at the next open
	if err := finishSwap(dir); err != nil {
		return err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlockDir(lock)
	exists, err := hasDatabase(dir)
	if err != nil {
		return err
	}
	if !exists {
		if foreignLogDir(dir) {
			return fmt.Errorf("%w: %s holds no database, and its %s is not a log: nothing was removed", ErrNotFound, dir, walDirName)
		}
	}
	return giveUp(dir)
}

// checkImportTarget refuses a directory without a database whose log
// directory holds anything but log segments: the import would leave it for
// the new database to read as its log. Other entries that are not the
// database's are left alone.
func checkImportTarget(dir string) error {
	_, err := os.Lstat(filepath.Join(dir, walDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if foreignLogDir(dir) {
		return fmt.Errorf("%w: %s holds no database, and its %s is not a log: an import needs a new or empty directory", ErrExists, dir, walDirName)
	}
	return nil
}

// foreignLogDir reports whether dir, which holds no database, has a log
// directory that is not a database's: one holding anything but log
// segments, unless the import marker says that an interrupted import or
// removal left it (an import checks the directory before it writes the
// marker; a removal writes the marker before it removes the log, whatever
// the log directory held).
func foreignLogDir(dir string) bool {
	if hasImportMarker(dir) {
		return false
	}
	_, err := os.Lstat(filepath.Join(dir, walDirName))
	return err == nil && !importLeftover(dir, walDirName)
}

// importLeftover reports whether name, an entry of dir, is one an import
// or a database creates there: a snapshot directory (whole, temporary or
// being removed), the lock file, the temporary file of the current pointer,
// the rollback and rollbacks files (or their temporary files) of a database
// that was there, or a log directory holding only log segments.
func importLeftover(dir, name string) bool {
	if _, ok := parseSnapshotDirName(name); ok || ownTemporary(name) {
		return true
	}
	switch name {
	case lockFileName, rollbackFileName, rollbacksName, importFileName, firstFileName:
		return true
	case walDirName:
		// a directory (not a link) of segment files
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			return false
		}
		ents, err := os.ReadDir(filepath.Join(dir, name))
		if err != nil {
			return false
		}
		for _, e := range ents {
			if !wal.IsSegmentFile(e.Name()) {
				return false
			}
		}
		return true
	}
	return false
}

// Version returns the version being imported.
func (im *Importer) Version() int64 { return im.version }

// AddStore starts the import of store name and returns the importer of its
// tree: feed it the store's nodes and Commit it before the database's
// Commit. Each store is added once.
func (im *Importer) AddStore(name string) (*memiavl.Importer, error) {
	if err := validateStoreName(name); err != nil {
		return nil, err
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.mu.done {
		return nil, fmt.Errorf("multitree: importer is finished")
	}
	if _, ok := im.mu.stores[name]; ok {
		return nil, fmt.Errorf("%w: %q imported twice", ErrStoreExists, name)
	}
	if len(im.opts.Stores) > 0 && !contains(im.opts.Stores, name) {
		return nil, fmt.Errorf("%w: %q is not one of the database's stores %v", ErrUnknownStore, name, im.opts.Stores)
	}
	si, err := memiavl.NewImporter(filepath.Join(im.tmpSnap, treeDirName(name)), im.version)
	if err != nil {
		return nil, err
	}
	im.mu.stores[name] = si
	return si, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Commit completes the database: the stores listed in ImportOptions.Stores
// but not added are created empty, the snapshot's metadata is written and
// the snapshot made durable, then the empty log and the current pointer;
// the database is opened once to check it. When replacing a database, the
// new one then takes its place. It returns the commit info of the imported
// version. Every added store must have been committed.
func (im *Importer) Commit() (_ *storetypes.CommitInfo, err error) {
	defer func() { err = asCorrupt(err) }()
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.mu.done {
		return nil, fmt.Errorf("multitree: importer is finished")
	}
	returned := false
	defer func() {
		if !returned {
			// Check or Finish panicked: the import is given up as
			// after a failure, and the panic goes on; a later call
			// finds the importer finished
			im.abortLocked()
		}
	}()
	info, err := im.commitLocked()
	returned = true
	if err != nil {
		im.abortLocked()
		return nil, err
	}
	im.mu.done = true
	return info, nil
}

func (im *Importer) commitLocked() (*storetypes.CommitInfo, error) {
	for _, name := range im.opts.Stores {
		if _, ok := im.mu.stores[name]; ok {
			continue
		}
		si, err := memiavl.NewImporter(filepath.Join(im.tmpSnap, treeDirName(name)), im.version)
		if err != nil {
			return nil, err
		}
		im.mu.stores[name] = si
		if err := si.Commit(); err != nil {
			return nil, err
		}
	}
	meta := metadata{Version: im.version, InitialVersion: im.opts.InitialVersion}
	for name, si := range im.mu.stores {
		h := si.RootHash()
		if h == nil {
			return nil, fmt.Errorf("multitree: store %q was not committed", name)
		}
		meta.Stores = append(meta.Stores, storeInfo{Name: name, Hash: h})
	}
	sort.Slice(meta.Stores, func(i, j int) bool { return meta.Stores[i].Name < meta.Stores[j].Name })
	if im.opts.Check != nil {
		info := &storetypes.CommitInfo{Version: im.version}
		for _, st := range meta.Stores {
			info.StoreInfos = append(info.StoreInfos, storetypes.StoreInfo{
				Name: st.Name, CommitId: storetypes.CommitID{Version: im.version, Hash: st.Hash},
			})
		}
		if err := im.opts.Check(info); err != nil {
			return nil, err
		}
	}
	if err := writeFileAtomic(im.tmpSnap, metadataFileName, meta.encode()); err != nil {
		return nil, err
	}
	if err := os.Rename(im.tmpSnap, filepath.Join(im.target, snapshotDirName(im.version))); err != nil {
		return nil, err
	}
	im.tmpSnap = ""
	if err := syncDir(im.target); err != nil {
		return nil, err
	}
	log, err := wal.Open(filepath.Join(im.target, walDirName), wal.Options{})
	if err != nil {
		return nil, err
	}
	if err := log.Close(); err != nil {
		return nil, err
	}
	if im.version > 0 {
		// the versions before it were never committed here (the first
		// commit of an import at version 0 records its own)
		if err := writeFileAtomic(im.target, firstFileName, encodeFirst(im.version)); err != nil {
			return nil, err
		}
	}
	im.current = true
	if err := writeFileAtomic(im.target, currentFileName, encodeCurrent(im.version)); err != nil {
		return nil, err
	}
	gen, trees, err := openGeneration(im.target, im.version)
	if err != nil {
		return nil, err
	}
	info, err := commitInfo(trees, im.version)
	gen.release()
	if err != nil {
		return nil, err
	}
	if im.opts.Finish != nil {
		if err := im.finish(); err != nil {
			return nil, err
		}
	}
	// last: until now a failure gives the database up (see abort)
	if err := removeImportMarker(im.target); err != nil {
		return nil, err
	}
	if im.target != im.dir {
		if err := im.swap(); err != nil {
			return nil, err
		}
	}
	_ = unlockDir(im.lock)
	im.lock = nil
	return info, nil
}

// finish runs the Finish step on the database written in the target
// directory, opened under the importer's lock.
func (im *Importer) finish() error {
	db, err := Open(im.target, im.opts.finishOptions(im.lock))
	if err != nil {
		return err
	}
	finished := false
	defer func() {
		if !finished {
			_ = db.Close() // Finish panicked: the panic goes on, the database is closed
		}
	}()
	err = im.opts.Finish(db)
	finished = true
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// swap replaces the database in dir with the staged one. Where the file
// system can (renameat2 with RENAME_EXCHANGE), the two directories trade
// places in one step: dir never stops holding a whole database, and its
// lock file (the staged database's, held by the importer) stays locked;
// the old database, now under the staging name, is then removed. Where it
// cannot, dir is moved aside (dir+replacedSuffix) and the staged database
// to dir by two renames; finishSwap, run by the next writable Open or
// import, completes a swap interrupted between them. Once the new database
// is in place and durable, a failure to remove the old one is not the
// import's failure: it is left for the next import to remove. When the
// swap cannot be made durable (the fsync of dir's parent fails), it is
// undone, so that the failed import leaves the old database in dir; if
// the undo fails too, the error says which database dir holds, or, where
// it holds none, which one its next writable open moves there.
func (im *Importer) swap() error {
	staged := im.target
	old := staged // where the exchange leaves the old database
	exchanged := true
	err := exchange(staged, im.dir)
	if err != nil {
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("multitree: swap %s into %s: %w", staged, im.dir, err)
		}
		exchanged = false
		old = besidePath(im.dir, replacedSuffix)
		if err := im.renameSwap(old); err != nil {
			return err
		}
	}
	if err := syncDir(filepath.Dir(im.dir)); err != nil {
		switch left, uerr := im.unswap(old, exchanged); {
		case uerr == nil:
			return fmt.Errorf("multitree: the swap of the imported database into %s could not be made durable, and was undone: %w", im.dir, err)
		case left == importedInDir:
			im.target = im.dir
			im.owned = false // it is the database now
			// a power loss may still bring the old one back
			return fmt.Errorf("multitree: the imported database is in place in %s, but the swap could not be made durable (%w) nor undone (%w)", im.dir, err, uerr)
		default:
			next := "the old one back"
			if left == importedComesIn {
				next = "the imported one in"
			}
			return fmt.Errorf("multitree: the swap of the imported database into %s could not be made durable (%w) nor wholly undone (%w): %s holds no database, and its next writable open moves %s", im.dir, err, uerr, im.dir, next)
		}
	}
	im.target = im.dir
	im.owned = false // it is the database now
	_ = unlockDir(im.existLock)
	im.existLock = nil
	_ = os.RemoveAll(old)
	return nil
}

// unswapLeft says where a failed unswap left the two databases.
type unswapLeft int

const (
	// importedInDir: dir still holds the imported database
	importedInDir unswapLeft = iota
	// oldComesBack: dir holds none; the imported one is back in the
	// staging directory, marked unfinished, so finishSwap (the next
	// writable open) moves the old one back
	oldComesBack
	// importedComesIn: dir holds none; the imported one is back in the
	// staging directory but could not be marked unfinished, so finishSwap
	// moves it in
	importedComesIn
)

// unswap puts the database that swap replaced back in dir, and the
// imported one back in the staging directory (im.target), which the
// import's abort removes. After an exchange it exchanges them back. After
// swap's two renames it moves the imported database back, marks it
// unfinished, so that a process stopping before the old database is back
// leaves finishSwap moving the old one back instead of the imported one,
// and moves the old one back. When it fails, left says where the
// databases are.
func (im *Importer) unswap(old string, exchanged bool) (left unswapLeft, err error) {
	if exchanged {
		if err := exchange(im.dir, im.target); err != nil {
			return importedInDir, err
		}
		_ = syncDir(filepath.Dir(im.dir))
		return 0, nil
	}
	if err := os.Rename(im.dir, im.target); err != nil {
		return importedInDir, err
	}
	if err := writeMarker(im.target, finishingMarker); err != nil {
		// the next writable open moves it back in (finishSwap)
		im.owned = false
		return importedComesIn, err
	}
	if err := os.Rename(old, im.dir); err != nil {
		// the next writable open moves the old one back (finishSwap)
		im.owned = false
		return oldComesBack, err
	}
	_ = syncDir(filepath.Dir(im.dir))
	return 0, nil
}

// exchange swaps the directories a and b in one step (renameat2 with
// RENAME_EXCHANGE on Linux, see osfile.ExchangeDirs). Tests replace it to
// take swap's other way.
var exchange = exchangeDirs

func exchangeDirs(a, b string) error { return osfile.ExchangeDirs(a, b) }

// renameSwap is swap where the exchange is refused: dir to old, then the
// staged database to dir. If the second rename fails, the old database is
// moved back; if that fails too, the staged database is marked unfinished,
// so that finishSwap, which the next writable open runs, moves the old one
// back instead of the staged one in; only where the marker cannot be
// written either is the staged database no longer the importer's to
// remove, as finishSwap moves it in.
func (im *Importer) renameSwap(old string) error {
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(im.dir, old); err != nil {
		return err
	}
	if err := os.Rename(im.target, im.dir); err != nil {
		if rerr := os.Rename(old, im.dir); rerr != nil {
			if merr := writeMarker(im.target, finishingMarker); merr != nil {
				im.owned = false
				return errors.Join(err, rerr, merr)
			}
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// besidePath names the directory beside dir that an import stages its
// database in (stagingSuffix) or moves a replaced one to (replacedSuffix):
// beside the directory itself (osfile.RealDir), also when dir is "." or ends in
// "..", or is reached through a symbolic link.
func besidePath(dir, suffix string) string { return osfile.RealDir(dir) + suffix }

// replacedSuffix names the directory beside a database to which an import
// that replaces it moves the old database before moving the new one in.
const replacedSuffix = ".replaced.tmp"

// swapSource returns, for a dir without a database beside which an
// import's swap was interrupted between its two renames (see finishSwap),
// the directory whose database the next writable open moves to dir: the
// staged one if whole, else the replaced one. Readers (read-only opens,
// Verify, LatestVersion) read that one, moving nothing. Otherwise it
// returns dir.
func swapSource(dir string) string {
	if exists, err := hasDatabase(dir); exists || err != nil {
		return dir
	}
	old := besidePath(dir, replacedSuffix)
	if _, err := os.Lstat(old); err != nil {
		return dir
	}
	staged := besidePath(dir, stagingSuffix)
	if whole, _ := stagedWhole(staged); whole {
		return staged
	}
	return old
}

// stagedWhole reports whether the staged database of an import's swap is
// whole: its current pointer written, and no Finish step pending (its
// marker is removed before the swap starts).
func stagedWhole(staged string) (bool, error) {
	whole, err := hasDatabase(staged)
	if err != nil || !whole {
		return false, err
	}
	unfinished, err := unfinishedImport(staged)
	return err == nil && !unfinished, err
}

// SourceDir returns the directory whose database the readers of dir read:
// dir itself, or, where an import's swap of databases was interrupted
// between its two renames (dir holds none), the one beside it that the next
// writable open moves to dir (see Options.ReadOnly). Tools that read a
// database's files themselves use it.
func SourceDir(dir string) string { return swapSource(dir) }

// finishSwap completes the swap of an import that was interrupted between
// its two renames (see swap): with the replaced database moved aside and no
// database in dir, it moves the staged database to dir if it is whole, or
// else the old one back. The old database is removed only once dir holds
// the new one, and its removal is best effort. It changes nothing when no
// replaced database lies beside dir, and fails with ErrLocked while the
// importer is still at work.
func finishSwap(dir string) error {
	// the directory dir names, through a symbolic link too: the swap
	// moved it, and the link (dangling meanwhile) must stay
	dir = osfile.RealDir(dir)
	old := besidePath(dir, replacedSuffix)
	if _, err := os.Lstat(old); err != nil {
		// (a parent that is not a directory: what opens dir reports it)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	exists, err := hasDatabase(dir)
	if err != nil {
		return err
	}
	if !exists {
		staged := besidePath(dir, stagingSuffix)
		lock, err := lockDir(staged)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		whole := false
		if err == nil {
			defer unlockDir(lock)
			if whole, err = stagedWhole(staged); err != nil {
				return err
			}
		}
		from := staged
		if !whole {
			from = old
		}
		if err := os.Rename(from, dir); err != nil {
			if again, _ := hasDatabase(dir); again {
				return nil // another process finished it meanwhile
			}
			return err
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
		if !whole {
			return nil
		}
	}
	_ = os.RemoveAll(old)
	return nil
}

// Close ends the importer. Without a successful Commit it closes the store
// importers and removes everything the import wrote. It may be called more
// than once.
func (im *Importer) Close() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if !im.mu.done {
		im.abortLocked()
	}
	return nil
}

func (im *Importer) abortLocked() {
	im.mu.done = true
	im.abort()
}

func (im *Importer) abort() {
	for _, si := range im.mu.stores {
		_ = si.Close()
	}
	if im.tmpSnap != "" {
		_ = os.RemoveAll(im.tmpSnap)
		im.tmpSnap = ""
	}
	if im.owned {
		switch {
		case im.target != im.dir:
			// the staging directory, never opened as a database
			_ = os.RemoveAll(im.target)
		default:
			// in the order that keeps an interruption an import's
			// leftovers (see giveUp), then dir if the import made it
			if im.current {
				_ = giveUp(im.dir)
			} else {
				_ = removeImportLeftovers(im.dir)
			}
			if im.created {
				_ = os.RemoveAll(im.dir)
				// then the parents it made, while they stay empty
				for d := filepath.Clean(im.dir); d != im.createdTop; {
					d = filepath.Dir(d)
					if os.Remove(d) != nil {
						break
					}
				}
			}
		}
	}
	if im.createdLock && im.lockOurs {
		removeHeldLockFile(im.lock, im.dir)
	}
	_ = unlockDir(im.lock)
	im.lock = nil
	im.releaseExistLock()
}

// releaseExistLock gives up the lock on the database replaced, removing
// its lock file first if the import created it and dir still holds it
// (not the imported database's, after a swap that could not be undone).
func (im *Importer) releaseExistLock() {
	if im.existLock == nil {
		return
	}
	if im.createdExistLock {
		removeHeldLockFile(im.existLock, im.dir)
		im.createdExistLock = false
	}
	_ = unlockDir(im.existLock)
	im.existLock = nil
}

// removeHeldLockFile removes dir's lock file, which an import created,
// while lock, the file it holds, still holds it: removed under the lock
// (see lockDir), and only if dir still names that file, not another
// database's moved in (a swap that could not be undone).
func removeHeldLockFile(lock *os.File, dir string) {
	if lock == nil {
		return
	}
	path := filepath.Join(dir, lockFileName)
	held, herr := lock.Stat()
	named, nerr := os.Lstat(path)
	if herr == nil && nerr == nil && os.SameFile(held, named) {
		_ = os.Remove(path)
		_ = syncDir(dir)
	}
}

// hasImportMarker reports whether dir holds an import marker: a regular
// file (as writeMarker makes it), not any entry of that name.
func hasImportMarker(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, importFileName))
	return err == nil && fi.Mode().IsRegular()
}
