package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	dbm "github.com/cosmos/cosmos-db"
	gogotypes "github.com/cosmos/gogoproto/types"
	"github.com/spf13/cobra"
	"github.com/syndtr/goleveldb/leveldb/opt"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

type importIAVLOptions struct {
	height      int64
	stores      []string
	backend     string
	concurrency int
}

func newImportIAVLCmd() *cobra.Command {
	var o importIAVLOptions
	cmd := &cobra.Command{
		Use:         "import-iavl <application.db> <dir>",
		Annotations: changesFiles,
		Short:       "Create a database from the cosmos/iavl stores of an SDK application database",
		Long: `import-iavl creates a database in <dir> from the IAVL stores of a Cosmos SDK
application database (<home>/data/application.db, the rootmulti layout) at
--height (default: the application's latest version). Each tree is streamed
into the new snapshot; every root hash must equal the one the application
recorded, and, when every store is imported, the app hash too, otherwise
nothing is left in <dir>. The application database is a directory named
<name>.db; it is only read (goleveldb and pebbledb ones are opened
read-only, which a running node's lock refuses: stop the node first;
pebble truncates its empty LOCK file as it takes the lock, which updates
the file's modification time, and goleveldb creates an empty LOCK file in
a copy that has none; a
rocksdb one, in a build with the rocksdb tag, is opened by cosmos-db for
writing, which adds rocksdb's own log and options files to it). <dir>
must not hold a database, except one with nothing committed (version 0,
as a node's first start with the store enabled creates), which is
replaced (the application database must then not lie inside <dir>); nor
lie inside the application database. A height above the
application's latest version is refused. An interrupt (Ctrl-C, SIGTERM)
stops the import within a thousand nodes of each tree and exits 1,
leaving <dir> as a failed import does (once every tree is written the
import finishes); a second ends it at once, as a kill does, and the next
import into <dir> removes what it left.`,
		Example: `  memiavl import-iavl ~/.gaia/data/application.db ~/.gaia/data/memiavl.db`,
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runImportIAVL(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], o)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.height, "height", 0, "version to import (default: the latest)")
	f.StringSliceVar(&o.stores, "stores", nil, "stores to import (default: every store of the commit info)")
	f.StringVar(&o.backend, "backend", string(dbm.GoLevelDBBackend), "database backend of the application database")
	f.IntVar(&o.concurrency, "concurrency", 0, "trees imported in parallel (default: GOMAXPROCS)")
	return cmd
}

func runImportIAVL(ctx context.Context, w io.Writer, src, dir string, o importIAVLOptions) error {
	if o.height < 0 || o.concurrency < 0 {
		return usagef("--height and --concurrency must not be negative")
	}
	backend := dbm.BackendType(o.backend)
	switch backend {
	case dbm.GoLevelDBBackend, dbm.PebbleDBBackend, dbm.RocksDBBackend:
	default:
		return usagef("unknown --backend %q (want goleveldb, pebbledb or rocksdb)", o.backend)
	}
	if backend == dbm.RocksDBBackend && !rocksdbBuilt {
		return usagef("--backend rocksdb needs a memiavl built with the rocksdb tag (go build -tags rocksdb); this one reads goleveldb and pebbledb")
	}
	if len(o.stores) == 0 {
		o.stores = nil // an empty --stores '' means the default: every store
	}
	seen := make(map[string]bool, len(o.stores))
	for _, s := range o.stores {
		switch {
		case s == "":
			return usagef("--stores holds an empty store name")
		case seen[s]:
			return usagef("--stores lists %q twice", s)
		}
		seen[s] = true
	}
	dir = absDir(dir)
	if within(dir, src) {
		return usagef("%s is inside the application database %s, which is only read: choose a directory outside it", dir, src)
	}
	if err := refuseSourceInside(src, dir, "the application database"); err != nil {
		return err
	}
	if err := refuseInsideDatabase(dir); err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a database directory", src)
	}
	// the backends open <parent>/<name>.db, creating it if missing: only
	// hand them a directory with that name, so that nothing is created
	// beside the source
	parent, name := filepath.Split(filepath.Clean(src))
	if !strings.HasSuffix(name, ".db") || name == ".db" {
		return fmt.Errorf("%s: an SDK application database is a directory named <name>.db (such as data/application.db)", src)
	}
	name = strings.TrimSuffix(name, ".db")
	// every backend keeps a CURRENT file; without one src is not a
	// database, and the opens below would write into it (goleveldb
	// creates its LOCK file even read-only, rocksdb a new database)
	if _, serr := os.Stat(filepath.Join(src, "CURRENT")); serr != nil {
		return fmt.Errorf("%s holds no %s database: %w", src, backend, serr)
	}
	// read-only, and an error rather than a new database if src is not
	// one
	var db dbm.DB
	switch backend {
	case dbm.GoLevelDBBackend:
		db, err = dbm.NewGoLevelDBWithOpts(name, parent, &opt.Options{ReadOnly: true, ErrorIfMissing: true})
	case dbm.PebbleDBBackend:
		db, err = openReadOnlyPebble(src)
	default:
		// built with the rocksdb tag only; its open would create a
		// missing database (refused above)
		db, err = dbm.NewDB(name, backend, parent)
	}
	if errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("open %s: it is locked (is a node running on it? stop it first): %w", src, err)
	}
	if err != nil {
		if backend == dbm.GoLevelDBBackend {
			// pebble keeps OPTIONS-<n> files, which goleveldb does not
			if hasPebbleOptions(src) {
				return fmt.Errorf("open %s as goleveldb: %w (it looks like a pebble database: try --backend pebbledb)", src, err)
			}
		}
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer db.Close()
	height := o.height
	if height == 0 {
		if height, err = rootMultiLatest(db); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
	}
	start := time.Now()
	ctx, stop := interruptible(ctx)
	defer stop()
	if err := compat.ImportIAVLContext(ctx, db, height, o.stores, dir, multitree.Options{RewriteConcurrency: o.concurrency}); err != nil {
		return interruptedImport(ctx, dir, err)
	}
	return printImported(w, src, dir, start)
}

// rootMultiLatest reads the latest version the SDK's rootmulti store
// recorded (key "s/latest", a protobuf Int64Value).
func rootMultiLatest(db dbm.DB) (int64, error) {
	b, err := db.Get([]byte("s/latest"))
	if err != nil {
		return 0, err
	}
	if b == nil {
		return 0, fmt.Errorf("no latest version recorded (not an SDK application database?)")
	}
	var v gogotypes.Int64Value
	if err := v.Unmarshal(b); err != nil {
		return 0, fmt.Errorf("latest version record: %w", err)
	}
	if v.Value <= 0 {
		return 0, fmt.Errorf("nothing committed (latest version %d)", v.Value)
	}
	return v.Value, nil
}

func printImported(w io.Writer, src, dir string, start time.Time) error {
	// only the commit info is read, of files the import just wrote and
	// checked: no checksum check to start and stop
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(w, "imported %s into %s at version %d in %.2fs: %d stores, app hash %x\n",
		src, dir, db.Version(), time.Since(start).Seconds(), len(db.StoreNames()), db.LastCommitInfo().Hash())
	return nil
}

func newImportMemIAVLCmd() *cobra.Command {
	var concurrency int
	cmd := &cobra.Command{
		Use:         "import-memiavl <reference-dir> <dir>",
		Annotations: changesFiles,
		Short:       "Create a database from a directory of the reference memiavl (cronos memiavl v0.1)",
		Long: `import-memiavl creates a database in <dir> from a directory written by the
reference memiavl (github.com/crypto-org-chain/cronos/memiavl v0.1.0), at
the reference's latest version and with the identical app hash: it streams
the reference's current snapshot into a new snapshot, checking every root
hash and the app hash, then replays the reference's write-ahead log entries
after it. The reference's log carries no checksums: a damaged entry that
still decodes is replayed as the reference itself would replay it, and
shows only as an app hash other than the one the chain recorded (compare
the printed app hash with the block's). The reference directory is only
read; its node must be stopped (a running one is found by its lock and
refused).
<dir> must not hold a database, except one with nothing committed (version
0: a node's first start with this store creates one), which is replaced
(the reference directory must then not lie inside <dir>); nor may it lie
inside the reference directory. The import is all or
nothing: the database is in place only once the log is replayed. A failed
import leaves <dir> as it was (a database at version 0 included). An
interrupt (Ctrl-C, SIGTERM) stops it within a thousand nodes of each tree,
or between two versions of the log's replay, and exits 1, leaving <dir> as
a failed import does; a second ends it at once, as a kill does. A kill (or
crash) leaves what the next import into <dir> removes: killed during the
replay into a directory without a database, a database that is not the
import's result, which opening refuses ("an import into the directory did
not finish") until a rerun replaces it. Both stores name their directory
memiavl.db in a node's home: move the reference's aside first (see the
example).`,
		Example: `  memiavl import-memiavl ~/.cronos/data/memiavl.db ./memiavl.db
  mv ~/.cronos/data/memiavl.db ~/.cronos/data/memiavl.db.ref &&
    memiavl import-memiavl ~/.cronos/data/memiavl.db.ref ~/.cronos/data/memiavl.db`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			if concurrency < 0 {
				return usagef("--concurrency must not be negative")
			}
			args[1] = absDir(args[1])
			if within(args[1], args[0]) {
				return usagef("%s is inside the reference database %s, which is only read: choose a directory outside it", args[1], args[0])
			}
			if err := refuseSourceInside(args[0], args[1], "the reference database"); err != nil {
				return err
			}
			if err := refuseInsideDatabase(args[1]); err != nil {
				return err
			}
			if _, err := os.Stat(args[0]); err != nil {
				return err
			}
			fi, err := os.Lstat(filepath.Join(args[0], currentName))
			if err != nil {
				return fmt.Errorf("%s holds no reference memiavl database (no 'current' link)", args[0])
			}
			if fi.Mode().IsRegular() {
				return fmt.Errorf("%s is a database of this format already, not one of the reference memiavl (its 'current' is a file, not a link): open it as it is, or copy it with 'memiavl export' and 'memiavl import'", args[0])
			}
			start := time.Now()
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			if err := compat.ImportMemIAVLContext(ctx, args[0], args[1], multitree.Options{
				RewriteConcurrency: concurrency, SnapshotInterval: -1,
				// the import closes the database before it is in
				// place, which makes its log durable
				Sync: wal.SyncNone,
			}); err != nil {
				return interruptedImport(ctx, args[1], err)
			}
			return printImported(cmd.OutOrStdout(), args[0], args[1], start)
		},
	}
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "trees imported in parallel (default: GOMAXPROCS)")
	return cmd
}

// within reports whether path is dir or lies inside it, once both are
// absolute and their symbolic links resolved as far as they exist.
func within(path, dir string) bool {
	rel, err := filepath.Rel(resolvePath(dir), resolvePath(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
