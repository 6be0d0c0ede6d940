package multitree

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// fsyncOrderVersions is how many versions the first phase of the main
// case of TestFsyncOrderChild commits.
const fsyncOrderVersions = 40

// TestFsyncOrderChild is the process TestFsyncOrder traces. It runs the
// case MEMIAVL_FSYNCORDER_CASE names in MEMIAVL_FSYNCORDER_DIR and writes
// a marker line after each step to the file MEMIAVL_FSYNCORDER_MARK with
// one write(2), which the trace shows: "acked N" once Commit of version N
// returned ("acked N bysnapshot" when that Commit wrote a snapshot instead
// of a log entry), "closed" once Close returned, "phase ..." before each
// step, and the markers of the cases below.
//
//   - main: creates a database, commits with background rewrites every 5
//     versions (so that rewrites, switches and prunes happen), rewrites a
//     snapshot synchronously, closes, reopens, commits more, closes,
//     reopens with a rollback and commits again.
//   - bysnapshot: commits versions whose log entries are over the bound
//     (SetMaxLoggedEntry), each by a snapshot of its own, while delayed
//     background rewrites run, closes, reopens and commits one more such
//     version first.
//   - policies: for each relaxed fsync policy of the log, a database of
//     its own in DIR/<policy> ("use <policy>" before it): commits, a
//     Flush of the log ("flushed N": every version up to N was appended
//     before it), under SyncGrouped a pause of many GroupIntervals
//     ("idle"), and Close.
//   - import: imports (Import) a source database's trees into a new
//     directory, and over existing databases with Replace, swapped in by
//     RENAME_EXCHANGE and by the two-rename fallback: "phase import-<how>
//     <name>" before, "imported <name>" once Import returned, "closed
//     <name>" once the database to be replaced was created and closed;
//     and into a new directory with a Finish step that commits versions
//     under SyncNone ("phase import-finish fin").
//   - killed: for each of fsoKilled, in DIR/<name> ("use <name>"), what a
//     process killed between the rename of "current" and the fsync of
//     its directory leaves, then a writer Open and commits (see
//     fsoChildKilled).
func TestFsyncOrderChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_FSYNCORDER_DIR")
	if dir == "" {
		t.Skip("only run as TestFsyncOrder's child process")
	}
	mark := fsoMarks(t, os.Getenv("MEMIAVL_FSYNCORDER_MARK"))
	switch c := os.Getenv("MEMIAVL_FSYNCORDER_CASE"); c {
	case "", "main":
		fsoChildMain(t, dir, mark)
	case "bysnapshot":
		fsoChildBySnapshot(t, dir, mark)
	case "policies":
		fsoChildPolicies(t, dir, mark)
	case "import":
		fsoChildImport(t, dir, mark)
	case "killed":
		fsoChildKilled(t, dir, mark)
	default:
		t.Fatalf("unknown case %q", c)
	}
	mark("done")
}

type fsoMark func(format string, args ...any)

// fsoMarks opens the marker file at path (appending), closed at t's end,
// and returns the mark that writes a line to it.
func fsoMarks(t *testing.T, path string) fsoMark {
	mf, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mf.Close() })
	return func(format string, args ...any) {
		if _, err := mf.Write([]byte(fmt.Sprintf(format, args...) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
}

// fsoCommit applies css to db, commits and writes the "acked" marker.
func fsoCommit(t *testing.T, db *DB, css []wal.ChangeSet, mark fsoMark) int64 {
	t.Helper()
	if err := db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	before := SnapshotCommits(db)
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if SnapshotCommits(db) > before {
		mark("acked %d bysnapshot", info.Version)
	} else {
		mark("acked %d", info.Version)
	}
	return info.Version
}

func fsoClose(t *testing.T, db *DB, mark fsoMark) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	mark("closed")
}

func fsoChildMain(t *testing.T, dir string, mark fsoMark) {
	const seed = 7
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 5,
		SnapshotKeepRecent: 1, WALSegmentSize: 48 << 10}
	commit := func(db *DB) {
		t.Helper()
		v := fsoCommit(t, db, crashBlock(seed, db.WorkingVersion()), mark)
		if v%10 == 6 {
			// let this interval's rewrite finish, so that the next
			// commit switches to it and prunes; the others overlap
			// the commits
			db.mu.Lock()
			job := db.mu.rewrite
			db.mu.Unlock()
			if job != nil {
				<-job.done
			}
		}
	}

	mark("phase create")
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	mark("phase commits")
	for db.WorkingVersion() <= fsyncOrderVersions/2 {
		commit(db)
	}
	mark("phase rewrite")
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	mark("phase commits")
	for db.WorkingVersion() <= fsyncOrderVersions*3/4 {
		commit(db)
	}
	mark("phase close")
	fsoClose(t, db, mark)

	mark("phase reopen")
	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	mark("phase commits")
	for db.WorkingVersion() <= fsyncOrderVersions {
		commit(db)
	}
	mark("phase close")
	fsoClose(t, db, mark)

	// below the current snapshot: the rollback moves current back to the
	// older kept snapshot, removes the newer one and cuts the log
	cur, err := readCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	target := cur - 1
	mark("phase rollback %d", target)
	ropts := opts
	ropts.TargetVersion, ropts.Rollback = target, true
	if db, err = Open(dir, ropts); err != nil {
		t.Fatal(err)
	}
	if v := db.Version(); v != target {
		t.Fatalf("rolled back to %d, want %d", v, target)
	}
	mark("phase commits")
	for db.WorkingVersion() <= target+4 {
		commit(db)
	}
	mark("phase close")
	fsoClose(t, db, mark)
}

// fsoLargeVersions are the versions the bysnapshot case commits by a
// snapshot: one while a delayed rewrite is in flight, two in a row (the
// second finds the log empty), and the first after a reopen.
var fsoLargeVersions = map[int64]bool{6: true, 11: true, 12: true, 19: true, 25: true}

func fsoChildBySnapshot(t *testing.T, dir string, mark fsoMark) {
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 4,
		SnapshotKeepRecent: 2, WALSegmentSize: 48 << 10}
	open := func() *DB {
		t.Helper()
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		// a rewrite waits for 2 more commits, so that a large version
		// may come while one is in flight and drop it
		DelayRewrites(db, 2)
		SetMaxLoggedEntry(db, 96<<10)
		return db
	}
	commit := func(db *DB) {
		t.Helper()
		v := db.WorkingVersion()
		css := crashBlock(11, v)
		if fsoLargeVersions[v] {
			css = largeBlock(v, 128<<10)
		}
		before := SnapshotCommits(db)
		fsoCommit(t, db, css, mark)
		if by := SnapshotCommits(db) > before; by != fsoLargeVersions[v] {
			t.Fatalf("version %d committed by a snapshot: %v", v, by)
		}
	}
	mark("phase create")
	db := open()
	mark("phase commits")
	for db.WorkingVersion() <= 22 {
		commit(db)
	}
	mark("phase close")
	fsoClose(t, db, mark)
	mark("phase reopen")
	db = open()
	mark("phase commits")
	for db.WorkingVersion() <= 27 {
		commit(db)
	}
	mark("phase close")
	fsoClose(t, db, mark)
}

// fsoPolicy is one database of the policies case.
type fsoPolicy struct {
	name    string
	sync    wal.SyncPolicy
	async   int // Options.AsyncCommitBuffer
	commits int
	flushAt int64 // the version after whose commit the log is flushed
	segment int64 // Options.WALSegmentSize
	// interval is Options.SnapshotInterval (0: none); the policy's
	// database then keeps all its snapshots and log
	interval int64
}

// fsoPolicies are the relaxed fsync policies checked. Segments of a few
// KiB hold a few entries each, so that rollovers happen. SyncGrouped in
// synchronous mode runs more versions than wal.DefaultGroupCount in one
// segment, so that its count bound is reached when the self-check takes
// its fsyncs out.
var fsoPolicies = []fsoPolicy{
	{"every-async", wal.SyncEveryCommit, 3, 24, 10, 6 << 10, 0},
	// one segment: its fsyncs are the policy's, not those of rollovers
	{"grouped-sync", wal.SyncGrouped, 0, wal.DefaultGroupCount + 8, 10, 1 << 20, 0},
	{"grouped-async", wal.SyncGrouped, 3, 24, 10, 6 << 10, 0},
	{"none-sync", wal.SyncNone, 0, 24, 10, 6 << 10, 0},
	{"none-async", wal.SyncNone, 3, 24, 10, 6 << 10, 0},
	// background rewrites: the log must be durable up to a rewrite's
	// snapshot before current names it
	{"none-rewrite", wal.SyncNone, 3, 24, 10, 6 << 10, 5},
}

// fsoIdlePause is how long the policies case waits after its last commit
// under SyncGrouped, in GroupIntervals: the timer's fsync must have
// started by then (a second, for a child traced by strace on a loaded
// machine; the timer fires after one interval).
const fsoIdlePause = 100

// fsoSmallBlock returns a small deterministic block of changes, so that
// log segments of a few KiB hold several entries.
func fsoSmallBlock(v int64) []wal.ChangeSet {
	var css []wal.ChangeSet
	for i, name := range crashStores {
		cs := wal.ChangeSet{Name: name}
		for j := int64(0); j < 4; j++ {
			key := []byte(fmt.Sprintf("k%02d-%d", (v*7+j)%50, i))
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: key, Value: bytes.Repeat([]byte{byte(v + j)}, 40+int(j))})
		}
		css = append(css, cs)
	}
	return css
}

func fsoChildPolicies(t *testing.T, dir string, mark fsoMark) {
	for _, p := range fsoPolicies {
		mark("use %s", p.name)
		mark("phase %s", p.name)
		interval, keep := int64(-1), 0
		if p.interval > 0 {
			interval, keep = p.interval, p.commits
		}
		db, err := Open(filepath.Join(dir, p.name), Options{CreateIfMissing: true, InitialStores: crashStores,
			SnapshotInterval: interval, SnapshotKeepRecent: keep, WALSegmentSize: p.segment, Sync: p.sync, AsyncCommitBuffer: p.async})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p.commits; i++ {
			v := fsoCommit(t, db, fsoSmallBlock(db.WorkingVersion()), mark)
			if p.interval > 0 && v%p.interval == 0 {
				// the rewrite of v installs its snapshot before the
				// log holds v+1, whose record would start a segment
				// (an fsync of the one that holds v)
				waitRewrite(db)
			}
			if v == p.flushAt {
				if err := db.log.Flush(); err != nil {
					t.Fatal(err)
				}
				mark("flushed %d", v)
			}
		}
		if p.sync == wal.SyncGrouped {
			time.Sleep(fsoIdlePause * wal.DefaultGroupInterval)
			mark("idle")
		}
		fsoClose(t, db, mark)
	}
}

// fsoKilled are the databases of the killed case: a process was killed
// between the rename of "current" and the fsync of the database
// directory that makes it durable, inside snapshotCommitLocked (reset: the
// snapshot is a version the log does not hold) or inside an offline
// RewriteSnapshot (prune), and a writer Open and commits follow.
var fsoKilled = []struct {
	name string
	bump bool // the snapshot is a version after the log's last
	keep int  // Options.SnapshotKeepRecent
}{
	{"reset", true, 1},
	{"prune", false, 0},
}

// fsoChildKilled leaves, for each of fsoKilled, what the killed process
// leaves (without killing one, which strace cannot do at that point
// reliably: it counts calls per thread): a database with versions 1..5 in
// its log, snapshot 0 current, a new snapshot written and durable, and
// "current" renamed to name it, the directory not fsynced since. It then
// opens the database as a writer, as the restarted process does, and
// commits.
func fsoChildKilled(t *testing.T, dir string, mark fsoMark) {
	for _, k := range fsoKilled {
		mark("use %s", k.name)
		p := filepath.Join(dir, k.name)
		opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1,
			SnapshotKeepRecent: k.keep, WALSegmentSize: 48 << 10}
		mark("phase commits")
		db, err := Open(p, opts)
		if err != nil {
			t.Fatal(err)
		}
		for db.WorkingVersion() <= 5 {
			fsoCommit(t, db, crashBlock(5, db.WorkingVersion()), mark)
		}
		fsoClose(t, db, mark)

		mark("phase killed")
		ro, err := Open(p, Options{ReadOnly: true, OpenCheck: OpenCheckNone})
		if err != nil {
			t.Fatal(err)
		}
		v := ro.Version()
		if k.bump {
			// the saved version a snapshot commit writes
			v++
			for name, tr := range ro.mu.trees {
				if _, err := tr.Set([]byte("large"), bytes.Repeat([]byte(name), 100)); err != nil {
					t.Fatal(err)
				}
				if _, _, err := tr.SaveVersion(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := writeSnapshotDir(context.Background(), p, v, ro.mu.initial, ro.mu.trees, 1, nil, nil); err != nil {
			t.Fatal(err)
		}
		// writeFileAtomic up to its rename
		tmp := filepath.Join(p, currentFileName+tmpSuffix)
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(encodeCurrent(v)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(p, currentFileName)); err != nil {
			t.Fatal(err)
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}

		mark("phase reopen")
		if db, err = Open(p, opts); err != nil {
			t.Fatal(err)
		}
		if db.Version() != v {
			t.Fatalf("reopened at %d, want %d", db.Version(), v)
		}
		mark("phase commits")
		for i := 0; i < 3; i++ {
			fsoCommit(t, db, crashBlock(5, db.WorkingVersion()), mark)
		}
		fsoClose(t, db, mark)
	}
}

// fsoImportVersion is the version the import case imports at.
const fsoImportVersion = 7

// fsoImportSource creates the database imports copy from in srcDir (to
// be outside the traced directory), committed up to fsoImportVersion; the
// caller closes it.
func fsoImportSource(t *testing.T, srcDir string) *DB {
	t.Helper()
	src, err := Open(srcDir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for src.WorkingVersion() <= fsoImportVersion {
		if err := src.ApplyChangeSets(crashBlock(3, src.WorkingVersion())); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// fsoSources returns an export of each store of src's latest version, for
// an import, and the release of the exports and their view.
func fsoSources(t *testing.T, src *DB) (map[string]NodeSource, func()) {
	t.Helper()
	view, err := src.View()
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]NodeSource{}
	var closers []func()
	for _, store := range view.StoreNames() {
		e := view.Tree(store).Export()
		closers = append(closers, e.Close)
		sources[store] = e
	}
	return sources, func() {
		for _, c := range closers {
			c()
		}
		view.Release()
	}
}

func fsoChildImport(t *testing.T, dir string, mark fsoMark) {
	src := fsoImportSource(t, filepath.Join(filepath.Dir(dir), "src"))
	defer src.Close()
	imp := func(name string, replace bool) {
		t.Helper()
		sources, release := fsoSources(t, src)
		defer release()
		opts := ImportOptions{Replace: replace, Concurrency: 2}
		if name == "fin" {
			opts.FinishOptions = Options{Sync: wal.SyncNone, SnapshotInterval: -1}
			opts.Finish = func(db *DB) error {
				for db.WorkingVersion() <= fsoImportVersion+3 {
					if err := db.ApplyChangeSets(crashBlock(3, db.WorkingVersion())); err != nil {
						return err
					}
					if _, err := db.Commit(); err != nil {
						return err
					}
				}
				return nil
			}
		}
		if _, err := Import(filepath.Join(dir, name), fsoImportVersion, sources, opts); err != nil {
			t.Fatal(err)
		}
		mark("imported %s", name)
	}
	existing := func(name string) {
		t.Helper()
		db, err := Open(filepath.Join(dir, name), Options{CreateIfMissing: true, InitialStores: crashStores})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		mark("closed %s", name)
	}

	mark("phase import-new new")
	imp("new", false)
	mark("phase import-finish fin")
	imp("fin", false)

	mark("phase create exch")
	existing("exch")
	mark("phase import-exchange exch")
	imp("exch", true)
	// again, over the imported database at the same version
	mark("phase import-exchange exch")
	imp("exch", true)

	exchange = func(string, string) error { return unix.EINVAL }
	defer func() { exchange = exchangeDirs }()
	mark("phase create ren")
	existing("ren")
	mark("phase import-rename ren")
	imp("ren", true)
	mark("phase import-rename ren")
	imp("ren", true)
	mark("phase end")
}

// TestFsyncOrder checks that the database survives a power loss, which a
// process kill (TestCrashPoints) cannot show: after a power loss only data
// that was fsynced survives, and a creation, rename or removal of a
// directory entry only if the directory was fsynced after it. It traces
// each case of TestFsyncOrderChild with strace (-y prints the path of
// every descriptor) and replays the trace against a model of what is
// durable: a file's data is dirty from a write (or truncation) until an
// fsync or fdatasync of it that starts after the write ended; an entry is
// dirty from its creation (open with O_CREAT, mkdir, rename to it, either
// side of a RENAME_EXCHANGE) until an fsync of its directory that starts
// after it. Calls on different threads are ordered by strace's lines: a
// call takes effect at its last line and is checked at its first. The
// rules, taken from the code's own comments:
//
//   - tmp-rename (format.go, files.go, snapshot.Writer, wal rollLocked,
//     import.go swap): before X is renamed (or exchanged) to a name
//     outside any temporary directory, with X a temporary name, every
//     file under X (or X itself) has its data fsynced and every entry
//     under X (and every removal in it) is durable. A rename inside a
//     temporary directory (a store's tree, DeferSync, an import's staging
//     directory) is checked at the rename of the outer directory.
//   - current (rewrite.go "the log must be durable up to the snapshot
//     before current points at it", format.go): when "current" is
//     replaced, the snapshot directory its new content names is durable
//     (its entry in the database directory and everything in it), and so
//     is the log up to that version; a current that moves back (a
//     rollback) requires the "rollback" file to be durable.
//   - ack (multitree doc "Durability", wal doc, SyncEveryCommit): once
//     Commit of version v returned (the child's marker), the log segments
//     holding versions up to v are durable (data fsynced, entries and the
//     wal directory's entry durable), and so is every snapshot that
//     "current" may name after a power loss (the last durable one, and
//     one renamed into place whose directory was not fsynced since), with
//     the log reaching back to just after it if a version after it was
//     acknowledged.
//   - bysnapshot (db.go snapshotCommitLocked, multitree doc "Durability"):
//     once Commit of a version v that was committed by a snapshot
//     returned, every "current" that may survive a power loss names v
//     (the log does not hold v), and snapshot v is durable.
//   - log-reset (db.go snapshotCommitLocked, wal Reset): a log segment
//     holding records is removed from the back of the log (a Reset)
//     without a recorded rollback only when every "current" that may
//     survive a power loss is at or past the last version it may hold,
//     and the snapshots they name are durable: the log is emptied only
//     behind a durable snapshot.
//   - remove (rewrite.go prune, files.go removeSnapshotDir, wal
//     TruncateFront): a snapshot directory is removed (or renamed to its
//     ".pruned.tmp" name) only when no "current" that may survive a power
//     loss names it; a log segment is removed from the front only when
//     every such "current" is at or past its last version; a segment
//     holding records is removed from the back past what "current"
//     covers, or cut (ftruncate), only while a durable "rollback" file
//     records the rollback (format.go).
//   - roll (wal doc "a segment is fsynced before the next one is
//     created"): when a log segment file is created, the data of every
//     existing segment is fsynced.
//   - rollback-done (format.go "removes it once the newer snapshots are
//     gone and the log is cut back"): when the "rollback" file is
//     removed, "current" is durable, the log's cut (ftruncate) is fsynced
//     and the removals of the newer segments are durable.
//   - close (wal Close "fsyncs what is unsynced under every policy"):
//     once Close returned, everything in the database directory but LOCK
//     is durable.
//   - policy (wal doc "What a crash can lose", per policy; the policies
//     case, see durModel.checkPolicyAck): what a power loss may lose of
//     the acknowledged versions stays within what the package documents
//     for the policy; there it replaces the demand of the ack rule that
//     the log be durable.
//   - import-durable, import-swap, import-remove (import.go; the import
//     case, see fsoImportModel): once Import returned the database is
//     durable at dir; no power loss while an import replaces a database
//     leaves dir without one of the two databases (directly or as
//     finishSwap recovers it); the replaced database is removed only once
//     the new one is durably in place.
//
// Also checked: the database directory's own entry, made by Open
// (CreateIfMissing), is durable in its parent before the first
// acknowledged commit; and each log segment removal is durable before the
// next one (a power loss may keep any subset of removals made under one
// fsync of the directory, which would leave a gap in the log).
//
// The killed case applies the rules to a writer Open that follows a
// process killed between the rename of "current" and the fsync that makes
// it durable: the page cache survives a process kill, so the trace of the
// process that restarts continues the model of the killed one.
//
// Each case then takes single fsyncs out of the trace and checks that
// each rule reports it (fsoSelfCheck). MEMIAVL_FSYNCORDER_KEEP=path keeps
// the traces (path.<case>); MEMIAVL_FSYNCORDER_DEBUG=1 logs what the
// self-checks found.
func TestFsyncOrder(t *testing.T) {
	if os.Getenv("MEMIAVL_FSYNCORDER_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	t.Run("main", func(t *testing.T) { fsoMainCase(t, strace) })
	t.Run("bysnapshot", func(t *testing.T) { fsoBySnapshotCase(t, strace) })
	t.Run("policies", func(t *testing.T) { fsoPoliciesCase(t, strace) })
	t.Run("import", func(t *testing.T) { fsoImportCase(t, strace) })
	t.Run("killed", func(t *testing.T) { fsoKilledCase(t, strace) })
}

// fsoKilledCase checks a writer Open after a process was killed between
// the rename of "current" and the fsync that makes it durable (see
// fsoChildKilled), with the main case's rules.
func fsoKilledCase(t *testing.T, strace string) {
	dir := filepath.Join(t.TempDir(), "k")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := fsoRunChild(t, strace, "killed", dir)
	for _, k := range fsoKilled {
		m := newDurModel(filepath.Join(dir, k.name), tr.markFile, tr.lines)
		m.active = false
		m.run(tr.calls)
		fsoCounts(t, []fsoCount{
			{k.name + " acknowledged commits", m.stats.acks, 8},
			{k.name + " snapshot removals", m.stats.snapRemovals, 1},
		})
		t.Logf("%s: checked %d acks, %d closes, %d current replacements, %d snapshot removals, %d reset and %d front log removals",
			k.name, m.stats.acks, m.stats.closes, m.stats.currents, m.stats.snapRemovals, m.stats.resets, m.stats.frontRemovals)
		for _, v := range m.violationList() {
			t.Errorf("%s: %s", k.name, v)
		}
	}
}

// fsoTrace is the parsed trace of one case of TestFsyncOrderChild.
type fsoTrace struct {
	dir, markFile string
	lines         []string
	calls         []*straceCall
}

// fsoRunChild runs case name of TestFsyncOrderChild under strace in dir,
// whose parent must be a directory of the test's own, and dir (if it
// exists) an empty one. A run where strace failed on its own, whose trace
// is incomplete, is run again from an empty dir
// (testutil.RetryStraceFailures).
func fsoRunChild(t *testing.T, strace, name, dir string) *fsoTrace {
	t.Helper()
	tmp := filepath.Dir(dir)
	trace := filepath.Join(tmp, "strace.out")
	markFile := filepath.Join(tmp, "markers")
	_, statErr := os.Stat(dir)
	attempt := 0
	out, err := testutil.RetryStraceFailures(t, strace, "child "+name, func() ([]byte, error) {
		if attempt++; attempt > 1 { // from an empty dir again
			for _, p := range []string{dir, trace, markFile} {
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
			}
			if statErr == nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd := exec.Command(strace, "-f", "-y", "-x", "-s", "64", "-qq", "-o", trace,
			"-e", "trace="+fsyncOrderCalls,
			os.Args[0], "-test.run=^TestFsyncOrderChild$", "-test.v")
		cmd.Env = append(os.Environ(), "MEMIAVL_FSYNCORDER_CASE="+name, "MEMIAVL_FSYNCORDER_DIR="+dir, "MEMIAVL_FSYNCORDER_MARK="+markFile)
		return cmd.CombinedOutput()
	})
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if keep := os.Getenv("MEMIAVL_FSYNCORDER_KEEP"); keep != "" {
		b, _ := os.ReadFile(trace)
		_ = os.WriteFile(keep+"."+name, b, 0o644)
	}
	return fsoLoadTrace(t, trace, dir, markFile)
}

// fsoLoadTrace reads and parses the strace output file trace of a child
// that ran in dir with markFile.
func fsoLoadTrace(t *testing.T, trace, dir, markFile string) *fsoTrace {
	t.Helper()
	lines, err := fsoReadLines(trace)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := fsoParseStrace(lines)
	if err != nil {
		t.Fatal(err)
	}
	return &fsoTrace{dir: dir, markFile: markFile, lines: lines, calls: calls}
}

type fsoCount struct {
	what   string
	n, min int
}

// fsoCounts reports the checks that saw less than they check.
func fsoCounts(t *testing.T, counts []fsoCount) {
	t.Helper()
	for _, c := range counts {
		if c.n < c.min {
			t.Errorf("the trace shows %d %s, want at least %d: the child or the parser is off", c.n, c.what, c.min)
		}
	}
}

func fsoMainCase(t *testing.T, strace string) {
	tr := fsoRunChild(t, strace, "main", filepath.Join(t.TempDir(), "db"))
	run := func(calls []*straceCall) *durModel {
		m := newDurModel(tr.dir, tr.markFile, tr.lines)
		m.run(calls)
		return m
	}
	m := run(tr.calls)
	f := newFsoFinder(tr)
	firstAck := f.first(0, func(c *straceCall) bool { return strings.HasPrefix(f.marker(c), "acked ") })
	root := filepath.Clean(tr.dir)
	fsoSelfCheck(t, tr.calls, func(calls []*straceCall) []*durViolation { return run(calls).violationSlice() }, []fsoMutation{
		{"the fsyncs of the log between two acknowledged commits", []string{"ack"}, func() []int {
			return f.all(f.markerAt("acked 11"), f.markerAt("acked 12"), func(c *straceCall) bool {
				return f.isFsync(c) && strings.HasSuffix(f.path(c), ".wal")
			})
		}},
		{"the fsync of current.tmp", []string{"tmp-rename"}, func() []int {
			return []int{f.first(firstAck, f.fsyncOf(filepath.Join(root, currentFileName+tmpSuffix)))}
		}},
		{"a snapshot file's fsync in a sync group", []string{"tmp-rename"}, func() []int {
			r := regexp.MustCompile(`/snapshot-[0-9]{20}\.tmp/s-[^/]+/kvs$`)
			return []int{f.first(firstAck, func(c *straceCall) bool { return f.isFsync(c) && r.MatchString(f.path(c)) })}
		}},
		{"the fsync of the database directory after a snapshot's rename", []string{"current"}, func() []int {
			i := f.first(firstAck, f.renameTo(`/snapshot-[0-9]{20}$`))
			return []int{f.first(i, f.fsyncOf(root))}
		}},
		{"the fsync of the log directory after a segment's rename", []string{"ack"}, func() []int {
			i := f.first(firstAck, f.renameTo(`/wal/[0-9]{20}\.wal$`))
			return []int{f.first(i, f.fsyncOf(filepath.Join(root, walDirName)))}
		}},
		{"the fsyncs of a log segment after its last write, before the next one is created", []string{"roll"}, func() []int {
			return f.rollFsyncs(firstAck, len(tr.calls))
		}},
		{"the fsync of the database directory after the rollback file's rename", []string{"remove", "current"}, func() []int {
			i := f.first(0, f.renameTo(`/`+rollbackFileName+`$`))
			return []int{f.first(i, f.fsyncOf(root))}
		}},
		{"the fsync of the database directory after the rollback moved current back", []string{"remove"}, func() []int {
			i := f.first(0, f.renameTo(`/`+rollbackFileName+`$`))
			i = f.first(i, f.renameTo(`/`+currentFileName+`$`))
			return []int{f.first(i, f.fsyncOf(root))}
		}},
		{"the fsync of the log segment the rollback cut", []string{"rollback-done"}, func() []int {
			i := f.first(0, func(c *straceCall) bool { return c.name == "ftruncate" && strings.HasSuffix(f.path(c), ".wal") })
			if i < 0 {
				return nil
			}
			return []int{f.first(i, f.fsyncOf(f.path(tr.calls[i])))}
		}},
	})

	// the checks must have seen what they check
	fsoCounts(t, []fsoCount{
		{"acknowledged commits", m.stats.acks, fsyncOrderVersions},
		{"closes", m.stats.closes, 3},
		{"replacements of current", m.stats.currents, 6},
		{"renames of temporary names into place", m.stats.tmpRenames, 20},
		{"snapshot removals", m.stats.snapRemovals, 3},
		{"log segments removed from the front", m.stats.frontRemovals, 3},
		{"log segments created", m.stats.rolls, 10},
		{"log cuts of the rollback", m.stats.cuts, 1},
		{"rollback file removals", m.stats.rollbackDone, 1},
	})
	t.Logf("checked %d acks, %d closes, %d current replacements, %d temporary renames, %d snapshot removals, %d front log removals, %d segment creations, %d log cuts, %d fsyncs",
		m.stats.acks, m.stats.closes, m.stats.currents, m.stats.tmpRenames, m.stats.snapRemovals, m.stats.frontRemovals, m.stats.rolls, m.stats.cuts, m.stats.fsyncs)
	for _, v := range m.violationList() {
		t.Error(v)
	}
}

// fsoBySnapshotCase checks the commits of versions too large for the log
// (snapshotCommitLocked): the rules bysnapshot and log-reset besides the
// main case's.
func fsoBySnapshotCase(t *testing.T, strace string) {
	tr := fsoRunChild(t, strace, "bysnapshot", filepath.Join(t.TempDir(), "db"))
	run := func(calls []*straceCall) *durModel {
		m := newDurModel(tr.dir, tr.markFile, tr.lines)
		m.run(calls)
		return m
	}
	m := run(tr.calls)
	f := newFsoFinder(tr)
	root := filepath.Clean(tr.dir)
	curRename := f.renameTo(`/` + currentFileName + `$`)
	fsoSelfCheck(t, tr.calls, func(calls []*straceCall) []*durViolation { return run(calls).violationSlice() }, []fsoMutation{
		// the first snapshot commit finds entries in the log: its reset
		// removes them while the old current may still survive
		{"the fsyncs of the database directory from current's rename to the log's reset in the first snapshot commit", []string{"log-reset"}, func() []int {
			a := f.markerAt("acked 6 bysnapshot")
			i := f.last(f.markerAt("acked 5"), a, curRename)
			j := f.first(i, func(c *straceCall) bool {
				return strings.HasPrefix(c.name, "unlink") && strings.HasSuffix(f.path(c), ".wal")
			})
			if j < 0 || j > a {
				return nil
			}
			return f.all(i, j, f.fsyncOf(root))
		}},
		// the second of two in a row finds the log empty: only its
		// acknowledgement can tell
		{"the fsyncs of the database directory from current's rename to the acknowledgement of the second snapshot commit in a row", []string{"bysnapshot"}, func() []int {
			a := f.markerAt("acked 12 bysnapshot")
			i := f.last(f.markerAt("acked 11 bysnapshot"), a, curRename)
			if i < 0 {
				return nil
			}
			return f.all(i, a, f.fsyncOf(root))
		}},
		{"a snapshot file's fsync in the snapshot commit of version 19", []string{"tmp-rename"}, func() []int {
			r := regexp.MustCompile(`/snapshot-00000000000000000019\.tmp/s-acc/kvs$`)
			return []int{f.first(0, func(c *straceCall) bool { return f.isFsync(c) && r.MatchString(f.path(c)) })}
		}},
	})
	fsoCounts(t, []fsoCount{
		{"acknowledged commits", m.stats.acks, 26},
		{"commits by a snapshot", m.stats.bySnapshot, len(fsoLargeVersions)},
		{"log segments removed by a reset", m.stats.resets, 3},
		{"closes", m.stats.closes, 2},
		{"replacements of current", m.stats.currents, 6},
		{"snapshot removals", m.stats.snapRemovals, 4},
	})
	t.Logf("checked %d acks (%d by a snapshot), %d closes, %d current replacements, %d temporary renames, %d snapshot removals, %d reset and %d front log removals, %d fsyncs",
		m.stats.acks, m.stats.bySnapshot, m.stats.closes, m.stats.currents, m.stats.tmpRenames, m.stats.snapRemovals, m.stats.resets, m.stats.frontRemovals, m.stats.fsyncs)
	for _, v := range m.violationList() {
		t.Error(v)
	}
}

// fsoPoliciesCase checks what package wal documents each relaxed fsync
// policy may lose (the policy rule, see durModel.checkPolicyAck), besides
// the rules that hold under every policy.
func fsoPoliciesCase(t *testing.T, strace string) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "p")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := fsoRunChild(t, strace, "policies", dir)
	layouts := map[string]map[string][]fsoRec{}
	for _, p := range fsoPolicies {
		l, err := fsoSegmentLayout(filepath.Join(dir, p.name, walDirName))
		if err != nil {
			t.Fatal(err)
		}
		layouts[p.name] = l
	}
	run := func(calls []*straceCall) []*durModel {
		var ms []*durModel
		for i := range fsoPolicies {
			p := &fsoPolicies[i]
			m := newDurModel(filepath.Join(dir, p.name), tr.markFile, tr.lines)
			m.policy, m.layout, m.active = p, layouts[p.name], false
			m.run(calls)
			ms = append(ms, m)
		}
		return ms
	}
	ms := run(tr.calls)
	f := newFsoFinder(tr)
	use := func(name string) (from, to int) {
		from = f.markerAt("use " + name)
		return from, f.first(from+1, func(c *straceCall) bool { return strings.HasPrefix(f.marker(c), "use ") || f.marker(c) == "done" })
	}
	segFsync := func(name string) func(c *straceCall) bool {
		d := filepath.Join(dir, name, walDirName) + "/"
		return func(c *straceCall) bool {
			return f.isFsync(c) && strings.HasPrefix(f.path(c), d) && strings.HasSuffix(f.path(c), ".wal")
		}
	}
	fsoSelfCheck(t, tr.calls, func(calls []*straceCall) []*durViolation {
		var out []*durViolation
		for _, m := range run(calls) {
			out = append(out, m.violationSlice()...)
		}
		return out
	}, []fsoMutation{
		{"every fsync of the log under SyncEveryCommit with an asynchronous buffer", []string{"policy"}, func() []int {
			from, to := use("every-async")
			return f.all(from, f.markerIn(from, to, "closed"), segFsync("every-async"))
		}},
		{"every fsync of the log under SyncGrouped (GroupCount)", []string{"policy"}, func() []int {
			from, to := use("grouped-sync")
			return f.all(from, f.markerIn(from, to, "idle"), segFsync("grouped-sync"))
		}},
		{"the last fsync of the log before the pause under SyncGrouped (GroupInterval)", []string{"policy"}, func() []int {
			from, to := use("grouped-sync")
			return []int{f.last(from, f.markerIn(from, to, "idle"), segFsync("grouped-sync"))}
		}},
		{"the last fsync of the log before a Flush returned, under SyncGrouped", []string{"policy"}, func() []int {
			from, to := use("grouped-async")
			return []int{f.last(from, f.markerIn(from, to, "flushed 10"), segFsync("grouped-async"))}
		}},
		{"the fsync of a full log segment under SyncNone", []string{"policy", "roll"}, func() []int {
			from, to := use("none-sync")
			return f.rollFsyncs(from, to)
		}},
		{"the fsync of the log before current names a background rewrite's snapshot, under SyncNone", []string{"current"}, func() []int {
			from, to := use("none-rewrite")
			// the first rewrite's: current is written at creation too.
			// From the ack before the commit that starts it: the
			// rewrite may fsync the log before the commit's own ack
			// reaches the trace.
			from = f.markerIn(from, to, "acked 4")
			rename := f.first(from, f.renameTo(`/current$`))
			if rename < 0 || rename > to {
				return nil
			}
			return []int{f.last(from, rename, segFsync("none-rewrite"))}
		}},
	})
	for i, m := range ms {
		p := fsoPolicies[i]
		fsoCounts(t, []fsoCount{
			{p.name + " acknowledged commits", m.stats.acks, p.commits},
			{p.name + " acknowledgements checked against the policy", m.stats.policyAcks, p.commits},
			{p.name + " flushes", m.stats.flushes, 1},
			{p.name + " closes", m.stats.closes, 1},
		})
		if p.segment < 64<<10 {
			fsoCounts(t, []fsoCount{{p.name + " log segments created", m.stats.rolls, 3}})
		}
		if p.sync == wal.SyncGrouped {
			fsoCounts(t, []fsoCount{{p.name + " pauses", m.stats.idles, 1}})
		}
		if p.interval > 0 {
			fsoCounts(t, []fsoCount{{p.name + " replacements of current", m.stats.currents, 2}})
		}
		t.Logf("%s: checked %d acks (at most %d versions lost at once, %d unwritten), %d segment creations, %d fsyncs of segments",
			p.name, m.stats.acks, m.stats.maxLost, m.stats.maxUnwritten, m.stats.rolls, m.stats.segFsyncs)
		for _, v := range m.violationList() {
			t.Error(v)
		}
	}
}

// fsoImportCase checks Import into a new directory and over existing
// databases, by RENAME_EXCHANGE and by two renames (fsoImportModel).
func fsoImportCase(t *testing.T, strace string) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "imp")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := fsoRunChild(t, strace, "import", dir)
	run := func(calls []*straceCall) *fsoImportModel {
		im := newFsoImportModel(dir, tr.markFile, tr.lines)
		im.run(calls)
		return im
	}
	im := run(tr.calls)
	f := newFsoFinder(tr)
	root := filepath.Clean(dir)
	phase := func(name string, n int) (from, to int) {
		from = -1
		for ; n > 0; n-- {
			from = f.first(from+1, func(c *straceCall) bool { return f.marker(c) == "phase "+name })
		}
		return from, f.first(from+1, func(c *straceCall) bool { return strings.HasPrefix(f.marker(c), "imported ") })
	}
	// the fsyncs of the directory d after the rename of current in it,
	// within a phase (the one that follows the rename, and the one after
	// the removal of the import marker)
	afterCurrent := func(d string, from, to int) []int {
		i := f.first(from, func(c *straceCall) bool {
			_, dst, _ := fsoCallPaths(c)
			return strings.HasPrefix(c.name, "rename") && dst == filepath.Join(d, currentFileName)
		})
		if i < 0 || i > to {
			return nil
		}
		var out []int
		for j := f.first(i, f.fsyncOf(d)); j >= 0 && j <= to; j = f.first(j+1, f.fsyncOf(d)) {
			out = append(out, j)
		}
		return out
	}
	// the fsync of root after the swap's last rename, within a phase
	afterSwap := func(name string, from, to int) []int {
		i := f.last(from, to, func(c *straceCall) bool {
			_, dst, _ := fsoCallPaths(c)
			return strings.HasPrefix(c.name, "rename") && dst == filepath.Join(root, name)
		})
		if i < 0 {
			return nil
		}
		return []int{f.first(i, f.fsyncOf(root))}
	}
	fsoSelfCheck(t, tr.calls, func(calls []*straceCall) []*durViolation { return run(calls).violationSlice() }, []fsoMutation{
		{"the fsync of the parent after the new database directory is made", []string{"import-durable"}, func() []int {
			i := f.first(0, func(c *straceCall) bool {
				p, _, _ := fsoCallPaths(c)
				return strings.HasPrefix(c.name, "mkdir") && p == filepath.Join(root, "new")
			})
			return []int{f.first(i, f.fsyncOf(root))}
		}},
		{"the fsync of the parent after the exchange", []string{"import-remove"}, func() []int {
			from, to := phase("import-exchange exch", 1)
			return afterSwap("exch", from, to)
		}},
		{"the fsync of the parent after the two renames", []string{"import-remove"}, func() []int {
			from, to := phase("import-rename ren", 1)
			return afterSwap("ren", from, to)
		}},
		{"the fsync of the log when Finish's database closes", []string{"import-finish"}, func() []int {
			from, to := phase("import-finish fin", 1)
			walDir := filepath.Join(root, "fin", walDirName)
			return []int{f.last(from, to, func(c *straceCall) bool {
				p, _, _ := fsoCallPaths(c)
				return f.isFsync(c) && strings.HasPrefix(p, walDir+"/")
			})}
		}},
		{"the fsync of the staging directory after its current is renamed, before the exchange", []string{"import-swap"}, func() []int {
			from, to := phase("import-exchange exch", 2)
			return afterCurrent(filepath.Join(root, "exch"+stagingSuffix), from, to)
		}},
		{"the fsync of the staging directory after its current is renamed, before the two renames", []string{"import-swap"}, func() []int {
			from, to := phase("import-rename ren", 1)
			return afterCurrent(filepath.Join(root, "ren"+stagingSuffix), from, to)
		}},
	})
	minExchanges := 2
	if f.first(0, func(c *straceCall) bool {
		return c.name == "renameat2" && strings.Contains(strings.Join(c.args, ","), "RENAME_EXCHANGE") && c.retInt() < 0
	}) >= 0 {
		t.Logf("the file system refuses RENAME_EXCHANGE: every swap took two renames")
		minExchanges = 0
	}
	fsoCounts(t, []fsoCount{
		{"imports returned", im.stats.imports, 6},
		{"imports with a Finish step completed", im.stats.finishes, 1},
		{"exchanges", im.stats.exchanges, minExchanges},
		{"swaps by two renames", im.stats.renameSwaps, 2},
		{"removals of a replaced database's files", im.stats.oldRemovals, 20},
		{"states after a power loss checked", im.stats.states, 100},
		{"states after a power loss without dir, which finishSwap recovers", im.stats.gone, 1},
		{"replaced databases closed", im.stats.closes, 2},
	})
	t.Logf("checked %d imports, %d exchanges, %d two-rename swaps, %d removals of replaced files, %d states after a power loss (%d without dir), %d fsyncs",
		im.stats.imports, im.stats.exchanges, im.stats.renameSwaps, im.stats.oldRemovals, im.stats.states, im.stats.gone, im.m.stats.fsyncs)
	for _, v := range im.m.violationList() {
		t.Error(v)
	}
}

// fsoFinder finds calls of a trace for the self-checks.
type fsoFinder struct {
	calls    []*straceCall
	markFile string
}

func newFsoFinder(tr *fsoTrace) *fsoFinder { return &fsoFinder{calls: tr.calls, markFile: tr.markFile} }

func (f *fsoFinder) path(c *straceCall) string {
	p, _, _ := fsoCallPaths(c)
	return p
}

func (f *fsoFinder) isFsync(c *straceCall) bool { return c.name == "fsync" || c.name == "fdatasync" }

func (f *fsoFinder) marker(c *straceCall) string {
	if c.name != "write" || f.path(c) != f.markFile || len(c.args) < 2 {
		return ""
	}
	b, _, _ := fsoString(c.args[1])
	return strings.TrimSpace(string(b))
}

// first returns the index of the first call from from on that matches, -1
// if none (or from is -1).
func (f *fsoFinder) first(from int, match func(c *straceCall) bool) int {
	if from < 0 {
		return -1
	}
	for i := from; i < len(f.calls); i++ {
		if match(f.calls[i]) {
			return i
		}
	}
	return -1
}

// last returns the index of the last call in [from, to) that matches.
func (f *fsoFinder) last(from, to int, match func(c *straceCall) bool) int {
	if from < 0 || to < 0 {
		return -1
	}
	for i := to - 1; i >= from; i-- {
		if match(f.calls[i]) {
			return i
		}
	}
	return -1
}

// all returns the indexes of the calls in [from, to) that match; nil if
// there are none.
func (f *fsoFinder) all(from, to int, match func(c *straceCall) bool) []int {
	if from < 0 || to < 0 {
		return nil
	}
	var out []int
	for i := from; i < to; i++ {
		if match(f.calls[i]) {
			out = append(out, i)
		}
	}
	return out
}

func (f *fsoFinder) markerAt(text string) int {
	return f.first(0, func(c *straceCall) bool { return f.marker(c) == text })
}

func (f *fsoFinder) markerIn(from, to int, text string) int {
	i := f.first(from, func(c *straceCall) bool { return f.marker(c) == text })
	if i > to {
		return -1
	}
	return i
}

func (f *fsoFinder) renameTo(re string) func(c *straceCall) bool {
	r := regexp.MustCompile(re)
	return func(c *straceCall) bool {
		if !strings.HasPrefix(c.name, "rename") {
			return false
		}
		_, to, _ := fsoCallPaths(c)
		return r.MatchString(to)
	}
}

func (f *fsoFinder) createOf(re string) func(c *straceCall) bool {
	r := regexp.MustCompile(re)
	return func(c *straceCall) bool {
		return strings.HasPrefix(c.name, "open") && strings.Contains(strings.Join(c.args, ","), "O_CREAT") && r.MatchString(f.path(c))
	}
}

// rollFsyncs returns the fsyncs of the log segment that the first
// creation of a log segment in [from, to) with one before it follows: those
// after the last write of that segment.
func (f *fsoFinder) rollFsyncs(from, to int) []int {
	isSeg := func(c *straceCall) bool { return strings.HasSuffix(f.path(c), ".wal") }
	create := f.createOf(`/wal/[0-9]{20}\.wal\.tmp$`)
	for i := f.first(from, create); i >= 0 && i < to; i = f.first(i+1, create) {
		w := f.last(from, i, func(c *straceCall) bool { return c.name == "pwrite64" && isSeg(c) })
		if w < 0 {
			continue
		}
		seg := f.path(f.calls[w])
		return f.all(w, i, f.fsyncOf(seg))
	}
	return nil
}

func (f *fsoFinder) fsyncOf(p string) func(c *straceCall) bool {
	return func(c *straceCall) bool { return f.isFsync(c) && f.path(c) == p }
}

// fsoMutation takes the calls drop returns out of the trace, as if they
// had failed; one of rules must then be reported.
type fsoMutation struct {
	name  string
	rules []string
	drop  func() []int
}

// fsoSelfCheck checks that the model has teeth: with one fsync (or a few)
// of the real trace taken out, as if it had not been made, each mutation's
// rule must be reported.
func fsoSelfCheck(t *testing.T, calls []*straceCall, run func(calls []*straceCall) []*durViolation, muts []fsoMutation) {
	t.Helper()
	for _, mu := range muts {
		drop := mu.drop()
		if len(drop) == 0 || slices.Contains(drop, -1) {
			t.Errorf("self-check %q: the trace has no such fsync", mu.name)
			continue
		}
		mutated := make([]*straceCall, len(calls))
		for i, c := range calls {
			mutated[i] = c
			if slices.Contains(drop, i) {
				cc := *c
				cc.ret = "-1 EIO (taken out by the self-check)"
				mutated[i] = &cc
			}
		}
		found := false
		for _, v := range run(mutated) {
			found = found || slices.Contains(mu.rules, v.rule)
			if os.Getenv("MEMIAVL_FSYNCORDER_DEBUG") != "" && !strings.Contains(v.msg, "/wal, made by") {
				t.Logf("self-check %q: %s", mu.name, v.msg)
			}
		}
		if !found {
			t.Errorf("self-check: without %s (%d calls from trace line %d), no %v violation is reported", mu.name, len(drop), calls[drop[0]].start+1, mu.rules)
		}
	}
}

// fsyncOrderCalls are the system calls traced: every call that changes a
// file's data or a directory's entries, or makes them durable.
const fsyncOrderCalls = "openat,open,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir," +
	"link,linkat,symlink,symlinkat,write,writev,pwrite64,pwritev,pwritev2,fsync,fdatasync,sync,syncfs," +
	"sync_file_range,ftruncate,truncate,fallocate,copy_file_range,sendfile"

func fsoReadLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n"), nil
}

// straceCall is one system call of the trace: its arguments (from its
// first line), its result (from its last) and the indexes of both lines.
type straceCall struct {
	pid        string
	name       string
	args       []string
	ret        string
	start, end int
}

// retInt returns the call's result as a number (-1 for an error).
func (c *straceCall) retInt() int64 {
	f := strings.Fields(c.ret)
	if len(f) == 0 {
		return -1
	}
	s := f[0]
	if i := strings.IndexByte(s, '<'); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return -1
	}
	return n
}

var (
	straceResumed = regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	straceCallRe  = regexp.MustCompile(`^([a-z0-9_]+)\((.*)$`)
	straceRet     = regexp.MustCompile(`\)\s*=\s*(.*)$`)
)

// fsoParseStrace parses the lines of strace -f output into calls, joining
// "<unfinished ...>" lines with their "<... resumed>" ones.
func fsoParseStrace(lines []string) ([]*straceCall, error) {
	var calls []*straceCall
	pending := map[string]*straceCall{}
	for i, line := range lines {
		pid, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		rest = strings.TrimLeft(rest, " ")
		if strings.HasPrefix(rest, "---") || strings.HasPrefix(rest, "+++") {
			continue
		}
		if m := straceResumed.FindStringSubmatch(rest); m != nil {
			c := pending[pid]
			if c == nil || c.name != m[1] {
				return nil, fmt.Errorf("trace line %d: resumed call with nothing unfinished: %s", i+1, line)
			}
			delete(pending, pid)
			c.end = i
			if r := straceRet.FindStringSubmatch(m[2]); r != nil {
				c.ret = strings.TrimSpace(r[1])
			} else {
				c.ret = "?"
			}
			continue
		}
		m := straceCallRe.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		c := &straceCall{pid: pid, name: m[1], start: i, end: i}
		args, tail, closed := fsoSplitArgs(m[2])
		c.args = args
		switch {
		case closed:
			tail = strings.TrimSpace(tail)
			c.ret = strings.TrimSpace(strings.TrimPrefix(tail, "="))
		case strings.HasSuffix(strings.TrimSpace(tail), "<unfinished ...>"):
			pending[pid] = c
		default:
			return nil, fmt.Errorf("trace line %d: cannot parse: %s", i+1, line)
		}
		calls = append(calls, c)
	}
	for pid, c := range pending {
		// a call the process exit cut short has no effect to check
		_ = pid
		c.ret = "?"
	}
	return calls, nil
}

// fsoSplitArgs splits the arguments of a call at the commas outside
// strings and brackets, up to the closing parenthesis (closed) or the end
// of the text; tail is what follows.
func fsoSplitArgs(s string) (args []string, tail string, closed bool) {
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '<':
			if strings.HasPrefix(s[i:], "<unfinished ...>") {
				if a := strings.TrimSpace(s[start:i]); a != "" {
					args = append(args, a)
				}
				return args, s[i:], false
			}
			if j := strings.IndexByte(s[i:], '>'); j >= 0 {
				i += j
			}
		case '(', '[', '{':
			depth++
		case ']', '}':
			depth--
		case ')':
			if depth == 0 {
				if a := strings.TrimSpace(s[start:i]); a != "" {
					args = append(args, a)
				}
				return args, s[i+1:], true
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if a := strings.TrimSpace(s[start:]); a != "" {
		args = append(args, a)
	}
	return args, "", false
}

var straceFdRe = regexp.MustCompile(`^(-?[0-9]+|AT_FDCWD)<(.*)>$`)

// fsoFdPath returns the path strace -y printed for a descriptor argument.
func fsoFdPath(arg string) (string, bool) {
	m := straceFdRe.FindStringSubmatch(arg)
	if m == nil {
		return "", false
	}
	p := m[2]
	if strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}

// fsoString decodes a quoted string argument; full is false when strace
// cut it short.
func fsoString(arg string) (s []byte, full bool, ok bool) {
	if !strings.HasPrefix(arg, `"`) {
		return nil, false, false
	}
	var b []byte
	i := 1
	for ; i < len(arg) && arg[i] != '"'; i++ {
		if arg[i] != '\\' || i+1 >= len(arg) {
			b = append(b, arg[i])
			continue
		}
		i++
		switch c := arg[i]; c {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'v':
			b = append(b, '\v')
		case 'f':
			b = append(b, '\f')
		case 'x':
			if i+2 < len(arg) {
				v, err := strconv.ParseUint(arg[i+1:i+3], 16, 8)
				if err == nil {
					b = append(b, byte(v))
					i += 2
					continue
				}
			}
			b = append(b, 'x')
		default:
			if c >= '0' && c <= '7' {
				j := i
				for j < len(arg) && j < i+3 && arg[j] >= '0' && arg[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(arg[i:j], 8, 8)
				b = append(b, byte(v))
				i = j - 1
				continue
			}
			b = append(b, c)
		}
	}
	return b, !strings.HasSuffix(arg[i:], "..."), true
}

// durNode is a file or directory of the database directory as the model
// sees it.
type durNode struct {
	dir bool
	// dataDirty is the trace index (+1) of the last change of the data
	// that no fsync has covered, 0 when the data is durable
	dataDirty int
	// entryDirty is the index (+1) of the call that made the entry
	// (create, mkdir, rename to it), 0 when the directory holding it was
	// fsynced since
	entryDirty int
	// removed: names removed from this directory (unlink, rename away)
	// since its last fsync, with the index (+1) of the call
	removed map[string]int
	data    []byte // the last write's bytes, when strace printed them whole
	records int    // writes after the first (a log segment's header)
	// writes are a log segment's positioned writes; syncStart is the
	// start (+1) of the last fsync of it that ended, which made the
	// writes before it durable
	writes    []fsoWrite
	syncStart int
}

// fsoWrite is one pwrite of a log segment: bytes [off, end), ended at
// trace index idx (+1).
type fsoWrite struct {
	off, end int64
	idx      int
}

// fsoRec is one record of a log segment file as it is at the end of the
// trace: bytes [off, end), holding version ver.
type fsoRec struct {
	off, end, ver int64
}

type durViolation struct {
	rule, key string
	msg       string
	ats       []int // the checkpoints (trace indexes) it was found at
	order     int
}

// durModel replays a trace against what would survive a power loss.
type durModel struct {
	root, markFile string
	lines          []string
	nodes          map[string]*durNode // by path, root included
	// curDurable is the version the durable "current" names (-1 before
	// there is one); curPending the versions "current" was renamed to
	// since the last fsync of root, with the index (+1) of the rename
	curDurable  int64
	curPending  []pendingCur
	walWrites   int // writes to log segments since the last ack
	rootChecked bool
	startOf     map[int]int // the first line of the call that ended at a line
	phase       string
	violations  map[string]*durViolation
	// lastAcked is the version of the last "acked" marker: the log holds
	// at most the version after it
	lastAcked int64
	// active is false while the markers are another database's (the
	// policies case: "use <name>")
	active bool
	// policy, when set, replaces the ack rule's demand that the log be
	// durable by what package wal documents the policy may lose; layout
	// is then the records of each log segment (by path) at the end
	policy *fsoPolicy
	layout map[string][]fsoRec
	// inflight are the fsyncs that started and did not end yet, by path,
	// with their start (+1)
	inflight map[string]int
	// hook, when set, adds rules (fsoImportModel)
	hook  fsoHook
	stats struct {
		acks, closes, currents, tmpRenames, snapRemovals, frontRemovals, cuts, rollbackDone, fsyncs int
		bySnapshot, resets, rolls, policyAcks, flushes, idles, segFsyncs                            int
		maxLost, maxUnwritten                                                                       int64
	}
}

// fsoHook adds rules to a durModel: check runs at a call's first line
// after the model's rules, beforeApply and afterApply around the model's
// change at its last line, marker at a marker (true: handled).
type fsoHook interface {
	check(c *straceCall, from, to string, at int)
	beforeApply(c *straceCall, from, to string)
	afterApply(c *straceCall, from, to string)
	marker(f []string, at int) bool
}

type pendingCur struct {
	v   int64
	idx int
}

func newDurModel(root, markFile string, lines []string) *durModel {
	return &durModel{root: filepath.Clean(root), markFile: markFile, lines: lines, active: true,
		nodes: map[string]*durNode{}, curDurable: -1, violations: map[string]*durViolation{}, startOf: map[int]int{},
		inflight: map[string]int{}}
}

func (m *durModel) under(p string) bool {
	return p == m.root || strings.HasPrefix(p, m.root+"/")
}

func (m *durModel) rel(p string) string {
	if p == m.root {
		return "<db>"
	}
	return "<db>/" + strings.TrimPrefix(p, m.root+"/")
}

// line returns trace line idx (a 1-based index as the model stores them),
// shortened.
func (m *durModel) line(idx int) string {
	if idx <= 0 || idx > len(m.lines) {
		return "?"
	}
	end := idx
	if st, ok := m.startOf[idx]; ok {
		idx = st
	}
	l := strings.ReplaceAll(m.lines[idx-1], m.root, "<db>")
	l = regexp.MustCompile(`AT_FDCWD<[^>]*>, `).ReplaceAllString(l, "")
	if len(l) > 240 {
		l = l[:240] + "..."
	}
	if end != idx {
		return fmt.Sprintf("#%d: %s (returned at #%d)", idx, l, end)
	}
	return fmt.Sprintf("#%d: %s", idx, l)
}

func (m *durModel) violate(rule, key string, at int, format string, args ...any) {
	k := rule + "\x00" + key
	if v := m.violations[k]; v != nil {
		if v.ats[len(v.ats)-1] != at {
			v.ats = append(v.ats, at)
		}
		return
	}
	msg := fmt.Sprintf("[%s] (phase %q) at %s\n\t%s", rule, m.phase, m.line(at), fmt.Sprintf(format, args...))
	m.violations[k] = &durViolation{rule: rule, key: key, msg: msg, ats: []int{at}, order: len(m.violations)}
}

func (m *durModel) violationSlice() []*durViolation {
	out := make([]*durViolation, 0, len(m.violations))
	for _, v := range m.violations {
		out = append(out, v)
	}
	return out
}

func (m *durModel) violationList() []string {
	vs := make([]*durViolation, 0, len(m.violations))
	for _, v := range m.violations {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].order < vs[j].order })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.msg
		if n := len(v.ats); n > 1 {
			out[i] += fmt.Sprintf("\n\tand at %d later checkpoints, the last %s", n-1, m.line(v.ats[n-1]))
		}
	}
	return out
}

// resolve returns the path of a (directory descriptor, name) pair.
func fsoResolve(dirArg, nameArg string) (string, bool) {
	name, _, ok := fsoString(nameArg)
	if !ok {
		return "", false
	}
	if filepath.IsAbs(string(name)) {
		return filepath.Clean(string(name)), true
	}
	d, ok := fsoFdPath(dirArg)
	if !ok {
		return "", false
	}
	return filepath.Join(d, string(name)), true
}

// node returns the node at p, making a durable one for a path the trace
// has not shown created (it existed before).
func (m *durModel) node(p string) *durNode {
	n := m.nodes[p]
	if n == nil {
		n = &durNode{}
		m.nodes[p] = n
	}
	return n
}

// subtree returns the paths at or under p, sorted.
func (m *durModel) subtree(p string) []string {
	var out []string
	for q := range m.nodes {
		if q == p || strings.HasPrefix(q, p+"/") {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

func fsoIsTmpName(base string) bool {
	return strings.HasSuffix(base, ".tmp") || strings.Contains(base, ".tmp-")
}

// inTmpDir reports whether a component of p below root, p's own name
// excluded, is a temporary name.
func (m *durModel) inTmpDir(p string) bool {
	for d := filepath.Dir(p); d != m.root && m.under(d); d = filepath.Dir(d) {
		if fsoIsTmpName(filepath.Base(d)) {
			return true
		}
	}
	return false
}

// entryProblem returns why p's entry, or that of a directory above it up
// to root (excluded), may not survive a power loss, with a key naming the
// entry; "" when it will.
func (m *durModel) entryProblem(p string) (key, msg string) {
	if !m.under(p) || p == m.root {
		return "", ""
	}
	if _, ok := m.nodes[p]; !ok {
		return "missing " + m.rel(p), fmt.Sprintf("%s does not exist", m.rel(p))
	}
	for q := p; q != m.root; q = filepath.Dir(q) {
		if n := m.nodes[q]; n != nil && n.entryDirty != 0 {
			return "entry " + m.rel(q), fmt.Sprintf("the entry of %s, made by %s, was not followed by an fsync of %s", m.rel(q), m.line(n.entryDirty), m.rel(filepath.Dir(q)))
		}
	}
	return "", ""
}

// treeProblems returns why p and everything under it may not survive a
// power loss, with a key per problem.
func (m *durModel) treeProblems(p string, withOwnEntry bool) (keys, msgs []string) {
	add := func(k, msg string) { keys, msgs = append(keys, k), append(msgs, msg) }
	if withOwnEntry {
		if k, e := m.entryProblem(p); e != "" {
			add(k, e)
		}
	} else if _, ok := m.nodes[p]; !ok {
		add("missing "+m.rel(p), fmt.Sprintf("%s does not exist", m.rel(p)))
	}
	for _, q := range m.subtree(p) {
		n := m.nodes[q]
		if n.dataDirty != 0 {
			add("data "+m.rel(q), fmt.Sprintf("the data of %s, changed by %s, was not fsynced since", m.rel(q), m.line(n.dataDirty)))
		}
		if q != p && n.entryDirty != 0 {
			add("entry "+m.rel(q), fmt.Sprintf("the entry of %s, made by %s, was not followed by an fsync of %s", m.rel(q), m.line(n.entryDirty), m.rel(filepath.Dir(q))))
		}
		for name, idx := range n.removed {
			add("removed "+m.rel(filepath.Join(q, name)), fmt.Sprintf("the removal of %s by %s was not followed by an fsync of %s", m.rel(filepath.Join(q, name)), m.line(idx), m.rel(q)))
		}
	}
	return keys, msgs
}

func (m *durModel) fileProblems(p string) (keys, msgs []string) {
	if k, e := m.entryProblem(p); e != "" {
		keys, msgs = append(keys, k), append(msgs, e)
	}
	if n := m.nodes[p]; n != nil && n.dataDirty != 0 {
		keys = append(keys, "data "+m.rel(p))
		msgs = append(msgs, fmt.Sprintf("the data of %s, changed by %s, was not fsynced since", m.rel(p), m.line(n.dataDirty)))
	}
	return keys, msgs
}

func (m *durModel) snapDir(v int64) string {
	return filepath.Join(m.root, snapshotDirName(v))
}

// possibleCurrents returns the versions "current" may name after a power
// loss now.
func (m *durModel) possibleCurrents() []int64 {
	var out []int64
	if m.curDurable >= 0 {
		out = append(out, m.curDurable)
	}
	for _, p := range m.curPending {
		if !slices.Contains(out, p.v) {
			out = append(out, p.v)
		}
	}
	return out
}

// segments returns the log segments (base version to path), sorted by
// base.
func (m *durModel) segments() (bases []int64, paths map[int64]string) {
	paths = map[int64]string{}
	wal := filepath.Join(m.root, walDirName)
	for p := range m.nodes {
		if filepath.Dir(p) != wal || !strings.HasSuffix(p, ".wal") {
			continue
		}
		b, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(p), ".wal"), 10, 64)
		if err != nil {
			continue
		}
		bases = append(bases, b)
		paths[b] = p
	}
	slices.Sort(bases)
	return bases, paths
}

// checkLog checks that the segments holding versions up to v are durable
// and, for each possible current c, that the log reaches back to c+1.
func (m *durModel) checkLog(rule string, at int, v int64, why string) {
	m.checkLogSegments(rule, at, v, why)
	m.checkLogReach(rule, at, v, why)
}

func (m *durModel) checkLogSegments(rule string, at int, v int64, why string) {
	bases, paths := m.segments()
	for _, b := range bases {
		if b > v {
			continue
		}
		keys, msgs := m.fileProblems(paths[b])
		for i := range keys {
			m.violate(rule, keys[i], at, "%s, but %s", why, msgs[i])
		}
	}
}

func (m *durModel) checkLogReach(rule string, at int, v int64, why string) {
	bases, _ := m.segments()
	for _, c := range m.possibleCurrents() {
		if c >= v || c >= m.lastAcked || len(bases) == 0 && c == 0 {
			// nothing acknowledged after c: a version committed by a
			// snapshot, whose log is empty
			continue
		}
		if len(bases) == 0 || bases[0] > c+1 {
			m.violate(rule, fmt.Sprintf("log reach %d", c), at, "%s, but after a power loss current may name snapshot %d and the log starts at %v", why, c, bases)
		}
	}
}

func (m *durModel) checkSnapshots(rule string, at int, why string) {
	for _, c := range m.possibleCurrents() {
		keys, msgs := m.treeProblems(m.snapDir(c), true)
		for i := range keys {
			m.violate(rule, keys[i], at, "%s, and current may name snapshot %d after a power loss, but %s", why, c, msgs[i])
		}
	}
}

func (m *durModel) rollbackProblem() string {
	p := filepath.Join(m.root, rollbackFileName)
	if _, ok := m.nodes[p]; !ok {
		return "there is no rollback file"
	}
	if _, msgs := m.fileProblems(p); len(msgs) > 0 {
		return msgs[0]
	}
	return ""
}

func (m *durModel) run(calls []*straceCall) {
	// events in trace order: a call is checked at its first line and
	// takes effect at its last
	type event struct {
		idx   int
		start bool
		c     *straceCall
	}
	var evs []event
	for _, c := range calls {
		m.startOf[c.end+1] = c.start + 1
		evs = append(evs, event{c.start, true, c})
		if c.ret != "?" {
			evs = append(evs, event{c.end, false, c})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].idx != evs[j].idx {
			return evs[i].idx < evs[j].idx
		}
		return evs[i].start && !evs[j].start
	})
	for _, e := range evs {
		if e.start {
			m.check(e.c)
			continue
		}
		if e.c.retInt() < 0 {
			continue
		}
		from, to, _ := fsoCallPaths(e.c)
		if m.hook != nil {
			m.hook.beforeApply(e.c, from, to)
		}
		m.apply(e.c)
		if m.hook != nil {
			m.hook.afterApply(e.c, from, to)
		}
	}
}

// fsoCallPaths returns the paths a call changes or syncs, as the model needs
// them: for a descriptor call the descriptor's, for a path call the path,
// for a rename both.
func fsoCallPaths(c *straceCall) (from, to string, ok bool) {
	a := c.args
	switch c.name {
	case "renameat", "renameat2":
		if len(a) < 4 {
			return "", "", false
		}
		f, ok1 := fsoResolve(a[0], a[1])
		t, ok2 := fsoResolve(a[2], a[3])
		return f, t, ok1 && ok2
	case "rename", "link", "symlink":
		if len(a) < 2 {
			return "", "", false
		}
		f, ok1 := fsoResolve("AT_FDCWD<"+"/"+">", a[0])
		t, ok2 := fsoResolve("AT_FDCWD<"+"/"+">", a[1])
		return f, t, ok1 && ok2
	case "linkat":
		if len(a) < 4 {
			return "", "", false
		}
		f, ok1 := fsoResolve(a[0], a[1])
		t, ok2 := fsoResolve(a[2], a[3])
		return f, t, ok1 && ok2
	case "symlinkat":
		if len(a) < 3 {
			return "", "", false
		}
		t, ok := fsoResolve(a[1], a[2])
		return "", t, ok
	case "openat", "mkdirat", "unlinkat":
		if len(a) < 2 {
			return "", "", false
		}
		p, ok := fsoResolve(a[0], a[1])
		return p, p, ok
	case "open", "creat", "mkdir", "unlink", "rmdir", "truncate":
		if len(a) < 1 {
			return "", "", false
		}
		p, ok := fsoResolve("AT_FDCWD</>", a[0])
		return p, p, ok
	case "copy_file_range":
		if len(a) < 3 {
			return "", "", false
		}
		p, ok := fsoFdPath(a[2])
		return p, p, ok
	default:
		if len(a) < 1 {
			return "", "", false
		}
		p, ok := fsoFdPath(a[0])
		return p, p, ok
	}
}

// check runs the rules at the start of a call.
func (m *durModel) check(c *straceCall) {
	at := c.start + 1
	from, to, ok := fsoCallPaths(c)
	if !ok {
		return
	}
	if m.hook != nil {
		defer m.hook.check(c, from, to, at)
	}
	switch c.name {
	case "write", "pwrite64":
		if from == m.markFile && len(c.args) > 1 {
			b, _, _ := fsoString(c.args[1])
			m.marker(strings.TrimSpace(string(b)), at)
		}
	case "fsync", "fdatasync":
		if c.retInt() >= 0 && c.ret != "?" {
			m.inflight[from] = at
		}
	case "openat", "open", "creat":
		if m.under(from) && filepath.Dir(from) == filepath.Join(m.root, walDirName) && strings.HasSuffix(from, ".wal"+tmpSuffix) &&
			strings.Contains(strings.Join(c.args, ","), "O_CREAT") {
			m.checkRoll(from, at)
		}
	case "renameat", "renameat2", "rename":
		if !m.under(from) || !m.under(to) {
			return
		}
		fb, tb := filepath.Base(from), filepath.Base(to)
		if strings.Contains(tb, prunedSuffix) {
			if v, isSnap := parseSnapshotDirName(fb); isSnap {
				m.checkSnapRemoval(v, at)
			}
			return
		}
		if fsoIsTmpName(fb) && !fsoIsTmpName(tb) && !m.inTmpDir(to) {
			m.stats.tmpRenames++
			keys, msgs := m.treeProblems(from, false)
			for i := range keys {
				m.violate("tmp-rename", keys[i], at, "%s is renamed to %s, but %s", m.rel(from), m.rel(to), msgs[i])
			}
		}
		if to == filepath.Join(m.root, currentFileName) {
			m.checkCurrent(from, at)
		}
	case "unlinkat", "unlink", "rmdir":
		if !m.under(from) {
			return
		}
		rel := strings.TrimPrefix(from, m.root+"/")
		first, _, _ := strings.Cut(rel, "/")
		if v, isSnap := parseSnapshotDirName(first); isSnap && m.nodes[from] != nil {
			m.checkSnapRemoval(v, at)
		}
		if filepath.Dir(from) == filepath.Join(m.root, walDirName) && strings.HasSuffix(from, ".wal") && m.nodes[from] != nil {
			m.checkSegmentRemoval(from, at)
		}
		if from == filepath.Join(m.root, rollbackFileName) && m.nodes[from] != nil {
			m.checkRollbackDone(at)
		}
	case "ftruncate", "truncate":
		if m.under(from) && filepath.Dir(from) == filepath.Join(m.root, walDirName) {
			m.stats.cuts++
			if p := m.rollbackProblem(); p != "" {
				m.violate("remove", "cut "+m.rel(from), at, "the log segment %s is cut, but %s", m.rel(from), p)
			}
		}
	}
}

func (m *durModel) marker(text string, at int) {
	f := strings.Fields(text)
	if len(f) == 0 {
		return
	}
	if m.hook != nil && m.hook.marker(f, at) {
		return
	}
	switch f[0] {
	case "phase":
		m.phase = strings.Join(f[1:], " ")
		return
	case "use":
		m.active = len(f) == 2 && f[1] == filepath.Base(m.root)
		return
	}
	if !m.active {
		return
	}
	switch {
	case f[0] == "acked" && len(f) >= 2:
		v, _ := strconv.ParseInt(f[1], 10, 64)
		bySnapshot := len(f) > 2 && f[2] == "bysnapshot"
		m.stats.acks++
		m.lastAcked = v
		why := fmt.Sprintf("Commit of version %d returned", v)
		switch {
		case m.policy != nil:
			m.checkPolicyAck(v, at)
		case bySnapshot:
			m.checkBySnapshot(v, at)
		default:
			if m.walWrites == 0 {
				m.violate("ack", fmt.Sprintf("nowrite %d", v), at, "version %d is acknowledged, but no write to a log segment came since the previous one", v)
			}
			m.checkLogSegments("ack", at, v, why)
		}
		m.walWrites = 0
		m.checkLogReach("ack", at, v, why)
		m.checkSnapshots("ack", at, why)
		m.checkCurrentFile("ack", at, why)
		if !m.rootChecked {
			m.rootChecked = true
			if n := m.nodes[m.root]; n != nil && n.entryDirty != 0 {
				m.violate("ack", "root entry", at, "the database directory %s was made by %s and its parent %s was not fsynced before the first acknowledged commit: a power loss may lose the whole directory",
					m.root, m.line(n.entryDirty), filepath.Dir(m.root))
			}
		}
	case f[0] == "flushed" && len(f) == 2 && m.policy != nil:
		v, _ := strconv.ParseInt(f[1], 10, 64)
		m.checkPolicyFlush(v, at)
	case f[0] == "idle" && m.policy != nil:
		m.checkPolicyIdle(at)
	case f[0] == "closed" && len(f) == 1:
		m.stats.closes++
		keys, msgs := m.treeProblems(m.root, false)
		for i := range keys {
			switch {
			case keys[i] == "entry "+m.rel(filepath.Join(m.root, lockFileName)):
				// the lock file holds nothing
			case strings.HasPrefix(keys[i], "removed "):
				// a removal that may be undone loses nothing
			default:
				m.violate("close", keys[i], at, "Close returned, but %s", msgs[i])
			}
		}
		m.checkSnapshots("close", at, "Close returned")
	}
}

// checkBySnapshot checks the acknowledgement of version v, which Commit
// made durable by a snapshot (snapshotCommitLocked): the log does not hold
// v, so every current that may survive a power loss must name v, and
// snapshot v must be durable.
func (m *durModel) checkBySnapshot(v int64, at int) {
	m.stats.bySnapshot++
	why := fmt.Sprintf("Commit of version %d, committed by a snapshot, returned", v)
	for _, c := range m.possibleCurrents() {
		if c < v {
			m.violate("bysnapshot", fmt.Sprintf("current %d", c), at, "%s, but after a power loss current may name snapshot %d (durable: %d, renamed since the last fsync of <db>: %v), and the log does not hold version %d",
				why, c, m.curDurable, m.curPending, v)
		}
	}
	keys, msgs := m.treeProblems(m.snapDir(v), true)
	for i := range keys {
		m.violate("bysnapshot", keys[i], at, "%s, but %s", why, msgs[i])
	}
}

// checkRoll checks, when log segment p is created, that the data of every
// existing segment is durable (wal doc: "a segment is fsynced before the
// next one is created").
func (m *durModel) checkRoll(p string, at int) {
	m.stats.rolls++
	bases, paths := m.segments()
	for _, b := range bases {
		if n := m.nodes[paths[b]]; n.dataDirty != 0 {
			m.violate("roll", "roll "+m.rel(paths[b]), at, "the log segment %s is created, but the data of %s, changed by %s, was not fsynced: a power loss may keep records of the newer segment and lose some of the older",
				m.rel(p), m.rel(paths[b]), m.line(n.dataDirty))
		}
	}
}

// checkCurrentFile checks that "current" itself is durable: its data, and
// its entry unless it was just renamed (then either version may survive,
// which checkSnapshots covers).
func (m *durModel) checkCurrentFile(rule string, at int, why string) {
	p := filepath.Join(m.root, currentFileName)
	n := m.nodes[p]
	if n == nil {
		m.violate(rule, "no current", at, "%s, but there is no current file", why)
		return
	}
	if n.dataDirty != 0 {
		m.violate(rule, "data "+m.rel(p), at, "%s, but the data of current, changed by %s, was not fsynced", why, m.line(n.dataDirty))
	}
}

func (m *durModel) checkCurrent(from string, at int) {
	m.stats.currents++
	n := m.nodes[from]
	if n == nil || len(n.data) != currentFileSize {
		m.violate("current", "content "+m.line(at), at, "cannot tell what %s names: its last write was not seen whole", m.rel(from))
		return
	}
	v, err := decodeCurrent(from, n.data)
	if err != nil {
		m.violate("current", "content "+m.line(at), at, "%v", err)
		return
	}
	why := fmt.Sprintf("current is replaced to name snapshot %d", v)
	keys, msgs := m.treeProblems(m.snapDir(v), true)
	for i := range keys {
		m.violate("current", keys[i], at, "%s, but %s", why, msgs[i])
	}
	m.checkLog("current", at, v, why)
	for _, c := range m.possibleCurrents() {
		if v < c {
			if p := m.rollbackProblem(); p != "" {
				m.violate("current", fmt.Sprintf("back %d", v), at, "%s, back from %d, but %s", why, c, p)
			}
			break
		}
	}
}

func (m *durModel) checkSnapRemoval(v int64, at int) {
	m.stats.snapRemovals++
	if slices.Contains(m.possibleCurrents(), v) {
		m.violate("remove", fmt.Sprintf("snapshot %d", v), at, "snapshot %d is removed, but current may name it after a power loss (durable current: %d, renamed since the last fsync of <db>: %v)",
			v, m.curDurable, m.curPending)
	}
}

func (m *durModel) checkSegmentRemoval(p string, at int) {
	// each removal durable before the next, so that a power loss leaves
	// a contiguous run of segments (wal's TruncateFront, TruncateBack)
	if d := m.nodes[filepath.Dir(p)]; d != nil {
		for name, idx := range d.removed {
			if strings.HasSuffix(name, ".wal") {
				m.violate("remove", "contiguous "+m.rel(p), at, "a log segment is removed while the removal of %s by %s is not durable yet (no fsync of <db>/wal between them): "+
					"a power loss may keep the later removal and undo the earlier one, leaving a gap in the log", name, m.line(idx))
				break
			}
		}
	}
	n := m.nodes[p]
	if n.records == 0 {
		return // a segment started ahead, with no record
	}
	bases, _ := m.segments()
	b, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(p), ".wal"), 10, 64)
	i := slices.Index(bases, b)
	// the last version the segment may hold: the newest one holds at
	// most the version being committed
	last := m.lastAcked + 1
	if i+1 < len(bases) {
		last = bases[i+1] - 1
	}
	front := i == 0 && len(bases) > 1
	if front {
		m.stats.frontRemovals++
	}
	covered := true
	for _, c := range m.possibleCurrents() {
		covered = covered && c >= last
	}
	switch {
	case covered && front:
	case covered:
		// a reset of the log (snapshotCommitLocked, or Open behind a
		// newer snapshot): the snapshots that may survive hold all it
		// holds
		m.stats.resets++
		for _, c := range m.possibleCurrents() {
			keys, msgs := m.treeProblems(m.snapDir(c), true)
			for i := range keys {
				m.violate("log-reset", keys[i], at, "the log segment %s (versions %d..%d at most) is removed, and current may name snapshot %d after a power loss, but %s",
					m.rel(p), b, last, c, msgs[i])
			}
		}
	case front:
		for _, c := range m.possibleCurrents() {
			if last > c {
				m.violate("remove", "front "+m.rel(p), at, "the log segment %s (versions %d..%d) is removed, but current may name snapshot %d after a power loss", m.rel(p), b, last, c)
			}
		}
	case m.nodes[filepath.Join(m.root, rollbackFileName)] != nil:
		if prob := m.rollbackProblem(); prob != "" {
			m.violate("remove", "back "+m.rel(p), at, "the log segment %s, holding records, is removed from the back of the log, but %s", m.rel(p), prob)
		}
	default:
		m.violate("log-reset", "back "+m.rel(p), at, "the log segment %s (versions %d..%d at most) is removed from the back of the log, and no rollback is recorded, but after a power loss current may name snapshot %v (durable: %d, renamed since the last fsync of <db>: %v): the versions after it would be lost",
			m.rel(p), b, last, m.possibleCurrents(), m.curDurable, m.curPending)
	}
}

func (m *durModel) checkRollbackDone(at int) {
	m.stats.rollbackDone++
	why := "the rollback file is removed"
	if len(m.curPending) > 0 {
		m.violate("rollback-done", "current", at, "%s, but the replacement of current by %s was not followed by an fsync of <db>", why, m.line(m.curPending[len(m.curPending)-1].idx))
	}
	wal := filepath.Join(m.root, walDirName)
	keys, msgs := m.treeProblems(wal, true)
	for i := range keys {
		m.violate("rollback-done", keys[i], at, "%s, but %s", why, msgs[i])
	}
}

// apply makes a successful call's effect on the model.
func (m *durModel) apply(c *straceCall) {
	idx := c.end + 1
	from, to, ok := fsoCallPaths(c)
	if !ok {
		if c.name == "sync" {
			m.syncAll(c.start + 1)
		}
		return
	}
	switch c.name {
	case "fsync", "fdatasync":
		m.stats.fsyncs++
		if m.inflight[from] == c.start+1 {
			delete(m.inflight, from)
		}
		if !m.under(from) && from != filepath.Dir(m.root) {
			return
		}
		if strings.HasSuffix(from, ".wal") {
			m.stats.segFsyncs++
		}
		m.fsync(from, c.start+1)
	case "syncfs":
		m.syncAll(c.start + 1)
	case "write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "truncate", "fallocate", "copy_file_range", "sendfile":
		if !m.under(from) {
			return
		}
		n := m.node(from)
		n.dataDirty = idx
		if c.name == "write" || c.name == "pwrite64" {
			if b, full, ok := fsoString(c.args[1]); ok && full {
				n.data = b
			} else {
				n.data = nil
			}
		}
		if c.name != "ftruncate" && c.name != "truncate" {
			if strings.HasSuffix(from, ".wal") {
				n.records++
				m.walWrites++
			}
		}
		if c.name == "pwrite64" && len(c.args) > 3 && strings.HasSuffix(from, ".wal") {
			if off, err := strconv.ParseInt(c.args[3], 0, 64); err == nil {
				n.writes = append(n.writes, fsoWrite{off: off, end: off + c.retInt(), idx: idx})
			}
		}
	case "openat", "open", "creat":
		if !m.under(from) {
			return
		}
		flags := ""
		if len(c.args) > 2 && c.name == "openat" {
			flags = c.args[2]
		} else if len(c.args) > 1 {
			flags = c.args[1]
		}
		n, existed := m.nodes[from]
		if !existed && (strings.Contains(flags, "O_CREAT") || c.name == "creat") {
			n = &durNode{entryDirty: idx}
			m.nodes[from] = n
			m.created(from)
		} else if existed && strings.Contains(flags, "O_TRUNC") {
			n.dataDirty, n.data = idx, nil
		}
		if n != nil && strings.Contains(flags, "O_DIRECTORY") {
			n.dir = true
		}
	case "mkdirat", "mkdir":
		if !m.under(from) {
			return
		}
		m.nodes[from] = &durNode{dir: true, entryDirty: idx}
		m.created(from)
	case "unlinkat", "unlink", "rmdir":
		if !m.under(from) {
			return
		}
		for _, p := range m.subtree(from) {
			delete(m.nodes, p)
		}
		m.removedFrom(from, idx)
	case "renameat", "renameat2", "rename":
		if !m.under(from) && !m.under(to) {
			return
		}
		if c.name == "renameat2" && strings.Contains(c.args[len(c.args)-1], "RENAME_EXCHANGE") {
			m.exchange(from, to, idx)
			return
		}
		if to == filepath.Join(m.root, currentFileName) {
			if n := m.nodes[from]; n != nil && len(n.data) == currentFileSize {
				if v, err := decodeCurrent(from, n.data); err == nil {
					m.curPending = append(m.curPending, pendingCur{v: v, idx: idx})
				}
			}
		}
		moved := map[string]*durNode{}
		for _, p := range m.subtree(from) {
			moved[to+strings.TrimPrefix(p, from)] = m.nodes[p]
			delete(m.nodes, p)
		}
		for _, p := range m.subtree(to) {
			delete(m.nodes, p)
		}
		for p, n := range moved {
			if m.under(p) {
				m.nodes[p] = n
			}
		}
		if m.under(from) {
			m.removedFrom(from, idx)
		}
		if m.under(to) {
			n := m.node(to)
			n.entryDirty = idx
			m.created(to)
		}
	case "linkat", "link", "symlinkat", "symlink":
		if m.under(to) {
			m.nodes[to] = &durNode{entryDirty: idx}
			m.created(to)
		}
	}
}

// exchange applies a RENAME_EXCHANGE of a and b: their subtrees trade
// places, and both entries are new in their directories.
func (m *durModel) exchange(a, b string, idx int) {
	moved := map[string]*durNode{}
	for _, x := range [][2]string{{a, b}, {b, a}} {
		for _, p := range m.subtree(x[0]) {
			moved[x[1]+strings.TrimPrefix(p, x[0])] = m.nodes[p]
		}
	}
	for _, x := range []string{a, b} {
		for _, p := range m.subtree(x) {
			delete(m.nodes, p)
		}
	}
	for p, n := range moved {
		if m.under(p) {
			m.nodes[p] = n
		}
	}
	for _, p := range []string{a, b} {
		if m.under(p) && p != m.root {
			m.node(p).entryDirty = idx
			m.created(p)
		}
	}
}

// created notes that p's entry appeared in its directory: a name removed
// before and made again is no longer a pending removal there.
func (m *durModel) created(p string) {
	if d := m.nodes[filepath.Dir(p)]; d != nil && d.removed != nil {
		delete(d.removed, filepath.Base(p))
	}
	if p != m.root {
		m.node(filepath.Dir(p)).dir = true
	}
}

func (m *durModel) removedFrom(p string, idx int) {
	if p == m.root {
		return
	}
	d := m.node(filepath.Dir(p))
	d.dir = true
	if d.removed == nil {
		d.removed = map[string]int{}
	}
	d.removed[filepath.Base(p)] = idx
}

// fsync applies an fsync of p that started at trace index start: what
// changed before it started is durable.
func (m *durModel) fsync(p string, start int) {
	// the entries in p, also where p is not tracked itself (the parent of
	// the database directory)
	for q, c := range m.nodes {
		if q != p && filepath.Dir(q) == p && c.entryDirty != 0 && c.entryDirty < start {
			c.entryDirty = 0
		}
	}
	n := m.nodes[p]
	if n == nil {
		return
	}
	if n.dataDirty != 0 && n.dataDirty < start {
		n.dataDirty = 0
	}
	n.syncStart = max(n.syncStart, start)
	for name, idx := range n.removed {
		if idx < start {
			delete(n.removed, name)
		}
	}
	if p == m.root {
		var keep []pendingCur
		for _, pc := range m.curPending {
			if pc.idx < start {
				m.curDurable = pc.v
			} else {
				keep = append(keep, pc)
			}
		}
		m.curPending = keep
	}
}

func (m *durModel) syncAll(start int) {
	for p := range m.nodes {
		m.fsync(p, start)
	}
}

// fsoSegmentLayout reads the records of the log segments in dir: their
// offsets and versions, by path.
func fsoSegmentLayout(dir string) (map[string][]fsoRec, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]fsoRec{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".wal") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		const header, frame = 20, 12
		for off := int64(header); off < int64(len(b)); {
			if off+frame+8 > int64(len(b)) {
				return nil, fmt.Errorf("%s: record at %d cut short", p, off)
			}
			end := off + frame + int64(binary.LittleEndian.Uint32(b[off:]))
			if end > int64(len(b)) {
				return nil, fmt.Errorf("%s: record at %d cut short", p, off)
			}
			out[p] = append(out[p], fsoRec{off: off, end: end, ver: int64(binary.LittleEndian.Uint64(b[off+frame:]))})
			off = end
		}
	}
	return out, nil
}

// fsoLogState is what of the log would survive a power loss now.
type fsoLogState struct {
	durable, written int64 // the ends of the longest durable, written runs of versions from the start
	newest           int64 // base of the newest segment, 0 if none
	// the first record that is written but not durable: its version,
	// segment and the write that wrote it
	lostVer   int64
	lostSeg   string
	lostWrite int
}

// logState returns which versions of the log would survive a power loss
// now: the records (m.layout) whose segment's entry is durable and every
// write of which an fsync covers; with inflight, the fsyncs that started
// and did not end count as done.
func (m *durModel) logState(inflight bool) fsoLogState {
	var st fsoLogState
	bases, paths := m.segments()
	dOK, wOK := true, true
	for _, b := range bases {
		p := paths[b]
		n := m.nodes[p]
		st.newest = b
		k, _ := m.entryProblem(p)
		sync := n.syncStart
		if s, ok := m.inflight[p]; inflight && ok {
			sync = max(sync, s)
		}
		for _, r := range m.layout[p] {
			pos, durable, lastWrite := r.off, true, 0
			for progress := true; pos < r.end && progress; {
				progress = false
				for _, w := range n.writes {
					if pos >= r.end {
						break
					}
					if w.off <= pos && w.end > pos {
						pos, progress = w.end, true
						durable = durable && w.idx < sync
						lastWrite = w.idx
					}
				}
			}
			written := pos >= r.end
			wOK = wOK && written
			if wOK {
				st.written = r.ver
			}
			if dOK && !(written && durable && k == "") && written && st.lostVer == 0 {
				st.lostVer, st.lostSeg, st.lostWrite = r.ver, p, lastWrite
			}
			dOK = dOK && written && durable && k == ""
			if dOK {
				st.durable = r.ver
			}
		}
	}
	return st
}

// lostWhy describes the first written record a power loss may lose.
func (m *durModel) lostWhy(st fsoLogState) string {
	if st.lostVer == 0 {
		return "no written record is lost"
	}
	if k, msg := m.entryProblem(st.lostSeg); k != "" {
		return fmt.Sprintf("version %d, in %s: %s", st.lostVer, m.rel(st.lostSeg), msg)
	}
	return fmt.Sprintf("version %d, written to %s by %s, is not fsynced", st.lostVer, m.rel(st.lostSeg), m.line(st.lostWrite))
}

// checkPolicyAck checks, once Commit of version v returned, that a power
// loss may lose only what package wal documents for the policy (wal doc
// "What a crash can lose"), with N the asynchronous buffer and G
// wal.DefaultGroupCount:
//
//   - SyncEveryCommit: nothing whose Append returned in synchronous mode;
//     at most 2N+1 entries in asynchronous mode.
//   - SyncGrouped: fewer than G entries written since the last fsync, plus
//     at most 2N+1 queued or in flight in asynchronous mode.
//   - SyncNone: only entries of the newest segment (older segments are
//     complete and durable), plus the queued ones in asynchronous mode.
//
// And in synchronous mode, every acknowledged entry is written.
func (m *durModel) checkPolicyAck(v int64, at int) {
	m.stats.policyAcks++
	p := m.policy
	st := m.logState(false)
	lost, unwritten := v-min(st.durable, v), v-min(st.written, v)
	m.stats.maxLost, m.stats.maxUnwritten = max(m.stats.maxLost, lost), max(m.stats.maxUnwritten, unwritten)
	n, g := int64(p.async), int64(wal.DefaultGroupCount)
	why := fmt.Sprintf("Commit of version %d returned under %v with AsyncCommitBuffer %d", v, p.sync, p.async)
	if n == 0 && unwritten > 0 {
		m.violate("policy", "unwritten", at, "%s, but versions %d..%d are not written to the log: a process crash would lose them", why, st.written+1, v)
	}
	if n > 0 && unwritten > 2*n+1 {
		m.violate("policy", "queued", at, "%s, but %d acknowledged versions (%d..%d) are not written to the log, more than 2*AsyncBuffer+1 = %d", why, unwritten, st.written+1, v, 2*n+1)
	}
	switch p.sync {
	case wal.SyncEveryCommit, wal.SyncGrouped:
		bound, what := int64(0), "nothing whose Append returned"
		switch {
		case p.sync == wal.SyncEveryCommit && n > 0:
			bound, what = 2*n+1, "at most 2*AsyncBuffer+1"
		case p.sync == wal.SyncGrouped && n == 0:
			bound, what = g-1, "fewer than GroupCount"
		case p.sync == wal.SyncGrouped:
			bound, what = g-1+2*n+1, "fewer than GroupCount plus at most 2*AsyncBuffer+1"
		}
		if lost > bound {
			m.violate("policy", "lost", at, "%s, but a power loss now would lose %d acknowledged versions (%d..%d), where the policy loses %s (%d): %s",
				why, lost, st.durable+1, v, what, bound, m.lostWhy(st))
		}
	case wal.SyncNone:
		if st.newest > 0 && st.durable < min(st.newest-1, v) {
			m.violate("policy", "older segment", at, "%s, but a power loss now would lose versions %d..%d of segments older than the newest (base %d), which the policy keeps complete and durable: %s",
				why, st.durable+1, min(st.newest-1, v), st.newest, m.lostWhy(st))
		}
	}
}

// checkPolicyFlush checks, once a Flush of the log returned with every
// version up to v appended before it, that they are written, and durable
// unless the policy is SyncNone ("Nothing appended before a Flush that
// returned"; "Flush does not fsync under this policy").
func (m *durModel) checkPolicyFlush(v int64, at int) {
	m.stats.flushes++
	st := m.logState(false)
	switch {
	case st.written < v:
		m.violate("policy", "flush written", at, "Flush returned after version %d was appended, but versions %d..%d are not written", v, st.written+1, v)
	case m.policy.sync != wal.SyncNone && st.durable < v:
		m.violate("policy", "flush", at, "Flush returned after version %d was appended under %v, but a power loss now would lose versions %d..%d: %s",
			v, m.policy.sync, st.durable+1, v, m.lostWhy(st))
	}
}

// checkPolicyIdle checks, after the child paused fsoIdlePause
// GroupIntervals with no commit, that under SyncGrouped an fsync covering
// every written record has started ("no entry written more than
// GroupInterval ago (plus the time of one fsync and scheduling delay)").
func (m *durModel) checkPolicyIdle(at int) {
	m.stats.idles++
	if m.policy.sync != wal.SyncGrouped {
		return
	}
	if st := m.logState(true); st.durable < st.written {
		m.violate("policy", "interval", at, "after a pause of %d GroupIntervals (%v) with no commit, no fsync has started for versions %d..%d: %s",
			fsoIdlePause, fsoIdlePause*wal.DefaultGroupInterval, st.durable+1, st.written, m.lostWhy(st))
	}
}

// fsoImportModel adds the rules of Import to a durModel whose root is the
// directory holding the databases of the import case (and their staging
// and replaced directories beside them):
//
//   - import-durable (Import doc, import.go Commit): once Import into dir
//     returned, the imported database is durable at dir: every file's
//     data, every entry under dir and dir's own entry in its parent; when
//     it replaced a database, dir's entry names the imported one.
//   - import-swap (ImportOptions.Replace "swapped in only once complete
//     and durable", swap, finishSwap): while an import replaces the
//     database in dir, every state a power loss may leave is one in
//     which the next writable Open (finishSwap) finds a whole database at
//     dir, the replaced one or the imported one. The states are every
//     subset of the entry changes of dir, dir.import.tmp and
//     dir.replaced.tmp not yet made durable by an fsync of their parent,
//     each change (a rename, an exchange) whole or not at all, applied to
//     the durable entries; finishSwap is modelled as it is written: with
//     no "current" in dir and dir.replaced.tmp present, it renames the
//     staged directory to dir if that has a "current", else the replaced
//     one (which fails if dir exists).
//   - import-remove (swap "the old database ... is then removed"): a file
//     or directory of the replaced database is removed only once the
//     imported database is durably in place: dir's entry names it and is
//     durable, and everything in it is durable.
//   - close: once the database to be replaced was created and closed
//     ("closed <name>"), it is durable, its entry included.
//   - import-finish (ImportOptions.Finish, import.go commitLocked): the
//     marker of an import with a Finish step is removed only once the
//     database in dir is durable (the versions Finish committed under
//     any sync policy included): until then a power loss leaves a
//     directory that every open refuses, after it a whole database.
type fsoImportModel struct {
	m *durModel
	// the phase: how ("new", "finish", "exchange", "rename", or ""
	// between imports) and the database directory
	how, dir         string
	oldRoot, newRoot *durNode
	damaged          bool // a file of the replaced database was removed
	// ops are the changes of the entries of names not yet made durable
	ops   []fsoEntryOp
	names []string // dir, its staging and its replaced directory
	// pending holds the bindings before the call being applied
	pending map[string]*durNode
	stats   struct {
		imports, exchanges, renameSwaps, oldRemovals, states, closes, finishes int
		// states with no dir, which finishSwap recovers
		gone int
	}
}

// fsoEntryOp is a change of entries of the root directory: the bindings
// of the names it changed, before and after.
type fsoEntryOp struct {
	idx           int
	before, after map[string]*durNode
}

func newFsoImportModel(root, markFile string, lines []string) *fsoImportModel {
	im := &fsoImportModel{m: newDurModel(root, markFile, lines)}
	im.m.hook = im
	return im
}

func (im *fsoImportModel) run(calls []*straceCall) { im.m.run(calls) }

func (im *fsoImportModel) violationSlice() []*durViolation { return im.m.violationSlice() }

func (im *fsoImportModel) replacing() bool {
	return (im.how == "exchange" || im.how == "rename") && im.oldRoot != nil
}

// bindings returns what the names are bound to now.
func (im *fsoImportModel) bindings() map[string]*durNode {
	b := map[string]*durNode{}
	for _, n := range im.names {
		if x := im.m.nodes[n]; x != nil {
			b[n] = x
		}
	}
	return b
}

// pathOf returns the path of node x, "" if it is not in the model.
func (im *fsoImportModel) pathOf(x *durNode) string {
	for p, n := range im.m.nodes {
		if n == x {
			return p
		}
	}
	return ""
}

func (im *fsoImportModel) marker(f []string, at int) bool {
	m := im.m
	switch {
	case f[0] == "phase":
		im.how, im.dir, im.oldRoot, im.newRoot, im.damaged, im.ops = "", "", nil, nil, false, nil
		if len(f) == 3 && strings.HasPrefix(f[1], "import-") {
			im.how, im.dir = strings.TrimPrefix(f[1], "import-"), filepath.Join(m.root, f[2])
			im.names = []string{im.dir, im.dir + stagingSuffix, im.dir + replacedSuffix}
			if im.how != "new" && im.how != "finish" {
				im.oldRoot = m.nodes[im.dir]
				if im.oldRoot == nil {
					m.violate("model", "no old "+im.dir, at, "the import over %s starts, but the model has no database there", m.rel(im.dir))
				}
			}
		}
		return false // the model notes the phase too
	case f[0] == "imported" && len(f) == 2:
		im.stats.imports++
		p := filepath.Join(m.root, f[1])
		why := fmt.Sprintf("Import into %s returned", m.rel(p))
		if im.replacing() && m.nodes[p] != im.newRoot {
			m.violate("import-durable", "not swapped "+m.rel(p), at, "%s, but %s is not the imported database", why, m.rel(p))
		}
		keys, msgs := m.treeProblems(p, true)
		for i := range keys {
			m.violate("import-durable", keys[i], at, "%s, but %s", why, msgs[i])
		}
		im.checkStates(at)
		return true
	case f[0] == "closed" && len(f) == 2:
		im.stats.closes++
		p := filepath.Join(m.root, f[1])
		keys, msgs := m.treeProblems(p, true)
		for i := range keys {
			if keys[i] != "entry "+m.rel(filepath.Join(p, lockFileName)) && !strings.HasPrefix(keys[i], "removed ") {
				m.violate("close", keys[i], at, "Close of %s returned, but %s", m.rel(p), msgs[i])
			}
		}
		return true
	}
	return false
}

// isEntryChange reports whether c changes entries of the names.
func (im *fsoImportModel) isEntryChange(c *straceCall, from, to string) bool {
	if im.how == "" {
		return false
	}
	switch c.name {
	case "rename", "renameat", "renameat2", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "openat", "open", "creat":
		return slices.Contains(im.names, from) || slices.Contains(im.names, to)
	}
	return false
}

func (im *fsoImportModel) check(c *straceCall, from, to string, at int) {
	if im.how == "finish" && c.retInt() >= 0 && strings.HasPrefix(c.name, "unlink") && from == filepath.Join(im.dir, importFileName) {
		im.checkFinished(at)
	}
	if !im.replacing() || c.retInt() < 0 {
		return
	}
	m := im.m
	switch c.name {
	case "unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2":
	default:
		return
	}
	old := im.pathOf(im.oldRoot)
	if old == "" || !strings.HasPrefix(from, old+"/") {
		return
	}
	im.stats.oldRemovals++
	im.damaged = true
	why := fmt.Sprintf("%s of the replaced database (now at %s) is removed", m.rel(from), m.rel(old))
	if m.nodes[im.dir] != im.newRoot {
		m.violate("import-remove", "not in place "+m.rel(im.dir), at, "%s, but %s is not the imported database", why, m.rel(im.dir))
		return
	}
	if len(im.ops) > 0 {
		m.violate("import-remove", "pending "+m.rel(im.dir), at, "%s, but the change of %s by %s was not followed by an fsync of %s",
			why, m.rel(im.dir), m.line(im.ops[len(im.ops)-1].idx), m.rel(m.root))
	}
	keys, msgs := m.treeProblems(im.dir, true)
	for i := range keys {
		if !strings.HasPrefix(keys[i], "removed ") {
			m.violate("import-remove", keys[i], at, "%s, but %s", why, msgs[i])
		}
	}
}

// checkFinished applies the import-finish rule at the removal of the
// marker of an import with a Finish step.
func (im *fsoImportModel) checkFinished(at int) {
	m := im.m
	im.stats.finishes++
	keys, msgs := m.treeProblems(im.dir, true)
	for i := range keys {
		if keys[i] == "entry "+m.rel(filepath.Join(im.dir, lockFileName)) {
			continue
		}
		m.violate("import-finish", keys[i], at, "the marker of the import into %s, which committed versions before it was complete, is removed, but %s", m.rel(im.dir), msgs[i])
	}
}

func (im *fsoImportModel) beforeApply(c *straceCall, from, to string) {
	im.pending = nil
	if im.isEntryChange(c, from, to) {
		im.pending = im.bindings()
	}
}

func (im *fsoImportModel) afterApply(c *straceCall, from, to string) {
	m := im.m
	if im.pending != nil {
		after := im.bindings()
		op := fsoEntryOp{idx: c.end + 1, before: map[string]*durNode{}, after: map[string]*durNode{}}
		for _, n := range im.names {
			if im.pending[n] != after[n] {
				op.before[n], op.after[n] = im.pending[n], after[n]
			}
		}
		if len(op.after) > 0 {
			im.ops = append(im.ops, op)
		}
		if (c.name == "mkdir" || c.name == "mkdirat") && from == im.dir+stagingSuffix {
			im.newRoot = m.nodes[from]
		}
		if to == im.dir && from == im.dir+stagingSuffix && im.newRoot != nil {
			if c.name == "renameat2" && strings.Contains(c.args[len(c.args)-1], "RENAME_EXCHANGE") {
				im.stats.exchanges++
			} else {
				im.stats.renameSwaps++
			}
		}
		im.pending = nil
	}
	if (c.name == "fsync" || c.name == "fdatasync") && from == m.root {
		// what changed before the fsync started is durable
		keep := im.ops[:0]
		for _, op := range im.ops {
			if op.idx >= c.start+1 {
				keep = append(keep, op)
			}
		}
		im.ops = keep
	}
	if im.replacing() {
		im.checkStates(c.end + 1)
	}
}

// fsoCur says whether a directory holds a "current" after a power loss.
type fsoCur int

const (
	curNo fsoCur = iota
	curMaybe
	curYes
)

func (im *fsoImportModel) hasCurrent(x *durNode) fsoCur {
	p := im.pathOf(x)
	if p == "" {
		return curNo
	}
	n := im.m.nodes[filepath.Join(p, currentFileName)]
	switch {
	case n == nil:
		return curNo
	case n.entryDirty != 0:
		return curMaybe
	}
	return curYes
}

// whole returns why x may not be a whole database after a power loss, ""
// if it is one (its "current" entry aside, which hasCurrent covers).
func (im *fsoImportModel) whole(x *durNode) string {
	m := im.m
	switch {
	case x != im.oldRoot && x != im.newRoot:
		return "it is neither the replaced nor the imported database"
	case x == im.oldRoot && im.damaged:
		return "it is the replaced database, some of whose files were removed"
	}
	p := im.pathOf(x)
	keys, msgs := m.treeProblems(p, false)
	for i := range keys {
		switch {
		case strings.HasPrefix(keys[i], "removed "):
		case keys[i] == "entry "+m.rel(filepath.Join(p, currentFileName)):
		default:
			return msgs[i]
		}
	}
	return ""
}

// recoverable returns why the bindings b leave no whole database for the
// next writable Open of dir, "" if they do.
func (im *fsoImportModel) recoverable(b map[string]*durNode) string {
	dir, staged, replaced := im.names[0], im.names[1], im.names[2]
	name := func(x *durNode) string {
		switch x {
		case im.oldRoot:
			return "the replaced database"
		case im.newRoot:
			return "the imported database"
		}
		return "another directory"
	}
	if x := b[dir]; x != nil {
		cur := im.hasCurrent(x)
		if cur != curNo {
			if why := im.whole(x); why != "" {
				return fmt.Sprintf("dir holds %s, but %s", name(x), why)
			}
		}
		if cur != curYes {
			return fmt.Sprintf("dir holds %s, whose current file may be gone (its entry is not durable), which no Open or finishSwap recovers", name(x))
		}
		return ""
	}
	old := b[replaced]
	if old == nil {
		return "neither dir nor dir" + replacedSuffix + " exists"
	}
	im.stats.gone++
	scur := curNo
	if s := b[staged]; s != nil {
		scur = im.hasCurrent(s)
		if scur != curNo {
			if why := im.whole(s); why != "" {
				return fmt.Sprintf("dir is gone and finishSwap moves %s, from the staging directory, in, but %s", name(s), why)
			}
		}
	}
	if scur != curYes {
		if im.hasCurrent(old) != curYes {
			return fmt.Sprintf("dir is gone and finishSwap moves %s back, which has no current file", name(old))
		}
		if why := im.whole(old); why != "" {
			return fmt.Sprintf("dir is gone and finishSwap moves %s back, but %s", name(old), why)
		}
	}
	return ""
}

// checkStates checks every state a power loss may leave now (see
// import-swap).
func (im *fsoImportModel) checkStates(at int) {
	if !im.replacing() {
		return
	}
	m := im.m
	if len(im.ops) > 12 {
		m.violate("model", "ops "+m.rel(im.dir), at, "%d entry changes of %s pending: too many to try", len(im.ops), m.rel(im.dir))
		return
	}
	// the durable bindings: the pending changes undone
	base := im.bindings()
	for i := len(im.ops) - 1; i >= 0; i-- {
		for n, x := range im.ops[i].before {
			base[n] = x
		}
	}
	for mask := 0; mask < 1<<len(im.ops); mask++ {
		b := maps.Clone(base)
		var kept []string
		for i, op := range im.ops {
			if mask&(1<<i) != 0 {
				maps.Copy(b, op.after)
				kept = append(kept, m.line(op.idx))
			}
		}
		im.stats.states++
		if why := im.recoverable(b); why != "" {
			m.violate("import-swap", why, at, "the entry changes of %s, %s and %s not yet made durable by an fsync of %s are %d; a power loss now may keep only %q of them: then %s",
				m.rel(im.dir), m.rel(im.dir+stagingSuffix), m.rel(im.dir+replacedSuffix), m.rel(m.root), len(im.ops), kept, why)
		}
	}
}
