package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
	"github.com/seed-6dfbb450/memiavl/internal/sysstat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// interruptible returns ctx (context.Background() if nil), done at the
// first SIGINT or SIGTERM: the work stops at its next check. A second
// signal ends the process at once (the signal's default action, restored
// after the first). stop releases the signals.
func interruptible(ctx context.Context) (_ context.Context, stop context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// interruptedImport is the error of an import that a signal stopped: what
// a failed import leaves, which each command's help tells. An import that
// failed for another reason before the signal stopped it (its error does
// not wrap the context's) keeps its own error.
func interruptedImport(ctx context.Context, dir string, err error) error {
	if err == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("interrupted; nothing was imported into %s (rerun the command to import): %w", dir, err)
}

// ctxReader reads from r until ctx is done, and then fails with ctx's error.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Names of the directory layout (see multitree/format.go).
const (
	snapshotPrefix = "snapshot-"
	walDirName     = "wal"
	currentName    = "current"
	tmpSuffix      = ".tmp"
)

func snapshotDirName(version int64) string { return fmt.Sprintf("%s%020d", snapshotPrefix, version) }

var plainStoreName = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,100}$`)

// nameHex is the hex of a store name that JSON cannot carry exactly (one
// that is not valid UTF-8, which encoding/json would change), "" for the
// others: reports print it beside the name.
func nameHex(name string) string {
	if utf8.ValidString(name) {
		return ""
	}
	return hex.EncodeToString([]byte(name))
}

// namesHex returns the hex of every name when one of them is not valid
// UTF-8, else nil.
func namesHex(names []string) []string {
	if !slices.ContainsFunc(names, func(n string) bool { return nameHex(n) != "" }) {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = hex.EncodeToString([]byte(n))
	}
	return out
}

// shownName is a store name as the text reports print it: quoted when it
// is not valid UTF-8 or holds a space or control character.
func shownName(name string) string {
	if utf8.ValidString(name) && strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0 {
		return name
	}
	return strconv.Quote(name)
}

// treeDirName is the directory of a store's tree inside a snapshot.
func treeDirName(store string) string {
	if plainStoreName.MatchString(store) {
		return "s-" + store
	}
	return "x-" + hex.EncodeToString([]byte(store))
}

// dirSize returns the bytes of the regular files under path (apparent
// size, through links as sysstat.WalkFiles follows them), 0 if it does not
// exist.
func dirSize(path string) int64 { return sysstat.ApparentSize(path) }

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func parseSyncPolicy(s string) (wal.SyncPolicy, error) {
	for _, p := range []wal.SyncPolicy{wal.SyncEveryCommit, wal.SyncGrouped, wal.SyncNone} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, usagef("unknown --sync policy %q (want %s, %s or %s)", s, wal.SyncEveryCommit, wal.SyncGrouped, wal.SyncNone)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// table prints aligned two-column rows.
type table struct {
	rows [][2]string
}

func (t *table) add(k, format string, args ...any) {
	t.rows = append(t.rows, [2]string{k, fmt.Sprintf(format, args...)})
}

func (t *table) write(w io.Writer) {
	width := 0
	for _, r := range t.rows {
		width = max(width, len(r[0]))
	}
	for _, r := range t.rows {
		if r[0] == "" {
			fmt.Fprintln(w, r[1])
			continue
		}
		fmt.Fprintf(w, "%-*s  %s\n", width, r[0], r[1])
	}
}

// absent reports whether err says a path does not exist: it is missing, or
// one of its parents is not a directory.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// checkDBDir makes sure dir looks like a database directory, so that a typo
// is reported plainly.
func checkDBDir(dir string) error {
	// an import interrupted between the two renames of its swap: the
	// database is read from beside dir (and a writable open finishes
	// the swap)
	dir = multitree.SourceDir(dir)
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	cur, err := os.Lstat(filepath.Join(dir, currentName))
	if absent(err) {
		// snapshots or log entries without current: a database that
		// lost the file, which the library refuses as damage, not a
		// directory that never held one
		if _, lerr := multitree.LatestVersion(dir); errors.Is(lerr, multitree.ErrCorrupt) {
			return lerr
		}
		return fmt.Errorf("%s holds no memiavl database (no 'current' file)", dir)
	}
	if err != nil {
		return err // permission denied, say
	}
	if !cur.Mode().IsRegular() {
		// the reference memiavl's current is a symbolic link to its
		// snapshot directory
		return fmt.Errorf("%s is not a database of this format ('current' is not a file): a directory of the reference (cronos) memiavl is migrated with 'memiavl import-memiavl'", dir)
	}
	return nil
}

// tornTailText describes a torn tail at the end of a database's log (see
// multitree.DB.LogTornTail), which a writer's open cuts off (cut) and a
// read-only one ignores; version is the database's latest.
func tornTailText(tt wal.TornTail, version int64, cut bool) string {
	what := "the next writable open cuts it off"
	if cut {
		what = "this open cut it off"
	}
	return fmt.Sprintf("the log ends in a torn tail: %d bytes at %s offset %d, an append a crash interrupted or a damaged last record; "+
		"the database is at version %d, and any version the tail held is lost (%s)", tt.Bytes, tt.Path, tt.Offset, version, what)
}

// refuseSourceInside refuses a source that an import only reads (a file or
// a directory) inside a destination dir that holds a database: an import
// over a database replaces dir as a whole, and the source would go with
// it. Into a directory without one the import writes beside the source.
func refuseSourceInside(src, dir, what string) error {
	if !within(src, dir) {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(dir, currentName)); err != nil {
		return nil // no database (or none to tell): the import says why
	}
	return usagef("%s %s is inside %s, which holds a database that the import would replace as a whole, the source with it: move the source outside first", what, src, dir)
}

// refuseInsideDatabase fails when dir, the destination of a command that
// creates a database, lies inside one (see enclosingDatabase).
// It also fails, as checkDirDestination, when dir cannot be a directory.
func refuseInsideDatabase(dir string) error {
	if err := checkDirDestination(dir); err != nil {
		return err
	}
	if db := enclosingDatabase(dir); db != "" {
		return fmt.Errorf("refusing to import into %s, inside the database directory %s", dir, db)
	}
	return nil
}

// checkDirDestination checks a directory that a command is to create or
// write into: if it exists it must be a directory (links followed), and so
// must the nearest of its ancestors that exists, so that the failure names
// the file in the way rather than a path the command would have made up.
func checkDirDestination(dir string) error {
	for p := dir; ; {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil && p == dir:
			return fmt.Errorf("%s is not a directory", dir)
		case err == nil:
			return fmt.Errorf("%s cannot be a directory: %s is not a directory", dir, p)
		case !absent(err):
			return err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

// enclosingDatabase returns the database directory that path lies inside
// (path's parent or a directory above it holding a database's current
// file), "" if there is none. Both the path as given (made absolute) and
// the path with its symbolic links resolved are looked at: a database's
// log directory may be a link to another disk, and a path through a link
// may end inside a database.
func enclosingDatabase(path string) string {
	if db := enclosingDatabaseOf(absDir(path)); db != "" {
		return db
	}
	return enclosingDatabaseOf(resolvePath(path))
}

func enclosingDatabaseOf(abs string) string {
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if fi, err := os.Lstat(filepath.Join(d, currentName)); err == nil && fi.Mode().IsRegular() {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// resolvePath returns path made absolute with the symbolic links of its
// longest existing part resolved: path itself may not exist yet. A path
// that is a symbolic link to a missing file is followed to that file,
// which is where a command creating path creates it.
func resolvePath(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	p = osfile.FollowDangling(p)
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		if filepath.Dir(q) == q {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

// absDir returns dir made absolute: an import into "." replaces the
// directory the process runs in, after which "." names the replaced one.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// argPath returns a path given on the command line as the command uses
// it: as given, unless one of its elements is "..", in which case it is
// made absolute with "..", and the symbolic links before it, resolved as
// the system resolves them (osfile.SystemPath). filepath.Abs, which the
// checks and the library apply to a path, takes a ".." as text: for
// link/../name it names a place beside the link, where the system names
// one beside the link's target. Without a "..", the two agree.
func argPath(p string) string {
	for _, e := range strings.Split(filepath.ToSlash(p), "/") {
		if e == ".." {
			return osfile.SystemPath(p)
		}
	}
	return p
}

// argPaths applies argPath to every argument, in place.
func argPaths(args []string) {
	for i, a := range args {
		args[i] = argPath(a)
	}
}
