package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/seed-6dfbb450/memiavl/internal/sysstat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func newDumpCmd() *cobra.Command {
	var (
		asJSON  bool
		version int64
	)
	cmd := &cobra.Command{
		Use:   "dump <dir>",
		Short: "Print a database's versions, stores, key counts, sizes and hashes",
		Long: `dump opens a database read-only (it takes no lock) and prints its latest
version (or --version), the app hash, the kept snapshots, the range of
versions in the write-ahead log, and for each store its key count, root
hash and the size of its tree in the base snapshot: the kept snapshot the
version is loaded from (the log replayed on top of it). For the latest
version that is the current snapshot; with --version it may be an older one.
A store added after the base snapshot has no tree in it (size 0), nor has a
store renamed since it (its tree is stored under the former name).
The base snapshot's files are checked against their checksums first (they
are read once, as verify reads them): damage fails the command (exit 1)
instead of printing hashes the database never had. A torn log tail and an
unfinished rollback (the version every open stops at until a writable
open finishes it) are printed as warnings.`,
		Example: `  memiavl dump ~/.gaia/data/memiavl.db
  memiavl dump --json --version 1200 ./memiavl.db`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runDump(cmd.OutOrStdout(), args[0], version, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().Int64Var(&version, "version", 0, "version to describe (default: the latest)")
	return cmd
}

// DumpStore describes one store.
type DumpStore struct {
	Name          string `json:"name"`
	NameHex       string `json:"name_hex,omitempty"` // the name's bytes when it is not valid UTF-8
	Keys          int64  `json:"keys"`
	Height        int    `json:"height"`
	RootHash      string `json:"root_hash"`
	SnapshotBytes int64  `json:"snapshot_bytes"`
}

// DumpResult is what dump prints.
type DumpResult struct {
	Dir             string      `json:"dir"`
	Version         int64       `json:"version"`
	AppHash         string      `json:"app_hash"`
	SnapshotVersion int64       `json:"snapshot_version"`
	Snapshots       []int64     `json:"snapshots"`
	WALFirst        int64       `json:"wal_first"`
	WALLast         int64       `json:"wal_last"`
	WALBytes        int64       `json:"wal_bytes"`
	DiskBytes       int64       `json:"disk_bytes"`
	Stores          []DumpStore `json:"stores"`
	// WALTornTail is set when the log ends in a torn tail, ignored by
	// this read-only open (see multitree.DB.LogTornTail).
	WALTornTail *wal.TornTail `json:"wal_torn_tail,omitempty"`
	// RollbackTo is set while a rollback is unfinished: every open stops
	// at that version, and the snapshots and log after it go at the next
	// writable open.
	RollbackTo int64 `json:"rollback_to,omitempty"`
}

func runDump(w io.Writer, dir string, version int64, asJSON bool) error {
	if version < 0 {
		return usagef("--version must not be negative")
	}
	if err := checkDBDir(dir); err != nil {
		return err
	}
	// the counts and hashes printed come from the base snapshot's records
	// (and the log replayed over them hashes its inner nodes): its files'
	// checksums are checked first, so that damage is an error, not a
	// wrong app hash
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: version, SnapshotInterval: -1, ViewCacheSize: -1,
		OpenCheck: multitree.OpenCheckSync})
	if err != nil {
		return err
	}
	defer db.Close()
	view, err := db.View()
	if err != nil {
		return err
	}
	defer view.Release()
	// the directory read: beside dir while an import's interrupted swap
	// waits for a writable open to finish it
	from := db.Dir()

	res := DumpResult{
		Dir:             dir,
		Version:         view.Version(),
		AppHash:         hex.EncodeToString(view.CommitInfo().Hash()),
		SnapshotVersion: db.SnapshotVersion(),
		WALBytes:        sysstat.DiskUsage(filepath.Join(from, walDirName)),
		DiskBytes:       sysstat.DiskUsage(from),
		Stores:          []DumpStore{}, // [] in JSON when there are none
	}
	if tt, ok := db.LogTornTail(); ok {
		res.WALTornTail = &tt
	}
	res.RollbackTo = db.RollbackTarget()
	if res.Snapshots, err = multitree.SnapshotVersions(dir); err != nil {
		return err
	}
	if res.WALFirst, res.WALLast, err = walRange(filepath.Join(from, walDirName), unfinishedRollback(from)); err != nil {
		return err
	}
	snapDir := filepath.Join(from, snapshotDirName(res.SnapshotVersion))
	for _, name := range view.StoreNames() {
		t := view.Tree(name)
		keys, err := t.SizeChecked()
		if err != nil {
			return fmt.Errorf("store %q: %w", name, err)
		}
		height, err := t.HeightChecked()
		if err != nil {
			return fmt.Errorf("store %q: %w", name, err)
		}
		hash, err := t.RootHashChecked()
		if err != nil {
			return fmt.Errorf("store %q: %w", name, err)
		}
		res.Stores = append(res.Stores, DumpStore{
			Name:          name,
			NameHex:       nameHex(name),
			Keys:          keys,
			Height:        int(height),
			RootHash:      hex.EncodeToString(hash),
			SnapshotBytes: dirSize(filepath.Join(snapDir, treeDirName(name))),
		})
	}
	if asJSON {
		return writeJSON(w, res)
	}
	var t table
	t.add("directory", "%s", dir)
	t.add("version", "%d", res.Version)
	t.add("app hash", "%s", res.AppHash)
	t.add("base snapshot", "%d (kept: %v)", res.SnapshotVersion, res.Snapshots)
	if res.WALLast == 0 {
		t.add("log", "empty (%s)", formatBytes(res.WALBytes))
	} else {
		t.add("log", "versions %d..%d (%s)", res.WALFirst, res.WALLast, formatBytes(res.WALBytes))
	}
	t.add("disk", "%s", formatBytes(res.DiskBytes))
	if res.WALTornTail != nil {
		at := db.Version() // the database's latest, not the version dumped
		if v, err := multitree.LatestVersion(dir); err == nil {
			at = v
		}
		t.add("warning", "%s", tornTailText(*res.WALTornTail, at, false))
	}
	if res.RollbackTo != 0 {
		t.add("warning", "%s", unfinishedRollbackText(res.RollbackTo))
	}
	t.write(w)
	fmt.Fprintf(w, "\n%-24s %12s %6s %12s  %s\n", "STORE", "KEYS", "HEIGHT", "IN BASE", "ROOT HASH")
	for _, s := range res.Stores {
		fmt.Fprintf(w, "%-24s %12d %6d %12s  %s\n", shownName(s.Name), s.Keys, s.Height, formatBytes(s.SnapshotBytes), s.RootHash)
	}
	return nil
}

// unfinishedRollback returns the target of the rollback the database in
// dir has begun and not finished, 0 if none (or if its record cannot be
// read: the log is then read as if none were).
func unfinishedRollback(dir string) int64 {
	to, err := multitree.UnfinishedRollback(dir)
	if err != nil {
		return 0
	}
	return to
}

// walRange returns the first and last version of the log in dir (0, 0 when
// it is empty or absent). rollbackTo is the target of the database's
// unfinished rollback, if any: damage after it is that rollback's
// interrupted cut of the log (see wal.Options.Discarding).
func walRange(dir string, rollbackTo int64) (first, last int64, err error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	l, err := wal.Open(dir, wal.Options{ReadOnly: true, Discarding: rollbackTo})
	if err != nil {
		return 0, 0, err
	}
	first, last = l.FirstVersion(), l.LastVersion()
	return first, last, l.Close()
}
