package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func newWALCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal",
		Short: "Inspect a database's write-ahead log",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newWALDumpCmd())
	return cmd
}

type walDumpOptions struct {
	from, to int64
	pairs    bool
	asJSON   bool
}

func newWALDumpCmd() *cobra.Command {
	var o walDumpOptions
	cmd := &cobra.Command{
		Use:   "dump <dir>",
		Short: "Print the log's entries: version, store upgrades, stores and pair counts",
		Long: `wal dump prints the entries of a write-ahead log, read-only. <dir> is a
database directory (its wal/ subdirectory is read) or a log directory.

For each version it prints the store upgrades and, per store, the number of
sets and deletes; --pairs also prints every pair's key and value in hex
("" for an empty one).
Every record read is checksummed: damage is reported with the segment file
and byte offset, and the command exits 1. A torn tail at the end of the
newest segment (what a crash in the middle of an append leaves: a last
record cut short, or one whose checksum fails, or a page the system had
not written back, read as zeros; a damaged last record looks the same) is
not part of the log; it is reported on stderr as a warning. Bytes at the
end that no crash leaves (for example a whole record header failing its
length check, followed by bytes that are neither zeros nor its record's
body) are damage.

It may run while a node has the database open. The node prunes the log after
each snapshot rewrite: a segment removed while it is read ends the dump with
an error that says so and which version was printed last.`,
		Example: `  memiavl wal dump ./memiavl.db
  memiavl wal dump --from 100 --to 110 --pairs ./memiavl.db`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runWALDump(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.from, "from", 0, "first version to print (default: the log's first)")
	f.Int64Var(&o.to, "to", 0, "last version to print (default: the log's last)")
	f.BoolVar(&o.pairs, "pairs", false, "print every key and value (hex)")
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object per entry")
	return cmd
}

type walStoreJSON struct {
	Name    string        `json:"name"`
	NameHex string        `json:"name_hex,omitempty"` // the name's bytes when it is not valid UTF-8
	Sets    int           `json:"sets"`
	Deletes int           `json:"deletes"`
	Pairs   []walPairJSON `json:"pairs,omitempty"`
}

// walPairJSON is one pair of a change set: a set has a value (the empty
// string for an empty value), a delete has "delete": true and no value.
type walPairJSON struct {
	Delete bool    `json:"delete,omitempty"`
	Key    string  `json:"key"`
	Value  *string `json:"value,omitempty"`
}

type walEntryJSON struct {
	Version  int64            `json:"version"`
	Upgrades *walUpgradesJSON `json:"upgrades,omitempty"`
	Stores   []walStoreJSON   `json:"stores"`
}

// walUpgradesJSON is wal.Upgrades with the hex of the names that are not
// valid UTF-8 (see nameHex): added_hex and deleted_hex list every name's
// hex, in order, when one of the list's names needs it.
type walUpgradesJSON struct {
	Added      []string         `json:"added,omitempty"`
	AddedHex   []string         `json:"added_hex,omitempty"`
	Renamed    []walRenamedJSON `json:"renamed,omitempty"`
	Deleted    []string         `json:"deleted,omitempty"`
	DeletedHex []string         `json:"deleted_hex,omitempty"`
}

type walRenamedJSON struct {
	OldName    string `json:"old_name"`
	OldNameHex string `json:"old_name_hex,omitempty"`
	NewName    string `json:"new_name"`
	NewNameHex string `json:"new_name_hex,omitempty"`
}

func upgradesJSON(u wal.Upgrades) *walUpgradesJSON {
	out := &walUpgradesJSON{Added: u.Added, AddedHex: namesHex(u.Added), Deleted: u.Deleted, DeletedHex: namesHex(u.Deleted)}
	for _, r := range u.Renamed {
		out.Renamed = append(out.Renamed, walRenamedJSON{OldName: r.OldName, OldNameHex: nameHex(r.OldName), NewName: r.NewName, NewNameHex: nameHex(r.NewName)})
	}
	return out
}

// shownNames is names as the text reports print them (shownName).
func shownNames(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = shownName(n)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// hasSegments reports whether dir holds log segments; a directory that
// cannot be listed for another reason than its absence is an error.
func hasSegments(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !absent(err) {
		return false, err
	}
	for _, e := range ents {
		if wal.IsSegmentFile(e.Name()) {
			return true, nil
		}
	}
	return false, nil
}

func runWALDump(w, diag io.Writer, dir string, o walDumpOptions) error {
	if o.from < 0 || o.to < 0 {
		return usagef("--from and --to must not be negative")
	}
	if o.to != 0 && o.from > o.to {
		return usagef("--from %d is after --to %d", o.from, o.to)
	}
	// an import interrupted between the two renames of its swap: the
	// database is read from beside dir
	dir = multitree.SourceDir(dir)
	walDir := dir
	if fi, err := os.Stat(filepath.Join(dir, walDirName)); err == nil && fi.IsDir() {
		walDir = filepath.Join(dir, walDirName)
	} else if err != nil && !absent(err) {
		return err // permission denied, say
	} else if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is a file: give the database directory, or its log directory (%s)", dir, filepath.Dir(dir))
	}
	// an empty log is one of a database: its wal directory, beside its
	// current pointer; a directory with neither segments nor that place
	// is something else, not an empty log
	db := dir
	if walDir == dir {
		db = filepath.Dir(absDir(dir)) // given the log directory (also as ".")
	}
	if cur, err := os.Lstat(filepath.Join(db, currentName)); err == nil && !cur.Mode().IsRegular() {
		return checkDBDir(db) // the reference memiavl's, whose log this command does not read
	}
	_, err := os.Stat(filepath.Join(db, currentName))
	if err != nil && !absent(err) {
		return err // permission denied, say
	}
	segs, serr := hasSegments(walDir)
	if serr != nil {
		return serr
	}
	isLogDir := walDir != dir || filepath.Base(absDir(dir)) == walDirName
	if walDir == dir && !isLogDir && !segs {
		if fi, err := os.Lstat(filepath.Join(dir, currentName)); err == nil && fi.Mode().IsRegular() {
			// a database (it has current) that lost its log directory
			return fmt.Errorf("%w: the log directory %s of the database %s is missing or not a directory",
				multitree.ErrCorrupt, filepath.Join(dir, walDirName), dir)
		}
	}
	if (err != nil || !isLogDir) && !segs {
		return fmt.Errorf("%s is neither a memiavl database nor its log directory (no %s, no log segments)", dir, currentName)
	}
	// damage after an unfinished rollback's target is its interrupted cut
	// of the log, a torn tail as a database's open reads it
	rollbackTo := unfinishedRollback(db)
	if err == nil {
		// what an open of the database would refuse (an unfinished
		// import, a damaged rollback record, ...): the log is still
		// printed as it lies on disk, with the reason it is not the
		// database's
		if _, err := multitree.LatestVersion(db); err != nil {
			fmt.Fprintf(diag, "wal dump: warning: the database does not open: %v; the log is printed as it lies on disk\n", err)
		}
	}
	l, err := wal.Open(walDir, wal.Options{ReadOnly: true, Discarding: rollbackTo})
	if err != nil {
		return err
	}
	defer l.Close()
	if walDumpOpened != nil {
		walDumpOpened()
	}
	first, last := l.FirstVersion(), l.LastVersion()
	tt, torn := l.TornTail()
	if torn {
		// the database's version, which its snapshot may hold beyond
		// the log's end
		at := last
		if _, err := os.Lstat(filepath.Join(db, currentName)); err == nil {
			if v, err := multitree.LatestVersion(db); err == nil {
				at = v
			}
		}
		fmt.Fprintf(diag, "wal dump: warning: %s\n", tornTailText(tt, at, false))
	}
	if to := rollbackTo; to > 0 && (to < last || torn) {
		fmt.Fprintf(diag, "wal dump: warning: a rollback to version %d is unfinished: the entries after it are not part of the database, and the next writable open removes them\n", to)
	}
	if last == 0 {
		if o.from != 0 || o.to != 0 {
			return fmt.Errorf("the log holds no versions, asked for --from %d --to %d", o.from, o.to)
		}
		if !o.asJSON {
			fmt.Fprintf(w, "log %s is empty\n", walDir)
		}
		return nil
	}
	from, to := first, last
	if o.from != 0 {
		from = o.from
	}
	if o.to != 0 {
		to = o.to
	}
	if from < first || to > last || from > to {
		return fmt.Errorf("the log holds versions %d..%d, asked for %d..%d", first, last, from, to)
	}
	if !o.asJSON {
		fmt.Fprintf(w, "log %s: versions %d..%d, printing %d..%d\n", walDir, first, last, from, to)
	}
	printed := from - 1
	err = l.Replay(from, to, func(e wal.Entry) error {
		printed = e.Version
		if o.asJSON {
			return writeWALEntryJSON(w, e, o.pairs)
		}
		writeWALEntry(w, e, o.pairs)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		// a node running on the directory prunes the log after each
		// snapshot rewrite
		at := "before any version was printed"
		if printed >= from {
			at = fmt.Sprintf("after version %d was printed", printed)
		}
		return fmt.Errorf("%w: a segment was removed while the log was read, %s "+
			"(a node using the database prunes the log after each snapshot); run again for the versions kept", err, at)
	}
	return err
}

// walDumpOpened, when set, runs after wal dump has opened the log (tests).
var walDumpOpened func()

func countPairs(cs wal.ChangeSet) (sets, dels int) {
	for _, p := range cs.Pairs {
		if p.Delete {
			dels++
		} else {
			sets++
		}
	}
	return sets, dels
}

func writeWALEntry(w io.Writer, e wal.Entry, pairs bool) {
	total := 0
	for _, cs := range e.ChangeSets {
		total += len(cs.Pairs)
	}
	fmt.Fprintf(w, "version %d: %d stores changed, %d pairs\n", e.Version, len(e.ChangeSets), total)
	u := e.Upgrades
	if len(u.Added)+len(u.Renamed)+len(u.Deleted) > 0 {
		renamed := make([]string, len(u.Renamed))
		for i, r := range u.Renamed {
			// quoted: a name may hold "->"
			renamed[i] = strconv.Quote(r.OldName) + "->" + strconv.Quote(r.NewName)
		}
		fmt.Fprintf(w, "  upgrades: added %s, renamed [%s], deleted %s\n", shownNames(u.Added), strings.Join(renamed, " "), shownNames(u.Deleted))
	}
	for _, cs := range e.ChangeSets {
		sets, dels := countPairs(cs)
		fmt.Fprintf(w, "  %s: %d sets, %d deletes\n", shownName(cs.Name), sets, dels)
		if !pairs {
			continue
		}
		for _, p := range cs.Pairs {
			if p.Delete {
				fmt.Fprintf(w, "    del %s\n", pairHex(p.Key))
			} else {
				fmt.Fprintf(w, "    set %s = %s\n", pairHex(p.Key), pairHex(p.Value))
			}
		}
	}
}

// pairHex is a key or value of the text dump: its hex, or "" when it is
// empty (an empty value is a value, unlike a delete's none).
func pairHex(b []byte) string {
	if len(b) == 0 {
		return `""`
	}
	return hex.EncodeToString(b)
}

func writeWALEntryJSON(w io.Writer, e wal.Entry, pairs bool) error {
	out := walEntryJSON{Version: e.Version, Stores: []walStoreJSON{}}
	if u := e.Upgrades; len(u.Added)+len(u.Renamed)+len(u.Deleted) > 0 {
		out.Upgrades = upgradesJSON(u)
	}
	for _, cs := range e.ChangeSets {
		s := walStoreJSON{Name: cs.Name, NameHex: nameHex(cs.Name)}
		s.Sets, s.Deletes = countPairs(cs)
		if pairs {
			for _, p := range cs.Pairs {
				jp := walPairJSON{Delete: p.Delete, Key: hex.EncodeToString(p.Key)}
				if !p.Delete {
					v := hex.EncodeToString(p.Value)
					jp.Value = &v
				}
				s.Pairs = append(s.Pairs, jp)
			}
		}
		out.Stores = append(out.Stores, s)
	}
	return writeJSONLine(w, out)
}
