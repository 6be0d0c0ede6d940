package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// rollbackObserve returns LatestVersion, a read-only open's version and
// whether its hash matches, and Verify's version and RollbackTo.
func rollbackObserve(dir string, hashes map[int64][]byte) string {
	lv, lerr := LatestVersion(dir)
	s := fmt.Sprintf("latest=%d(%v)", lv, lerr)
	db, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		s += fmt.Sprintf(" ro=err(%v)", err)
	} else {
		s += fmt.Sprintf(" ro=%d hashok=%v", db.Version(), bytes.Equal(db.LastCommitInfo().Hash(), hashes[db.Version()]))
		db.Close()
	}
	rep, err := Verify(dir)
	if err != nil {
		s += fmt.Sprintf(" verify=err(%v)", err)
	} else {
		s += fmt.Sprintf(" verify=%d rb=%d", rep.Version, rep.RollbackTo)
	}
	return s
}

type rollbackStop struct {
	name string
	fn   func(db *DB, cut int64) error
}

func rollbackStops(part int64) []rollbackStop {
	return []rollbackStop{
		{"file", func(*DB, int64) error { return errStop }},
		{"current", func(db *DB, cut int64) error {
			if err := writeFileAtomic(db.dir, currentFileName, encodeCurrent(db.mu.gen.version)); err != nil {
				return err
			}
			return errStop
		}},
		{"part-log", func(db *DB, cut int64) error {
			cur, _ := readCurrent(db.dir)
			p := part
			if p <= cut || p > db.log.LastVersion() {
				p = cut
			}
			if err := db.rollback(cur, p); err != nil {
				return err
			}
			return errStop
		}},
		{"full-log", func(db *DB, cut int64) error {
			cur, _ := readCurrent(db.dir)
			if err := db.rollback(cur, cut); err != nil {
				return err
			}
			return errStop
		}},
	}
}

// shortCuts returns the rollback targets a test tries: under -short, the
// first and the last only.
func shortCuts(cuts []int64) []int64 {
	if testing.Short() && len(cuts) > 2 {
		return []int64{cuts[0], cuts[len(cuts)-1]}
	}
	return cuts
}

// rollbackSteps interrupts a rollback of src to cut at each stop, then
// checks every observer and a follow-up open.
func rollbackSteps(t *testing.T, src string, hashes map[int64][]byte, cut, part int64, follow []Options) {
	for _, stop := range rollbackStops(part) {
		for _, o := range follow {
			if o.TargetVersion > cut {
				continue // past the rollback's target: refused, see TestInterruptedRollback
			}
			name := fmt.Sprintf("cut%d/%s/tv%d-rb%v", cut, stop.name, o.TargetVersion, o.Rollback)
			t.Run(name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "db")
				testutil.CopyDir(t, src, dir)
				duringRollback = stop.fn
				_, err := Open(dir, Options{TargetVersion: cut, Rollback: true})
				duringRollback = nil
				if err != errStop {
					t.Fatalf("interrupted rollback: %v", err)
				}
				want := fmt.Sprintf("latest=%d(<nil>) ro=%d hashok=true verify=%d", cut, cut, cut)
				if got := rollbackObserve(dir, hashes); len(got) < len(want) || got[:len(want)] != want {
					t.Errorf("after the interrupted rollback: %s, want %s", got, want)
				}
				wantV, latestAfter := cut, cut
				if o.TargetVersion > 0 {
					wantV = o.TargetVersion
					if o.Rollback {
						latestAfter = o.TargetVersion
					}
				}
				db, err := Open(dir, o)
				if err != nil {
					t.Fatalf("follow-up open: %v", err)
				}
				if db.Version() != wantV || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[wantV]) {
					t.Errorf("follow-up open at %d, want %d", db.Version(), wantV)
				}
				db.Close()
				want = fmt.Sprintf("latest=%d(<nil>) ro=%d hashok=true verify=%d rb=0", latestAfter, latestAfter, latestAfter)
				if got := rollbackObserve(dir, hashes); got != want {
					t.Errorf("after the follow-up: %s, want %s", got, want)
				}
				commitsAfterRollback(t, dir, latestAfter)
			})
		}
	}
}

// TestRollbackStepsAfterSnapshotCommit is TestRollbackSteps across a
// version committed by a snapshot (31, too large for the log), whose empty
// log a rollback to it leaves behind the snapshot.
func TestRollbackStepsAfterSnapshotCommit(t *testing.T) {
	src := t.TempDir()
	db, err := Open(src, Options{CreateIfMissing: true, InitialStores: crashStores,
		SnapshotInterval: 10, SnapshotKeepRecent: 3, WALSegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	SetMaxLoggedEntry(db, 128<<10)
	hashes := map[int64][]byte{}
	for v := int64(1); v <= 45; v++ {
		n := 0
		if v == 31 {
			n = 160 << 10
		}
		hashes[v] = commitBlock(t, db, largeBlock(v, n))
	}
	db.Close()
	vs, _ := listSnapshots(src)
	cur, _ := readCurrent(src)
	t.Logf("snapshots %v current %d", vs, cur)
	for _, cut := range shortCuts([]int64{31, 35, 41}) {
		follow := []Options{{}, {TargetVersion: cut, Rollback: true}, {TargetVersion: 31, Rollback: true}, {TargetVersion: 32}, {TargetVersion: 31}}
		rollbackSteps(t, src, hashes, cut, 43, follow)
	}
}

// TestRollbackSteps stops a rollback at each of its steps (the file
// written; current switched; the log cut part way; the log cut whole, the
// file left) for several targets, then checks that LatestVersion, a
// read-only open and Verify all report the target, that a writer open
// with each kind of options finishes it, and that the next commit follows
// the version it leaves.
func TestRollbackSteps(t *testing.T) {
	src, hashes := rollbackSource(t, Options{SnapshotKeepRecent: 3})
	for _, cut := range shortCuts([]int64{10, 20, 25, 40, 42}) {
		follow := []Options{{}, {TargetVersion: cut, Rollback: true}, {TargetVersion: 15, Rollback: true}, {TargetVersion: 12}, {TargetVersion: 20}}
		rollbackSteps(t, src, hashes, cut, 43, follow)
	}
}

// rollbackSource commits 45 versions to a new database with opts, a
// snapshot every 10 versions and small log segments, and returns its
// directory and app hashes.
func rollbackSource(t *testing.T, opts Options) (string, map[int64][]byte) {
	src := t.TempDir()
	opts.CreateIfMissing, opts.InitialStores = true, crashStores
	opts.SnapshotInterval, opts.WALSegmentSize = 10, 4<<10
	db, err := Open(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 3, 45)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return src, hashes
}

// TestRollbackStepsInitialVersion is TestRollbackSteps for a database with
// an initial version (100), whose base is the empty snapshot 0.
func TestRollbackStepsInitialVersion(t *testing.T) {
	src, hashes := rollbackSource(t, Options{InitialVersion: 100, SnapshotKeepRecent: 10})
	for _, cut := range shortCuts([]int64{100, 105, 120}) {
		follow := []Options{{}, {TargetVersion: cut, Rollback: true}, {TargetVersion: 100, Rollback: true}, {TargetVersion: 102}}
		rollbackSteps(t, src, hashes, cut, 140, follow)
	}
}

// TestLatestVersionBesideRollback runs a whole rollback while
// LatestVersion reads (a hook holds its first read after it has read
// "current" until the rollback has finished): it must return the latest version before
// (45) or after (25) the rollback, never the old current snapshot's, which
// the rollback discarded. It read current, the rollback file and the log
// once each, and returned that snapshot's version.
func TestLatestVersionBesideRollback(t *testing.T) {
	dir := t.TempDir()
	// snapshots written offline: background rewrites could leave current
	// anywhere on a loaded machine
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{20, 20} {
		commitN(t, db, 5, n)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	commitN(t, db, 5, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cur := filepath.Join(dir, currentFileName)
	old, err := os.ReadFile(cur)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := decodeCurrent(cur, old); v <= 25 || v >= 45 {
		t.Fatalf("current %d, want one in 26..44", v)
	}
	// LatestVersion's first read holds after it has read current, until
	// the rollback below has finished
	read, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	latestVersionReadCurrent = func(string) {
		once.Do(func() {
			close(read)
			<-resume
		})
	}
	defer func() { latestVersionReadCurrent = nil }()
	type res struct {
		v   int64
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := LatestVersion(dir)
		done <- res{v, err}
	}()
	<-read
	// the whole rollback runs now
	db, err = Open(dir, Options{TargetVersion: 25, Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	close(resume)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.v != 25 && r.v != 45 {
		t.Fatalf("LatestVersion beside a rollback from 45 to 25 returned %d, a version the rollback discarded", r.v)
	}
}

// TestImportRemovesRollbackFile imports into a directory whose database
// is gone but for its leftovers, among them the file of an unfinished
// rollback: the import must remove it with the others, or the imported
// database would take its stale target for an unfinished rollback (and
// no Open succeeded).
func TestImportRemovesRollbackFile(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 10})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 6, 30)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	duringRollback = func(*DB, int64) error { return errStop }
	_, err = Open(dir, Options{TargetVersion: 25, Rollback: true})
	duringRollback = nil
	if err != errStop {
		t.Fatal(err)
	}
	// the database is given up: its current pointer, snapshots and log
	// are removed, the rollback's files left for the import to clear (the
	// snapshots and log of a database without current are refused, see
	// TestLostCurrentRefused)
	vs, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{currentFileName, walDirName}
	for _, v := range vs {
		names = append(names, snapshotDirName(v))
	}
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Import(dir, 100, nil, ImportOptions{Stores: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{rollbackFileName, rollbacksName} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s of the former database after the import: %v", name, err)
		}
	}
	if v, err := LatestVersion(dir); err != nil || v != 100 {
		t.Errorf("LatestVersion of the imported database: %d (%v), want 100", v, err)
	}
	for _, o := range []Options{{ReadOnly: true}, {}} {
		db, err := Open(dir, o)
		if err != nil {
			t.Errorf("open (read-only %v) of the imported database: %v", o.ReadOnly, err)
			continue
		}
		if db.Version() != 100 {
			t.Errorf("open (read-only %v) at %d, want 100", o.ReadOnly, db.Version())
		}
		db.Close()
	}
}

// TestRollbackCount: every writer Open that discards versions (a rollback,
// or the finish of an interrupted one) adds one to the "rollbacks" file
// before it discards anything; opens that discard nothing leave it alone.
func TestRollbackCount(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 10, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 8, 30)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	count := func(want uint64) {
		t.Helper()
		if n, err := readRollbacks(dir); err != nil || n != want {
			t.Fatalf("rollbacks %d (%v), want %d", n, err, want)
		}
	}
	reopen := func(o Options) {
		t.Helper()
		db, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	count(0)
	reopen(Options{TargetVersion: 30, Rollback: true}) // nothing to discard
	reopen(Options{})
	count(0)
	reopen(Options{TargetVersion: 25, Rollback: true})
	count(1)
	// stopped after the count, before anything is discarded
	var seen uint64
	duringRollback = func(db *DB, _ int64) error {
		seen, _ = readRollbacks(db.dir)
		return errStop
	}
	_, err = Open(dir, Options{TargetVersion: 15, Rollback: true})
	duringRollback = nil
	if err != errStop || seen != 2 {
		t.Fatalf("interrupted rollback: %v, count %d during it, want 2", err, seen)
	}
	reopen(Options{}) // finishes it
	count(3)
	if v, err := LatestVersion(dir); err != nil || v != 15 {
		t.Fatalf("LatestVersion %d (%v), want 15", v, err)
	}
	reopen(Options{})
	count(3)
	// a damaged count fails the opens with ErrCorrupt, naming the file
	path := filepath.Join(dir, rollbacksName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[9] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("read-only open with a damaged %s: %v, want ErrCorrupt naming it", rollbacksName, err)
	}
	// a writer replaces it with a count no reader holds
	reopen(Options{})
	if n, err := readRollbacks(dir); err != nil || n == 3 || n == 0 {
		t.Fatalf("rollbacks after a writer open: %d (%v)", n, err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
	// and a rollback over a damaged count replaces it as well
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	reopen(Options{TargetVersion: 10, Rollback: true})
	if n, err := readRollbacks(dir); err != nil || n == 3 || n == 0 {
		t.Fatalf("rollbacks after a rollback over a damaged count: %d (%v)", n, err)
	}
	if v, err := LatestVersion(dir); err != nil || v != 10 {
		t.Fatalf("LatestVersion %d (%v), want 10", v, err)
	}
}
