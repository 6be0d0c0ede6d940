package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// rvSegName is a log segment's file name (wal's segmentName).
func rvSegName(base int64) string { return fmt.Sprintf("%020d.wal", base) }

// rvBlockRolls makes the log's next segments (bases from..to) impossible to
// create: a directory stands where each one's temporary file would go.
func rvBlockRolls(t *testing.T, dir string, from, to int64) func() {
	t.Helper()
	var made []string
	for b := from; b <= to; b++ {
		p := filepath.Join(dir, walDirName, rvSegName(b)+".tmp")
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		// a file inside, so that nothing removes it as empty
		if err := os.WriteFile(filepath.Join(p, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	return func() {
		for _, p := range made {
			_ = os.RemoveAll(p)
		}
	}
}

func rvCommit(t *testing.T, db *DB, seed int64) []byte {
	t.Helper()
	if err := db.ApplyChangeSets(crashBlock(seed, db.WorkingVersion())); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return info.Hash()
}

func rvNoTmp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), tmpSuffix) {
			t.Errorf("%s left in %s", e.Name(), dir)
		}
	}
}

// TestFailLogRollBlocked: the log cannot start its next segment; the
// commit that needs it fails, every later change and commit is ErrBroken,
// committed versions stay readable, and a reopen continues from the last
// logged version.
func TestFailLogRollBlocked(t *testing.T) {
	for _, async := range []int{0, 4} {
		t.Run(fmt.Sprintf("async%d", async), func(t *testing.T) {
			dir := t.TempDir()
			const seed = 7
			opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 3,
				SnapshotKeepRecent: 1, WALSegmentSize: wal.MinSegmentSize, AsyncCommitBuffer: async}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ref := newCrashRef(seed)
			hashes := map[int64][]byte{}
			for i := 0; i < 5; i++ {
				v := db.WorkingVersion()
				hashes[v] = rvCommit(t, db, seed)
			}
			if err := db.log.Flush(); err != nil {
				t.Fatal(err)
			}
			unblock := rvBlockRolls(t, dir, db.Version()+1, db.Version()+40)
			var failed error
			last := db.Version()
			for i := 0; i < 20 && failed == nil; i++ {
				v := db.WorkingVersion()
				if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
					failed = err
					break
				}
				info, err := db.Commit()
				if err != nil {
					failed = err
					break
				}
				hashes[v] = info.Hash()
				last = v
			}
			if failed == nil {
				t.Fatal("no commit failed")
			}
			t.Logf("failure after %d: %v", last, failed)
			// every change and commit now refused
			if err := db.Set("bank", []byte("k"), []byte("v")); !errors.Is(err, ErrBroken) {
				t.Errorf("Set after failure: %v", err)
			}
			if err := db.ApplyChangeSets(crashBlock(seed, 1)); !errors.Is(err, ErrBroken) {
				t.Errorf("ApplyChangeSets after failure: %v", err)
			}
			if _, err := db.Commit(); !errors.Is(err, ErrBroken) {
				t.Errorf("Commit after failure: %v", err)
			}
			if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"new"}}); !errors.Is(err, ErrBroken) {
				t.Errorf("ApplyUpgrades after failure: %v", err)
			}
			if err := db.RewriteSnapshot(context.Background()); !errors.Is(err, ErrBroken) {
				t.Errorf("RewriteSnapshot after failure: %v", err)
			}
			// the committed versions stay readable
			vw, err := db.View()
			if err != nil {
				t.Fatal(err)
			}
			if got := vw.Version(); got != last {
				t.Errorf("view at %d, want %d", got, last)
			}
			if !bytes.Equal(vw.CommitInfo().Hash(), hashes[last]) {
				t.Errorf("view hash differs")
			}
			vw.Release()
			// (an asynchronous log loses the versions queued when it
			// failed: only the written ones can be rebuilt)
			for v := int64(1); v <= min(last, db.log.WrittenVersion()); v++ {
				vw, err := db.ViewAt(v)
				if err != nil {
					t.Errorf("ViewAt(%d): %v", v, err)
					continue
				}
				if !bytes.Equal(vw.CommitInfo().Hash(), hashes[v]) {
					t.Errorf("ViewAt(%d) hash differs", v)
				}
				vw.Release()
			}
			cerr := db.Close()
			t.Logf("close: %v", cerr)
			unblock()
			db, err = Open(dir, Options{})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			minV := last
			if async > 0 {
				minV = 0
			}
			got := checkRecovered(t, db, minV, ref)
			if got > last+1 {
				t.Errorf("reopened at %d, last committed %d", got, last)
			}
			if h, ok := hashes[got]; ok && !bytes.Equal(h, db.LastCommitInfo().Hash()) {
				t.Errorf("hash of %d differs after reopen", got)
			}
			rvNoTmp(t, dir)
			for i := 0; i < 4; i++ {
				rvCommit(t, db, seed)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkRecovered(t, db, got+4, ref)
			db.Close()
		})
	}
}

// rvGoroutines waits for the goroutine count to come down to at most n.
func rvGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines after Close, %d before Open:\n%s", runtime.NumGoroutine(), n, buf)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFailRewriteFailsThenRecovers: background rewrites that fail are
// reported by the next Commit (ErrRewrite, with the committed info); once the
// cause is gone a later rewrite succeeds; Close and a reopen leave nothing
// behind and land on the last version.
func TestFailRewriteFailsThenRecovers(t *testing.T) {
	base := runtime.NumGoroutine()
	dir := t.TempDir()
	const seed = 11
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 1,
		SnapshotKeepRecent: 0, RewriteConcurrency: 16, RewriteRateLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected rewrite failure")
	db.wrapLimiter = func(snapshot.Limiter) snapshot.Limiter { return failingLimiter{injected} }
	ref := newCrashRef(seed)
	reported := 0
	for i := 0; i < 6; i++ {
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			t.Fatal(err)
		}
		waitRewrite(db)
		info, err := db.Commit()
		if info == nil || info.Version != v {
			t.Fatalf("commit %d: %v, %v", v, info, err)
		}
		if err != nil {
			if !errors.Is(err, ErrRewrite) || !errors.Is(err, injected) {
				t.Fatalf("commit %d: %v", v, err)
			}
			reported++
		}
	}
	if reported == 0 {
		t.Fatal("no failure reported")
	}
	if got := db.SnapshotVersion(); got != 0 {
		t.Fatalf("snapshot %d after failed rewrites", got)
	}
	waitRewrite(db)
	db.wrapLimiter = nil
	for i := 0; i < 4; i++ {
		waitRewrite(db)
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil && !errors.Is(err, ErrRewrite) {
			t.Fatal(err)
		}
	}
	waitRewrite(db)
	if _, err := db.Commit(); err != nil {
		t.Fatalf("commit after rewrites: %v", err)
	}
	if db.SnapshotVersion() == 0 {
		t.Errorf("no rewrite succeeded")
	}
	last := db.Version()
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	rvGoroutines(t, base)
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref.advance(t, last-1) // the last commit had no changes
	ref.version = last
	rvNoTmp(t, dir)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rvGoroutines(t, base)
}

// TestFailCloseDuringRewrite: Close while a background rewrite is held
// after writing its snapshot, or while a paced rewrite is still writing:
// Close returns, the goroutines end, and the reopen is at the last version
// with the right hash, every version viewable and no leftovers.
func TestFailCloseDuringRewrite(t *testing.T) {
	for _, stage := range []string{"afterWrite", "limiter"} {
		t.Run(stage, func(t *testing.T) {
			base := runtime.NumGoroutine()
			dir := t.TempDir()
			const seed = 13
			opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2, SnapshotKeepRecent: 0}
			if stage == "limiter" {
				opts.RewriteRateLimit = MinRewriteRateLimit
			}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{}, 1)
			if stage == "afterWrite" {
				db.afterWrite = func(ctx context.Context, v int64) {
					select {
					case started <- struct{}{}:
					default:
					}
					<-ctx.Done()
				}
			} else {
				close(started)
			}
			hashes := map[int64][]byte{}
			if stage == "limiter" {
				// 2 MiB of values: the paced rewrite of version 2 takes
				// about 30 s, far beyond its burst, so Close finds it
				// writing and no switch prunes the first versions.
				big := wal.ChangeSet{Name: crashStores[0]}
				for i := 0; i < 512; i++ {
					big.Pairs = append(big.Pairs, wal.KVPair{Key: []byte(fmt.Sprintf("big%04d", i)), Value: bytes.Repeat([]byte{byte(i)}, 4096)})
				}
				if err := db.ApplyChangeSets([]wal.ChangeSet{big}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 4; i++ {
				v := db.WorkingVersion()
				hashes[v] = rvCommit(t, db, seed)
			}
			<-started
			if err := db.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			rvGoroutines(t, base)
			db, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if db.Version() != 4 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[4]) {
				t.Fatalf("reopened at %d", db.Version())
			}
			rvNoTmp(t, dir)
			for v := int64(1); v <= 4; v++ {
				vw, err := db.ViewAt(v)
				if err != nil {
					t.Fatalf("ViewAt %d: %v", v, err)
				}
				if !bytes.Equal(vw.CommitInfo().Hash(), hashes[v]) {
					t.Errorf("ViewAt %d hash", v)
				}
				vw.Release()
			}
			db.Close()
		})
	}
}

// TestFailPruneFailure: a failed prune is reported by the next Commit as
// ErrRewrite, and later prunes run again.
func TestFailPruneFailure(t *testing.T) {
	dir := t.TempDir()
	const seed = 17
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2, SnapshotKeepRecent: 0})
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected prune failure")
	var fail atomic.Bool
	fail.Store(true)
	db.beforePrune = func(int64) error {
		if fail.Load() {
			return injected
		}
		return nil
	}
	var sawErr error
	for i := 0; i < 6; i++ {
		waitRewrite(db)
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			t.Fatal(err)
		}
		_, err := db.Commit()
		if err != nil {
			sawErr = err
		}
		waitForPrune(t, db) // the next commit reports its end
	}
	if !errors.Is(sawErr, ErrRewrite) || !errors.Is(sawErr, injected) {
		t.Fatalf("prune failure reported as %v", sawErr)
	}
	fail.Store(false)
	for i := 0; i < 6; i++ {
		waitRewrite(db)
		rvCommitTolerant(t, db, seed)
		waitForPrune(t, db)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	// the current one, and a rewrite's that Close left unswitched
	if len(snaps) > 2 {
		t.Errorf("snapshots %v kept with SnapshotKeepRecent 0", snaps)
	}
}

func rvCommitTolerant(t *testing.T, db *DB, seed int64) {
	t.Helper()
	if err := db.ApplyChangeSets(crashBlock(seed, db.WorkingVersion())); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil && !errors.Is(err, ErrRewrite) {
		t.Fatal(err)
	}
}

// rvBlockFile makes writeFileAtomic(dir, name) fail: a non-empty directory
// stands at its temporary name.
func rvBlockFile(t *testing.T, dir, name string) func() {
	t.Helper()
	p := filepath.Join(dir, name+tmpSuffix)
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailCurrentUnwritable: while "current" cannot be replaced,
// background rewrites fail and are reported (ErrRewrite) after commits that
// did commit, RewriteSnapshot fails without breaking the database, and a
// version committed by a snapshot fails the commit and breaks it; reopened,
// the database is at the last acknowledged version, and once "current" can
// be written again rewrites succeed.
func TestFailCurrentUnwritable(t *testing.T) {
	base := runtime.NumGoroutine()
	dir := t.TempDir()
	const seed = 19
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	ref := newCrashRef(seed)
	for i := 0; i < 3; i++ {
		rvCommit(t, db, seed)
		waitRewrite(db)
	}
	unblock := rvBlockFile(t, dir, currentFileName)
	rewriteErrs := 0
	for i := 0; i < 6; i++ {
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if info == nil || info.Version != v {
			t.Fatalf("commit %d: %v %v", v, info, err)
		}
		if err != nil {
			if !errors.Is(err, ErrRewrite) {
				t.Fatalf("commit %d: %v", v, err)
			}
			rewriteErrs++
		}
		waitRewrite(db)
	}
	if rewriteErrs == 0 {
		t.Fatal("no failed rewrite reported")
	}
	if err := db.RewriteSnapshot(context.Background()); err == nil {
		t.Fatal("RewriteSnapshot wrote current through a directory")
	}
	// the database still works
	v := db.WorkingVersion()
	if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil && !errors.Is(err, ErrRewrite) {
		t.Fatalf("commit after failed RewriteSnapshot: %v", err)
	}
	waitRewrite(db)
	unblock()
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatalf("RewriteSnapshot after unblock: %v", err)
	}
	if got := db.SnapshotVersion(); got != db.Version() {
		t.Fatalf("snapshot %d, version %d", got, db.Version())
	}
	for i := 0; i < 5; i++ {
		rvCommitTolerant(t, db, seed)
		waitRewrite(db)
	}
	// a version too large for the log, committed by a snapshot, while
	// current is blocked: the commit fails and breaks the database
	SetMaxLoggedEntry(db, 1)
	unblock = rvBlockFile(t, dir, currentFileName)
	last := db.Version()
	if err := db.ApplyChangeSets(crashBlock(seed, last+1)); err != nil {
		t.Fatal(err)
	}
	if info, err := db.Commit(); err == nil {
		t.Fatalf("snapshot commit through a blocked current: %v", info)
	}
	if _, err := db.Commit(); !errors.Is(err, ErrBroken) {
		t.Fatalf("commit after failed snapshot commit: %v", err)
	}
	t.Logf("close: %v", db.Close())
	rvGoroutines(t, base)
	unblock()
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := checkRecovered(t, db, last, ref); got != last {
		t.Fatalf("reopened at %d, last acknowledged %d", got, last)
	}
	rvNoTmp(t, dir)
	for i := 0; i < 3; i++ {
		rvCommitTolerant(t, db, seed)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rvGoroutines(t, base)
}

// TestFailFirstUnwritable: the database's first commit cannot record
// its version: it fails without breaking the database and without saving
// anything; once the file can be written the same changes commit.
func TestFailFirstUnwritable(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, InitialVersion: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	unblock := rvBlockFile(t, dir, firstFileName)
	if err := db.ApplyChangeSets(crashBlock(1, 10)); err != nil {
		t.Fatal(err)
	}
	want := db.WorkingCommitInfo().Hash()
	if _, err := db.Commit(); err == nil || errors.Is(err, ErrBroken) {
		t.Fatalf("first commit with first blocked: %v", err)
	}
	if db.Version() != 0 || db.WorkingVersion() != 10 {
		t.Fatalf("version %d working %d after failed commit", db.Version(), db.WorkingVersion())
	}
	unblock()
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 10 || !bytes.Equal(info.Hash(), want) {
		t.Fatalf("commit %d %X, want 10 %X", info.Version, info.Hash(), want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 10 || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened at %d", db.Version())
	}
}

// TestFailAsyncCommittedVersionUnreadable: with an asynchronous log,
// versions whose Commit succeeded but that the log writer had not written
// when it failed are lost (ErrBroken's doc): ViewAt of them fails with an
// error wrapping ErrVersion that says so, not with the log's bare write
// error; View of the latest still reads it.
func TestFailAsyncCommittedVersionUnreadable(t *testing.T) {
	for attempt := 0; attempt < 20; attempt++ {
		dir := t.TempDir()
		const seed = 23
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1,
			WALSegmentSize: wal.MinSegmentSize, AsyncCommitBuffer: 8})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			rvCommit(t, db, seed)
		}
		if err := db.log.Flush(); err != nil {
			t.Fatal(err)
		}
		unblock := rvBlockRolls(t, dir, db.Version()+1, db.Version()+40)
		last := db.Version()
		for i := 0; i < 30; i++ {
			v := db.WorkingVersion()
			if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
				break
			}
			if _, err := db.Commit(); err != nil {
				break
			}
			last = v
		}
		written := db.log.WrittenVersion()
		t.Logf("attempt %d: last %d written %d", attempt, last, written)
		if last <= written+1 {
			db.Close()
			unblock()
			continue // the failure came before any version was lost
		}
		if _, err := db.Commit(); !errors.Is(err, ErrBroken) {
			t.Fatalf("commit after the failure: %v", err)
		}
		if db.Version() != last {
			t.Fatalf("Version %d, last committed %d", db.Version(), last)
		}
		for v := written + 1; v < last; v++ {
			vw, err := db.ViewAt(v)
			if err == nil {
				vw.Release()
				continue // rebuilt from the cache of views
			}
			if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "log failed before it held them durably") {
				t.Errorf("ViewAt(%d) of a version the failed log never wrote (Version %d, log written to %d): %v", v, last, written, err)
			}
		}
		vw, err := db.View()
		if err != nil || vw.Version() != last {
			t.Fatalf("View after the failure: %v", err)
		}
		vw.Release()
		db.Close()
		unblock()
		return
	}
	t.Skip("no attempt lost an acknowledged version")
}
