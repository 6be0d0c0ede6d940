package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCommitBySnapshot commits versions whose log entries are over the
// bound (here lowered from wal.MaxEntrySize) while background rewrites run:
// each is made durable by a snapshot of its own, the log resumes after it,
// the app hashes and contents follow the reference, reopens land on the
// latest version, and the versions before it are refused with ErrVersion:
// the older snapshots, which the log no longer rolls forward, are removed.
func TestCommitBySnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 4, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	// each rewrite waits for 3 more commits, so that the large versions
	// come while one is in flight and must be dropped
	DelayRewrites(db, 3)
	SetMaxLoggedEntry(db, 128<<10)
	large := map[int64]bool{11: true, 23: true, 24: true}
	ref := &crashRef{entry: func(v int64, _ []string) wal.Entry {
		if large[v] {
			return wal.Entry{Version: v, ChangeSets: largeBlock(v, 160<<10)}
		}
		return wal.Entry{Version: v, ChangeSets: crashBlock(1, v)}
	}}
	ref.reset(crashStores)
	hashes := map[int64][]byte{}
	check := func(db *DB, v int64) {
		t.Helper()
		ref.rollback(t, v) // rebuilt from the first block when behind
		if got, want := db.LastCommitInfo().Hash(), ref.appHash(t, v); db.Version() != v || !bytes.Equal(got, want) {
			t.Fatalf("at %d with hash %X, want %d with %X", db.Version(), got, v, want)
		}
	}
	for v := int64(1); v <= 30; v++ {
		hashes[v] = commitBlock(t, db, ref.entry(v, nil).ChangeSets)
		check(db, v)
		if !large[v] {
			continue
		}
		// durable by its snapshot: current points at it, the log holds
		// nothing up to it
		if got := db.SnapshotVersion(); got != v {
			t.Fatalf("version %d committed on snapshot %d", v, got)
		}
		if cur, err := readCurrent(dir); err != nil || cur != v {
			t.Fatalf("current %d (%v) after committing %d", cur, err, v)
		}
		if first := db.log.FirstVersion(); first != 0 {
			t.Fatalf("after committing %d by a snapshot the log starts at %d", v, first)
		}
		// the older snapshots, which the log no longer rolls forward,
		// are gone (a dropped background rewrite's too)
		if versions, err := listSnapshots(dir); err != nil || !slices.Equal(versions, []int64{v}) {
			t.Fatalf("snapshots %v (%v) after committing %d by a snapshot", versions, err, v)
		}
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatal(err)
		}
		view.Release()
		for _, old := range []int64{v - 1, v - 2} {
			if _, err := db.ViewAt(old); !errors.Is(err, ErrVersion) {
				t.Fatalf("ViewAt(%d) after committing %d by a snapshot: %v, want ErrVersion", old, v, err)
			}
		}
		if v == 11 {
			// reopen with the log still empty: the next commit
			// starts it again
			n := SnapshotCommits(db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, Options{SnapshotInterval: 4, SnapshotKeepRecent: 2}); err != nil {
				t.Fatal(err)
			}
			DelayRewrites(db, 3)
			SetMaxLoggedEntry(db, 128<<10)
			db.snapshotCommits.Add(n)
			check(db, v)
		}
	}
	if n := SnapshotCommits(db); n != int64(len(large)) {
		t.Fatalf("%d versions committed by a snapshot, want %d", n, len(large))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(db, 30)
	for _, v := range []int64{5, 20, 23} {
		if _, err := db.ViewAt(v); !errors.Is(err, ErrVersion) {
			t.Fatalf("ViewAt(%d): %v, want ErrVersion", v, err)
		}
	}
	for v := int64(24); v <= 30; v++ {
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", v, err)
		}
		if !bytes.Equal(view.CommitInfo().Hash(), hashes[v]) {
			t.Fatalf("ViewAt(%d) hash differs", v)
		}
		view.Release()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir); err != nil {
		t.Fatalf("Verify: %v", err)
	} else if rep.Version != 30 || rep.WALFirst != 25 {
		t.Fatalf("Verify: version %d, log from %d; want 30 and 25", rep.Version, rep.WALFirst)
	}
	if _, err := Open(dir, Options{ReadOnly: true, TargetVersion: 20}); !errors.Is(err, ErrVersion) {
		t.Fatalf("TargetVersion 20: %v, want ErrVersion", err)
	}
	ro, err := Open(dir, Options{ReadOnly: true, TargetVersion: 27})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !bytes.Equal(ro.LastCommitInfo().Hash(), hashes[27]) {
		t.Fatal("TargetVersion 27 opened with another hash")
	}
}

// TestOpenLogBehindSnapshot: a log that ends before the current snapshot
// (a machine crash under a relaxed fsync policy lost entries the snapshot
// holds, or a crash inside a version committed by a snapshot) is emptied
// by Open, which opens at the snapshot and first removes the older
// snapshot kept beside it, which the log could no longer roll forward: the
// versions before are refused with ErrVersion, and Verify finds no gap.
func TestOpenLogBehindSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 1, 20)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cutLog(t, dir, 17)

	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 20 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[20]) {
		t.Fatalf("opened at %d, want 20 with its hash", db.Version())
	}
	if versions, err := listSnapshots(dir); err != nil || !slices.Equal(versions, []int64{20}) {
		t.Fatalf("snapshots %v (%v) after an open that emptied the log, want [20]", versions, err)
	}
	commitN(t, db, 1, 1)
	if _, err := db.ViewAt(21); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{5, 17} {
		view, err := db.ViewAt(v)
		if err == nil {
			view.Release()
		}
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("ViewAt(%d) with the log resumed at 21: %v, want ErrVersion", v, err)
		}
	}
}

// TestViewBeforeInitialVersion: in a database whose first version is its
// initial version, a version before it is refused with ErrVersion, by
// ViewAt and by a TargetVersion open; the empty snapshot of version 0 is
// not passed off as it.
func TestViewBeforeInitialVersion(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, InitialVersion: 100, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 6) // versions 100 to 105
	if view, err := db.ViewAt(102); err != nil || view.Version() != 102 {
		t.Fatalf("ViewAt(102): %v", err)
	} else {
		view.Release()
	}
	for _, v := range []int64{1, 50, 99} {
		view, err := db.ViewAt(v)
		if err == nil {
			view.Release()
		}
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("ViewAt(%d) before the initial version 100: %v, want ErrVersion", v, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{ReadOnly: true, TargetVersion: 50}); !errors.Is(err, ErrVersion) {
		t.Fatalf("TargetVersion 50 before the initial version 100: %v, want ErrVersion", err)
	}
}

// TestReadOnlyOpenBesideSnapshotCommit: a read-only open during which the
// writer commits a version by a snapshot (emptying the log the open is
// about to read) does not stop at the old snapshot, behind versions
// acknowledged before it began: it starts again from the new one.
func TestReadOnlyOpenBesideSnapshotCommit(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	SetMaxLoggedEntry(db, 128<<10)
	commitN(t, db, 1, 10)
	// once the open has mapped the old snapshot: the new one is written
	// and made current, the old one removed, the log emptied
	beforeOpenLog = func(d string) {
		if d == dir && db.Version() == 10 {
			commitBlock(t, db, largeBlock(11, 160<<10))
		}
	}
	defer func() { beforeOpenLog = nil }()
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if SnapshotCommits(db) != 1 {
		t.Fatal("version 11 was not committed by a snapshot")
	}
	if ro.Version() != 11 || !bytes.Equal(ro.LastCommitInfo().Hash(), db.LastCommitInfo().Hash()) {
		t.Fatalf("read-only open at %d beside a writer at %d", ro.Version(), db.Version())
	}
}

// TestViewAtBesideSnapshotCommits: readers rebuilding recent versions
// while every fourth version is committed by a snapshot (which removes the
// snapshots their rebuilds start from and empties the log they replay) get
// either the version with its hash or ErrVersion, never another error or
// other data.
func TestViewAtBesideSnapshotCommits(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1,
		SnapshotKeepRecent: 3, ViewCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	SetMaxLoggedEntry(db, 64<<10)
	var hashes sync.Map
	var stop atomic.Bool
	var wg sync.WaitGroup
	answers := make([]map[string]int, 2)
	for g := range answers {
		answers[g] = map[string]int{}
		wg.Add(1)
		go func(kinds map[string]int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				v := db.Version() - 1 - int64(i%3)
				if v < 1 {
					continue
				}
				view, err := db.ViewAt(v)
				switch {
				case err == nil:
					h, _ := hashes.Load(v)
					if !bytes.Equal(view.CommitInfo().Hash(), h.([]byte)) {
						t.Errorf("ViewAt(%d) has another hash", v)
					}
					view.Release()
					kinds["ok"]++
				case errors.Is(err, ErrVersion):
					kinds["ErrVersion"]++
				default:
					t.Errorf("ViewAt(%d): %v", v, err)
				}
			}
		}(answers[g])
	}
	versions := int64(200)
	if testing.Short() {
		versions = 80
	}
	for v := int64(1); v <= versions; v++ {
		n := 0
		if v%4 == 0 {
			n = 80 << 10
		}
		hashes.Store(v, commitBlock(t, db, largeBlock(v, n)))
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d versions, %d committed by a snapshot; answers %v", versions, SnapshotCommits(db), answers)
	if SnapshotCommits(db) != versions/4 {
		t.Fatalf("%d versions committed by a snapshot, want %d", SnapshotCommits(db), versions/4)
	}
}

// TestViewAtRebuiltBesideSnapshotCommit: a version ViewAt rebuilt while a
// snapshot commit made the versions before it unreachable is refused like
// them, and not cached to be served later.
func TestViewAtRebuiltBesideSnapshotCommit(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1,
		SnapshotKeepRecent: 3, ViewCacheSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	SetMaxLoggedEntry(db, 64<<10)
	for v := int64(1); v <= 5; v++ {
		commitBlock(t, db, largeBlock(v, 0))
	}
	var once sync.Once
	db.afterRebuild = func(int64) {
		once.Do(func() { commitBlock(t, db, largeBlock(6, 80<<10)) })
	}
	for i := 0; i < 2; i++ {
		if v, err := db.ViewAt(3); !errors.Is(err, ErrVersion) {
			if err == nil {
				v.Release()
			}
			t.Fatalf("ViewAt(3) after version 6 was committed by a snapshot (call %d): %v", i+1, err)
		}
	}
	if SnapshotCommits(db) != 1 {
		t.Fatalf("%d versions committed by a snapshot, want 1", SnapshotCommits(db))
	}
}

// TestOpenAfterCrashInSnapshotCommit: the state a crash leaves inside a
// version committed by a snapshot right after another (current points at
// the new snapshot, the log is empty, the older snapshot not yet removed)
// is repaired by the next writer Open: it removes the older snapshot, so
// the log reaches back to the oldest kept one again (Verify) and a
// rollback cannot be pointed at a snapshot the log skips past.
func TestOpenAfterCrashInSnapshotCommit(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 2}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	SetMaxLoggedEntry(db, 128<<10)
	commitN(t, db, 1, 9)
	commitBlock(t, db, largeBlock(10, 160<<10))
	// keep a copy of snapshot 10, which committing 11 removes
	saved := filepath.Join(t.TempDir(), "s10")
	if err := os.CopyFS(saved, os.DirFS(filepath.Join(dir, snapshotDirName(10)))); err != nil {
		t.Fatal(err)
	}
	commitBlock(t, db, largeBlock(11, 160<<10))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, snapshotDirName(10)), os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}

	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if versions, err := listSnapshots(dir); err != nil || !slices.Equal(versions, []int64{11}) {
		t.Fatalf("snapshots %v (%v) after the open, want [11]", versions, err)
	}
	commitN(t, db, 1, 3) // versions 12 to 14
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, err := Open(dir, Options{TargetVersion: 10, Rollback: true}); !errors.Is(err, ErrVersion) {
		t.Fatalf("rollback to 10: %v, want ErrVersion", err)
	}
}

// TestReadOnlyTargetBesideWriter: a read-only open of a given version,
// during which the writer moves to a new snapshot and removes the one the
// open started from (a snapshot commit; a background rewrite and its
// prune), opens at that version with its hash, or fails: it never replays
// a log that no longer reaches back to its snapshot onto it.
func TestReadOnlyTargetBesideWriter(t *testing.T) {
	for _, bySnapshot := range []bool{true, false} {
		t.Run(fmt.Sprintf("bySnapshot=%v", bySnapshot), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1}
			if !bySnapshot {
				opts.SnapshotInterval, opts.SnapshotKeepRecent = 5, 0
			}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			SetMaxLoggedEntry(db, 128<<10)
			hashes := map[int64][]byte{}
			commit := func(v int64) {
				n := 0
				if bySnapshot && v == 4 {
					n = 160 << 10
				}
				hashes[v] = commitBlock(t, db, largeBlock(v, n))
			}
			for v := int64(1); v <= 3; v++ {
				commit(v)
			}
			beforeOpenLog = func(d string) {
				if d != dir || db.Version() != 3 {
					return
				}
				for v := int64(4); v <= 12; v++ {
					if !bySnapshot && v == 7 {
						// the rewrite of version 5 is done: commit 7
						// switches to it (if 6 did not), and its prune
						// removes snapshot 0 and the log before it
						waitRewrite(db)
					}
					commit(v)
					for deadline := time.Now().Add(time.Minute); !bySnapshot && v == 7 && !pruned(dir, 0) && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
				}
				if !pruned(dir, 0) {
					t.Fatal("snapshot 0 was not removed")
				}
			}
			defer func() { beforeOpenLog = nil }()
			ro, err := Open(dir, Options{ReadOnly: true, TargetVersion: 12})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if ro.Version() != 12 || !bytes.Equal(ro.LastCommitInfo().Hash(), hashes[12]) {
				t.Fatalf("read-only TargetVersion 12 opened at %d with another hash", ro.Version())
			}
		})
	}
}

// largeBlock returns crashBlock(1, v) with, if n > 0, a value of n bytes
// set in store "acc": 160 KiB pass the 128 KiB bound the tests set with
// SetMaxLoggedEntry.
func largeBlock(v int64, n int) []wal.ChangeSet {
	css := crashBlock(1, v)
	if n > 0 {
		css = append(css, wal.ChangeSet{Name: "acc", Pairs: []wal.KVPair{{Key: []byte("large"), Value: bytes.Repeat([]byte{byte(v)}, n)}}})
	}
	return css
}

// commitBlock applies css to db, commits and returns the app hash.
func commitBlock(t *testing.T, db *DB, css []wal.ChangeSet) []byte {
	t.Helper()
	if err := db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return info.Hash()
}

// failingLimiter fails every wait of a paced rewrite with err.
type failingLimiter struct{ err error }

func (l failingLimiter) WaitN(context.Context, int) error { return l.err }
func (l failingLimiter) Burst() int                       { return 1 << 20 }

// TestSnapshotCommitReportsFailedRewrite: a background rewrite that failed
// before a version committed by a snapshot dropped it is reported by that
// Commit, after committing, as ErrRewrite, as its switch would have.
func TestSnapshotCommitReportsFailedRewrite(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2,
		RewriteRateLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	SetMaxLoggedEntry(db, 128<<10)
	injected := errors.New("injected write failure")
	db.wrapLimiter = func(snapshot.Limiter) snapshot.Limiter { return failingLimiter{injected} }
	commitBlock(t, db, crashBlock(1, 1))
	commitBlock(t, db, crashBlock(1, 2)) // starts a rewrite, which fails
	waitRewrite(db)
	if err := db.ApplyChangeSets(largeBlock(3, 160<<10)); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if info == nil || info.Version != 3 || SnapshotCommits(db) != 1 {
		t.Fatalf("commit of version 3 by a snapshot: %v, %v", info, err)
	}
	if !errors.Is(err, ErrRewrite) || !errors.Is(err, injected) {
		t.Fatalf("commit after the failed rewrite: %v, want ErrRewrite wrapping the failure", err)
	}
}
