package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// commitAndRewrite commits the working version and rewrites the snapshot
// at it, failing the test on an error; it returns the commit's info.
func commitAndRewrite(t *testing.T, db *DB) *storetypes.CommitInfo {
	t.Helper()
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	return info
}

func TestOpenCommitReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 5, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	var hashes [][]byte
	for v := 1; v <= 23; v++ {
		for i := 0; i < 10; i++ {
			if err := db.Set("a", []byte(fmt.Sprintf("k%d-%d", v, i)), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if v%3 == 0 {
			if err := db.Delete("b", []byte("x")); err != nil {
				t.Fatal(err)
			}
		} else if err := db.Set("b", []byte("x"), []byte{byte(v)}); err != nil {
			t.Fatal(err)
		}
		want := db.WorkingCommitInfo().Hash()
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(info.Hash(), want) {
			t.Fatalf("version %d: commit hash differs from working hash", v)
		}
		hashes = append(hashes, info.Hash())
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), filepath.Join(dir, lockFileName)) {
		t.Fatalf("second writer: %v, want %v naming %s", err, ErrLocked, filepath.Join(dir, lockFileName))
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ro.LastCommitInfo().Hash(), hashes[22]) {
		t.Fatal("read-only open sees another hash")
	}
	ro.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 23 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[22]) {
		t.Fatalf("reopened at %d", db.Version())
	}
	kept, _ := listSnapshots(dir)
	if len(kept) != 2 || kept[1] != 23 {
		t.Fatalf("kept snapshots %v, want one older and 23", kept)
	}
	for _, v := range []int64{23, 22, kept[0] + 1, kept[0]} {
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", v, err)
		}
		if !bytes.Equal(view.CommitInfo().Hash(), hashes[v-1]) {
			t.Fatalf("ViewAt(%d) hash differs", v)
		}
		view.Release()
	}
	if _, err := db.ViewAt(kept[0] - 1); !errors.Is(err, ErrVersion) {
		t.Fatalf("ViewAt(%d) beyond kept snapshots: %v", kept[0]-1, err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"c"}, Renamed: []wal.RenamedStore{{OldName: "a", NewName: "d"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	h := db.LastCommitInfo().Hash()
	db.Close()
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !bytes.Equal(db.LastCommitInfo().Hash(), h) {
		t.Fatal("upgrade not replayed identically")
	}
	if got := db.StoreNames(); fmt.Sprint(got) != "[b c d]" {
		t.Fatalf("stores %v", got)
	}
}

// TestParallelApply applies change sets of several stores, which apply and
// hash in parallel, including a store named twice in one call and a
// failing change set, and checks every version's app hash against a
// database fed the same pairs one Set or Delete at a time, and the logged
// versions by reopening.
func TestParallelApply(t *testing.T) {
	r := testutil.Rand(t)
	stores := []string{"a", "b", "c"}
	pipedDir := t.TempDir()
	open := func(dir string, interval int64) *DB {
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: interval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	// piped keeps every version in the log, so that the reopen below
	// replays what it logged
	piped, single := open(pipedDir, 1000), open(t.TempDir(), 4)
	for v := 1; v <= 12; v++ {
		var css []wal.ChangeSet
		for _, name := range []string{"a", "b", "a", "c"} {
			cs := wal.ChangeSet{Name: name}
			for i := 0; i < 50+r.Intn(200); i++ {
				k := []byte(fmt.Sprintf("%s-%04d", name, r.Intn(2000)))
				if r.Intn(5) == 0 {
					cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Delete: true})
				} else {
					cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: []byte(fmt.Sprint(v, i))})
				}
			}
			css = append(css, cs)
		}
		if err := piped.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		for _, cs := range css {
			for _, p := range cs.Pairs {
				var err error
				if p.Delete {
					err = single.Delete(cs.Name, p.Key)
				} else {
					err = single.Set(cs.Name, p.Key, p.Value)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		// a change set of an unknown store fails the call before any change
		if err := piped.ApplyChangeSets(append(css[:1:1], wal.ChangeSet{Name: "nope"})); !errors.Is(err, ErrUnknownStore) {
			t.Fatalf("unknown store: %v", err)
		}
		// the slices of pairs are the caller's again once the call returns
		for _, cs := range css {
			for i := range cs.Pairs {
				cs.Pairs[i] = wal.KVPair{Key: []byte("reused"), Delete: true}
			}
		}
		a, err := piped.Commit()
		if err != nil {
			t.Fatal(err)
		}
		b, err := single.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Hash(), b.Hash()) {
			t.Fatalf("version %d: app hash %x, one pair at a time %x", v, a.Hash(), b.Hash())
		}
	}
	want := piped.LastCommitInfo().Hash()
	if err := piped.Close(); err != nil {
		t.Fatal(err)
	}
	if got := open(pipedDir, 1000).LastCommitInfo().Hash(); !bytes.Equal(got, want) {
		t.Fatalf("reopened with app hash %x, want %x", got, want)
	}
}

// TestRewriteSnapshotRefusesUncommitted: a synchronous rewrite writes the
// last committed version, so it refuses while the working version has
// changes, which it would otherwise drop from the trees (and record a root
// hash in the snapshot's metadata that its trees do not have).
func TestRewriteSnapshotRefusesUncommitted(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Set("a", []byte("k"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func() error{
		"set":     func() error { return db.Set("a", []byte("k"), []byte("2")) },
		"upgrade": func() error { return db.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if err := db.RewriteSnapshot(context.Background()); !errors.Is(err, ErrUncommitted) {
			t.Fatalf("%s: RewriteSnapshot returned %v, want ErrUncommitted", name, err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatalf("%s: after commit: %v", name, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if db, err = Open(dir, Options{SnapshotInterval: -1}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) || db.SnapshotVersion() != info.Version {
			t.Fatalf("%s: reopened at %d (snapshot %d) with another hash", name, db.Version(), db.SnapshotVersion())
		}
	}
}

// TestRewriteSnapshotPrunes: RewriteSnapshot prunes the snapshots it
// replaces in the background and Close waits for it; a rewrite while a
// prune runs has that prune go again for the new snapshot; a failed prune
// is reported by the next Commit, or by Close if no Commit came.
func TestRewriteSnapshotPrunes(t *testing.T) {
	dir := t.TempDir()
	open := func() *DB {
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	commit := func(db *DB) error {
		if err := db.Set("a", []byte("k"), []byte(fmt.Sprint(db.Version()+1))); err != nil {
			t.Fatal(err)
		}
		_, err := db.Commit()
		return err
	}
	rewrite := func(db *DB) {
		if err := commit(db); err != nil {
			t.Fatal(err)
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	snapshots := func(want ...int64) {
		t.Helper()
		got, err := listSnapshots(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("snapshots %v, want %v", got, want)
		}
	}
	pruning := func(db *DB) bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.mu.pruning
	}

	// a second rewrite while the first one's prune is held
	db := open()
	release, pruned := make(chan struct{}), make(chan int64, 8)
	db.beforePrune = func(cur int64) error {
		pruned <- cur
		<-release
		return nil
	}
	rewrite(db)
	if cur := <-pruned; cur != 1 {
		t.Fatalf("pruning for snapshot %d, want 1", cur)
	}
	rewrite(db)
	close(release)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	close(pruned)
	var rest []int64
	for cur := range pruned {
		rest = append(rest, cur)
	}
	if fmt.Sprint(rest) != "[2]" {
		t.Fatalf("pruned again for snapshots %v, want [2]", rest)
	}
	snapshots(2)

	// a failed prune reported by the next Commit, then one left to Close;
	// the prune that follows the commit after a rewrite (for the log the
	// snapshot holds) removes what the failed one left
	injected := errors.New("injected prune failure")
	db = open()
	var failNext atomic.Bool
	db.beforePrune = func(int64) error {
		if failNext.Swap(false) {
			return injected
		}
		return nil
	}
	waitPrunes := func() {
		for pruning(db) {
			time.Sleep(time.Millisecond)
		}
	}
	// the snapshot opened holds the whole log: the first commit prunes
	if err := commit(db); err != nil {
		t.Fatal(err)
	}
	waitPrunes()
	failNext.Store(true)
	rewrite(db)
	waitPrunes()
	snapshots(2, 4)
	if err := commit(db); !errors.Is(err, ErrRewrite) || !errors.Is(err, injected) {
		t.Fatalf("commit after a failed prune: %v", err)
	}
	waitPrunes()
	snapshots(4)
	if err := commit(db); err != nil {
		t.Fatalf("the failure reported twice: %v", err)
	}
	failNext.Store(true)
	rewrite(db)
	if err := db.Close(); !errors.Is(err, ErrRewrite) || !errors.Is(err, injected) {
		t.Fatalf("close after a failed prune: %v", err)
	}
	snapshots(4, 7)
	db = open()
	defer db.Close()
	if db.Version() != 7 || db.SnapshotVersion() != 7 {
		t.Fatalf("reopened at version %d, snapshot %d", db.Version(), db.SnapshotVersion())
	}
}

// TestCatchUpAcrossUpgrades: a background rewrite whose catch-up spans
// store upgrades cannot rebase (the stores differ from the snapshot's,
// also where their names do not: a store deleted and added again, a swap of
// names) and replays the log instead, which is not counted as a failed
// rebase; the result matches a database that never rewrites, before and
// after reopening.
func TestCatchUpAcrossUpgrades(t *testing.T) {
	stores := []string{"a", "b", "c"}
	open := func(dir string, interval int64) *DB {
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: interval, SnapshotKeepRecent: 1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	dir := t.TempDir()
	db, plain := open(dir, 10), open(t.TempDir(), -1)
	defer plain.Close()
	DelayRewrites(db, 3)
	for v := int64(1); v <= 150; v++ {
		var u wal.Upgrades
		switch v {
		case 12: // the rewrite started at 10 catches up across it
			u = wal.Upgrades{Added: []string{"d"}, Renamed: []wal.RenamedStore{{OldName: "b", NewName: "b2"}}}
		case 33:
			u = wal.Upgrades{Deleted: []string{"c"}}
		case 52: // same names, another tree: the rewrite of 50 replays
			u = wal.Upgrades{Deleted: []string{"d"}, Added: []string{"d"}}
		case 72: // a swap through a temporary name, across the rewrite of 70
			u = wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "t"}, {OldName: "b2", NewName: "a"}}}
		case 73:
			u = wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "t", NewName: "b2"}}}
		}
		for _, x := range []*DB{db, plain} {
			if len(u.Added)+len(u.Renamed)+len(u.Deleted) > 0 {
				if err := x.ApplyUpgrades(u); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range x.StoreNames() {
				for i := 0; i < 20; i++ {
					k := []byte(fmt.Sprintf("k%03d", (int(v)*7+i*13)%150))
					if err := x.Set(name, k, []byte(fmt.Sprint(v, i))); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		a, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Hash(), b.Hash()) {
			t.Fatalf("version %d: app hash %X, without rewrites %X", v, a.Hash(), b.Hash())
		}
		if v%10 == 6 {
			// the rewrite started at v-6 (held back to v-3, see
			// DelayRewrites) has caught up across the upgrades at
			// v-4 to v-3 by now however slow the machine: the next
			// commit switches to it
			waitRewrite(db)
		}
	}
	rebased, skipped, failed := RebaseCounts(db)
	if db.SnapshotVersion() <= 33 || rebased == 0 || skipped == 0 || failed != 0 {
		t.Fatalf("snapshot %d; rounds: %d rebased, %d replayed across upgrades, %d failed rebases", db.SnapshotVersion(), rebased, skipped, failed)
	}
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(dir, 10)
	defer db.Close()
	if !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatal("reopened with another app hash")
	}
}

// TestClosedHandle: after Close every method returns ErrClosed or a zero
// value, never panics (the snapshots are unmapped by then), and the handle
// no longer holds the trees.
// blockAddingBAt4 applies the deterministic changes of version v: store "b" is
// added by version 4's upgrade.
func blockAddingBAt4(t *testing.T, db *DB, v int64) {
	t.Helper()
	if v == 4 {
		if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		k := []byte(fmt.Sprintf("k%03d-%02d", v, i))
		if err := db.Set("a", k, []byte("va")); err != nil {
			t.Fatal(err)
		}
		if v >= 4 {
			if err := db.Set("b", k, []byte("vb")); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCatchUpAfterOlderTarget: after an Open at an older TargetVersion (no
// rollback) the log holds versions past the working one, which the caller
// commits again. A background rewrite whose catch-up replays the log (a store
// was added since its snapshot) must stop at the last committed version, not
// at the log's last one, or its switch finds trees at another version than
// the live ones and reports a corruption that is not there.
func TestCatchUpAfterOlderTarget(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 10; v++ {
		blockAddingBAt4(t, db, v)
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{TargetVersion: 2, SnapshotInterval: 1, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	DelayRewrites(db, 2) // the rewrite at 3 catches up once 5 is committed
	for v := int64(3); v <= 5; v++ {
		blockAddingBAt4(t, db, v)
		if _, err := db.Commit(); err != nil {
			t.Fatalf("re-commit of %d: %v", v, err)
		}
	}
	waitRewrite(db)
	db.mu.Lock()
	caught := db.mu.rewrite.res.caughtUp
	db.mu.Unlock()
	if caught > 5 {
		t.Errorf("the rewrite of 3 caught up to %d while 5 was the last committed version", caught)
	}
	blockAddingBAt4(t, db, 6)
	info, err := db.Commit()
	if info == nil || info.Version != 6 {
		t.Fatalf("commit 6: %v %v", info, err)
	}
	if err != nil {
		t.Errorf("commit 6 (switch to the rewrite of 3) reported: %v", err)
	}
	if sv := db.SnapshotVersion(); sv != 3 {
		t.Errorf("snapshot version %d after the switch, want 3", sv)
	}
}

// TestBackgroundFailuresJoined: a prune failure waiting for the next Commit
// is reported with, not replaced by, the failure of the rewrite that Commit
// finds.
func TestBackgroundFailuresJoined(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 1,
		RewriteRateLimit: 1 << 30, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	injectedPrune := errors.New("injected prune failure")
	injectedWrite := errors.New("injected write failure")
	var rewrites, prunes atomic.Int32
	db.wrapLimiter = func(l snapshot.Limiter) snapshot.Limiter {
		if rewrites.Add(1) == 2 {
			return failingLimiter{injectedWrite}
		}
		return l
	}
	db.beforePrune = func(int64) error {
		if prunes.Add(1) == 1 {
			return injectedPrune
		}
		return nil
	}
	commitBlock(t, db, crashBlock(6, 1)) // starts rewrite 1 at version 1
	waitRewrite(db)
	commitBlock(t, db, crashBlock(6, 2)) // switches to it, prune fails; starts rewrite 2 (fails)
	waitForPrune(t, db)
	waitRewrite(db)
	if err := db.ApplyChangeSets(crashBlock(6, 3)); err != nil {
		t.Fatal(err)
	}
	_, err = db.Commit()
	if !errors.Is(err, ErrRewrite) || !errors.Is(err, injectedWrite) || !errors.Is(err, injectedPrune) {
		t.Errorf("commit 3 reported %v, want both the failed prune and the failed rewrite", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("close reported %v after commit 3 reported the failures", err)
	}
}

func TestClosedHandle(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	commitAndRewrite(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get("a", []byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get: %v", err)
	}
	if db.WorkingTree("a") != nil || len(db.StoreNames()) != 0 || db.WorkingCommitInfo() != nil || db.SnapshotVersion() != 0 {
		t.Error("a closed database still serves its working trees")
	}
	for name, err := range map[string]error{
		"Set":               db.Set("a", []byte("k"), []byte("w")),
		"Delete":            db.Delete("a", []byte("k")),
		"ApplyChangeSets":   db.ApplyChangeSets([]wal.ChangeSet{{Name: "a"}}),
		"ApplyUpgrades":     db.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}),
		"RewriteSnapshot":   db.RewriteSnapshot(context.Background()),
		"SetInitialVersion": db.SetInitialVersion(5),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := db.Commit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit: %v", err)
	}
	if _, err := db.View(); !errors.Is(err, ErrClosed) {
		t.Errorf("View: %v", err)
	}
	if _, err := db.ViewAt(1); !errors.Is(err, ErrClosed) {
		t.Errorf("ViewAt: %v", err)
	}
	if db.mu.trees != nil {
		t.Error("the closed handle still references its trees")
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestConcurrentClose closes a database twice at once while the first
// Close waits for a background rewrite: the second must not return before
// the first has released the lock, so that a writer can open the directory
// as soon as either returns.
func TestConcurrentClose(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	db.afterWrite = func(context.Context, int64) {
		close(started)
		<-release // holds the first Close in its join of the rewrite
	}
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	<-started
	first := make(chan error, 1)
	go func() { first <- db.Close() }()
	for closing := false; !closing; {
		db.mu.Lock()
		closing = db.mu.closed
		db.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() { second <- db.Close() }()
	select {
	case err := <-second:
		t.Fatalf("the second Close returned (%v) while the first was still closing", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-second; err != nil {
		t.Errorf("second Close: %v", err)
	}
	// the second Close's return means the lock is free
	again, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after the second Close returned: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("first Close: %v", err)
	}
}

// TestCorruptSnapshotBreaksWrites: a change that meets a corrupt snapshot
// fails with ErrCorrupt, and from then on the database refuses changes and
// commits (the working trees may hold part of the change), while reads of
// the last committed version go on.
func TestCorruptSnapshotBreaksWrites(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if err := db.Set("a", []byte(fmt.Sprintf("k%05d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	info := commitAndRewrite(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// break the layout of every branch record (Open checks only the meta)
	path := filepath.Join(dir, snapshotDirName(1), treeDirName("a"), snapshot.FileBranches)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off+snapshot.RecordSize <= len(b); off += snapshot.RecordSize {
		b[off+50], b[off+51] = 0, 0 // key leaf before the first leaf
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, Options{SnapshotInterval: -1}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: []byte("k00007"), Value: []byte("w")}}}})
	if !errors.Is(err, memiavl.ErrCorrupt) {
		t.Fatalf("change over a corrupt snapshot: %v", err)
	}
	if err := db.Set("a", []byte("x"), []byte("y")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Set after the failure: %v", err)
	}
	if _, err := db.Commit(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Commit after the failure: %v", err)
	}
	v, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if v.Version() != info.Version || !bytes.Equal(v.CommitInfo().Hash(), info.Hash()) {
		t.Error("the last committed version is no longer served")
	}
}

// TestViewAfterRelease: a released view's reads return ErrReleased, also
// once the snapshot it pinned is unmapped, instead of reading memory the
// process may have mapped again for something else.
func TestViewAfterRelease(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v := 1; v <= 2; v++ {
		if err := db.Set("a", []byte("k"), []byte{byte(v)}); err != nil {
			t.Fatal(err)
		}
		commitAndRewrite(t, db)
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := view.Get("a", []byte("k")); err != nil || !bytes.Equal(got, []byte{2}) {
		t.Fatalf("Get before Release = %x, %v", got, err)
	}
	if view.Tree("a") == nil {
		t.Fatal("Tree before Release is nil")
	}
	view.Release()
	// a new snapshot: the one the view pinned is now unmapped
	if err := db.Set("a", []byte("k"), []byte{3}); err != nil {
		t.Fatal(err)
	}
	commitAndRewrite(t, db)
	view.Release() // idempotent
	if got, err := view.Get("a", []byte("k")); !errors.Is(err, ErrReleased) || got != nil {
		t.Fatalf("Get after Release = %x, %v, want ErrReleased", got, err)
	}
	if tr := view.Tree("a"); tr != nil {
		t.Fatal("Tree after Release is not nil")
	}
	if view.Version() != 2 || view.CommitInfo().Version != 2 {
		t.Fatalf("released view's version %d, commit info's %d, want 2", view.Version(), view.CommitInfo().Version)
	}
}

// TestPruneDropsLogTheSnapshotHolds: the log entries after a background
// rewrite's version start a segment, so the prune after the switch leaves
// no entry the snapshot holds, whatever the segment size.
func TestPruneDropsLogTheSnapshotHolds(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 10})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 25; v++ {
		if err := db.Set("a", []byte(fmt.Sprintf("k%d", v%7)), []byte(fmt.Sprint(v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(db) // the switch comes with the next commit
	}
	if db.SnapshotVersion() != 20 {
		t.Fatalf("snapshot at %d, want 20", db.SnapshotVersion())
	}
	h := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil { // waits for the prune
		t.Fatal(err)
	}
	checkLogRange(t, dir, 21, 25)
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 25 || !bytes.Equal(db.LastCommitInfo().Hash(), h) {
		t.Fatalf("reopened at %d with another hash", db.Version())
	}
}

// TestSplitRewrite: a database whose one store holds most of the state has
// that store's snapshot written in two halves on the rewrite's workers
// (splitStore, parallelTasks), with one small store and two workers and
// with three small stores and three workers, in background rewrites, whose
// catch-up maps the written nodes, and in RewriteSnapshot; the snapshots
// verify and the reopened database has the same app hash and data.
func TestSplitRewrite(t *testing.T) {
	for _, c := range []struct {
		small       []string
		concurrency int
	}{{[]string{"small"}, 2}, {[]string{"s1", "s2", "s3"}, 3}} {
		t.Run(fmt.Sprintf("%d-small-%d-workers", len(c.small), c.concurrency), func(t *testing.T) {
			testSplitRewrite(t, c.small, c.concurrency)
		})
	}
}

func testSplitRewrite(t *testing.T, small []string, concurrency int) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: append([]string{"big"}, small...), SnapshotInterval: 2, RewriteConcurrency: concurrency})
	if err != nil {
		t.Fatal(err)
	}
	r := testutil.Rand(t)
	n := memiavl.SplitMinLeaves + 500
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%07d", i)) }
	for i := 0; i < n; i++ {
		if err := db.Set("big", key(i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	for v := 0; v < 6; v++ {
		for c := 0; c < 300; c++ {
			i := r.Intn(n + 100)
			val := fmt.Sprint(v, "-", c)
			if err := db.Set("big", key(i), []byte(val)); err != nil {
				t.Fatal(err)
			}
			want[string(key(i))] = val
		}
		for k, name := range small {
			if err := db.Set(name, []byte{byte(v)}, []byte{byte(k)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(db)
	}
	if db.SnapshotVersion() < 4 {
		t.Fatalf("snapshot at %d: the background rewrites did not switch", db.SnapshotVersion())
	}
	// the catch-up rebased onto the split writes' node maps, rather than
	// falling back to replaying the log
	if n, errs := db.rebases.Load(), db.rebaseErrs.Load(); n == 0 || errs != 0 {
		t.Fatalf("%d rebases, %d failed", n, errs)
	}
	if err := db.Set("big", key(0), []byte("last")); err != nil {
		t.Fatal(err)
	}
	want[string(key(0))] = "last"
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	waitRewrite(db)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rep.AppHash, h) {
		t.Fatal("verified app hash differs")
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !bytes.Equal(db.LastCommitInfo().Hash(), h) || db.SnapshotVersion() != db.Version() {
		t.Fatalf("reopened at %d (snapshot %d) with another hash", db.Version(), db.SnapshotVersion())
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	for k, v := range want {
		if got, err := view.Get("big", []byte(k)); err != nil || string(got) != v {
			t.Fatalf("Get %s = %q, %v, want %q", k, got, err, v)
		}
	}
	if got := view.Tree("big").Size(); got < int64(n) {
		t.Fatalf("big holds %d keys, want at least %d", got, n)
	}
	for k, name := range small {
		for v := 0; v < 6; v++ {
			if got, err := view.Get(name, []byte{byte(v)}); err != nil || !bytes.Equal(got, []byte{byte(k)}) {
				t.Fatalf("Get %s %d = %v, %v", name, v, got, err)
			}
		}
	}
}

// TestOfflineRewriteDropsLog: after RewriteSnapshot, the log it holds goes
// with the prune after the next commit, whether that commit comes before a
// reopen or after it; older snapshots kept keep their log.
func TestOfflineRewriteDropsLog(t *testing.T) {
	for _, c := range []struct {
		name      string
		reopen    bool
		keep      int
		wantFirst int64
	}{{"same process", false, 0, 11}, {"after a reopen", true, 0, 11}, {"keep one", false, 1, 6}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: c.keep}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			commit := func(v int) {
				t.Helper()
				if err := db.Set("a", []byte(fmt.Sprintf("k%d", v%4)), []byte(fmt.Sprint(v))); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			for v := 1; v <= 5; v++ {
				commit(v)
			}
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			for v := 6; v <= 10; v++ {
				commit(v)
			}
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c.reopen {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				if db, err = Open(dir, opts); err != nil {
					t.Fatal(err)
				}
			}
			commit(11)
			h := db.LastCommitInfo().Hash()
			if err := db.Close(); err != nil { // waits for the prune
				t.Fatal(err)
			}
			checkLogRange(t, dir, c.wantFirst, 11)
			db, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if db.Version() != 11 || !bytes.Equal(db.LastCommitInfo().Hash(), h) {
				t.Fatalf("reopened at %d with another hash", db.Version())
			}
			if c.keep > 0 {
				v, err := db.ViewAt(7)
				if err != nil {
					t.Fatalf("version 7 from the kept snapshot 5 and the log: %v", err)
				}
				v.Release()
			}
		})
	}
}

// checkLogRange fails the test unless the closed database in dir logs
// exactly the versions first..last.
func checkLogRange(t *testing.T, dir string, first, last int64) {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	f, la := l.FirstVersion(), l.LastVersion()
	l.Close()
	if f != first || la != last {
		t.Fatalf("log holds %d..%d, want %d..%d", f, la, first, last)
	}
}

// TestInitialVersionChangedBeforeFirstCommit: SetInitialVersion after
// writes to the first version, raising or lowering the initial version the
// database was created with, commits the writes at the new one, and the
// log's replay (a reopen, a read-only open) agrees.
func TestInitialVersionChangedBeforeFirstCommit(t *testing.T) {
	for _, iv := range []int64{0, 1, 50, 200} {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, InitialVersion: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := db.SetInitialVersion(iv); err != nil {
			t.Fatal(err)
		}
		if err := db.Set("b", []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if want := max(iv, 1); info.Version != want {
			t.Fatalf("initial version %d: first commit at %d", iv, info.Version)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, opts := range []Options{{}, {ReadOnly: true}} {
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("initial version %d: reopen: %v", iv, err)
			}
			if db.Version() != info.Version || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
				t.Fatalf("initial version %d: reopened at %d with another hash", iv, db.Version())
			}
			if v, err := db.Get("b", []byte("k")); err != nil || string(v) != "v" {
				t.Fatalf("initial version %d: Get after reopen: %q %v", iv, v, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUpgradesInSeveralCalls: a version's store upgrades given in several
// ApplyUpgrades calls are logged as one set, so a call is accepted only
// when that set replays to the same stores with the same pairs; every
// accepted sequence reopens (replays) to what was committed.
// A change set without pairs changes nothing: store upgrades may still
// follow it, it leaves the app hash alone, and a re-commit of the version
// need not repeat it.
func TestEmptyChangeSetIsNoChange(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set("a", []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a"}, {Name: "b", Pairs: []wal.KVPair{}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"c"}}); err != nil {
		t.Fatalf("upgrades after an empty change set: %v", err)
	}
	pair := wal.KVPair{Key: []byte("k"), Value: []byte("v2")}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a"}, {Name: "c", Pairs: []wal.KVPair{pair}}}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// version 2 again, without the empty change sets
	db, err = Open(dir, Options{TargetVersion: 1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"c"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "c", Pairs: []wal.KVPair{pair}}}); err != nil {
		t.Fatal(err)
	}
	info2, err := db.Commit()
	if err != nil {
		t.Fatalf("re-commit without the empty change sets: %v", err)
	}
	if !bytes.Equal(info.Hash(), info2.Hash()) || info2.Version != 2 {
		t.Fatal("the re-commit gave another app hash")
	}
}

func TestUpgradesInSeveralCalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []wal.Upgrades
		ok    bool
	}{
		{"two additions", []wal.Upgrades{{Added: []string{"x"}}, {Added: []string{"y"}}}, true},
		{"rename, then add the old name", []wal.Upgrades{{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "c"}}}, {Added: []string{"a"}}}, true},
		{"delete, then add again", []wal.Upgrades{{Deleted: []string{"a"}}, {Added: []string{"a"}}}, true},
		{"rename twice", []wal.Upgrades{{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "c"}}}, {Renamed: []wal.RenamedStore{{OldName: "c", NewName: "d"}}}}, true},
		{"add, then rename it", []wal.Upgrades{{Added: []string{"x"}}, {Renamed: []wal.RenamedStore{{OldName: "x", NewName: "y"}}}}, false},
		{"add, then delete it", []wal.Upgrades{{Added: []string{"x"}}, {Deleted: []string{"x"}}}, false},
		{"rename, then delete the new name", []wal.Upgrades{{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "c"}}}, {Deleted: []string{"c"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { db.Close() }() // the database reopened at the end
			if err := db.Set("a", []byte("k"), []byte("a's")); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := db.ApplyUpgrades(tc.calls[0]); err != nil {
				t.Fatal(err)
			}
			before := fmt.Sprint(db.StoreNames())
			err = db.ApplyUpgrades(tc.calls[1])
			if !tc.ok {
				if !errors.Is(err, ErrConflict) {
					t.Fatalf("second call: %v", err)
				}
				if after := fmt.Sprint(db.StoreNames()); after != before {
					t.Fatalf("the refused call changed the stores: %s, then %s", before, after)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			info, err := db.Commit()
			if err != nil {
				t.Fatal(err)
			}
			stores := fmt.Sprint(db.StoreNames())
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, Options{})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			if !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) || fmt.Sprint(db.StoreNames()) != stores {
				t.Fatalf("reopened with stores %v and another hash, committed %s", db.StoreNames(), stores)
			}
		})
	}
}

// TestLongStoreNames: the longest store name allowed (119 bytes, which is
// not a plain name, so its tree directory is named in hex) goes through a
// snapshot rewrite and a reopen; a longer one, whose directory's temporary
// name would not fit a file system's 255 bytes, is refused up front.
func TestLongStoreNames(t *testing.T) {
	long := strings.Repeat("é", 59) + "a" // 119 bytes
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }() // the database open at the end
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{long + "x"}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("a 120-byte store name: %v", err)
	}
	if _, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{long + "x"}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("a 120-byte initial store name: %v", err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{long}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Set(long, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	info := commitAndRewrite(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{OpenCheck: OpenCheckSync})
	if err != nil {
		t.Fatal(err)
	}
	if db.SnapshotVersion() != info.Version || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
		t.Fatalf("reopened at snapshot %d with another hash", db.SnapshotVersion())
	}
}

// An import into a directory without a database removes what a failed
// import left in the staging directory beside it, but not while another
// import holds the staging directory's lock.
func TestImportLeavesStagingInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	staging := dir + stagingSuffix
	if err := os.MkdirAll(filepath.Join(staging, "snapshot-00000000000000000007.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := lockDir(staging)
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewImporter(dir, 3, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(staging, "snapshot-00000000000000000007.tmp")); err != nil {
		t.Fatalf("the staging directory in use was removed: %v", err)
	}
	_ = unlockDir(lock)
	im, err = NewImporter(dir, 3, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Fatalf("the staging directory left by a failed import stays: %v", err)
	}
}

// TestReleasedViewReads: Get and Tree through a released View give
// ErrReleased and nil, although the database's working state still holds
// the same snapshots (a tree handed out then would read them after they are
// unmapped); a Pin of the view makes them readable again until its Unpin.
func TestReleasedViewReads(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Set("a", []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	view.Release()
	if got, err := view.Get("a", []byte("k")); !errors.Is(err, ErrReleased) {
		t.Errorf("Get after Release = %q, %v; want ErrReleased", got, err)
	}
	if tr := view.Tree("a"); tr != nil {
		t.Errorf("Tree after Release is not nil")
	}
	if !view.Pin() {
		t.Fatal("Pin after Release failed while the database holds the snapshots")
	}
	if got, err := view.Get("a", []byte("k")); err != nil || string(got) != "v1" {
		t.Errorf("Get while pinned = %q, %v; want v1", got, err)
	}
	if view.Tree("a") == nil {
		t.Errorf("Tree while pinned is nil")
	}
	view.Unpin()
	if _, err := view.Get("a", []byte("k")); !errors.Is(err, ErrReleased) {
		t.Errorf("Get after Unpin: %v; want ErrReleased", err)
	}
}

// TestLastVersion: a database at version math.MaxInt64 refuses changes,
// upgrades and the next Commit with ErrVersion, before it changes
// anything, and keeps serving and reopening at that version.
func TestLastVersion(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil || info.Version != math.MaxInt64 {
		t.Fatalf("Commit: %v, %v", info, err)
	}
	if err := db.Set("a", []byte("k2"), []byte("v2")); !errors.Is(err, ErrVersion) {
		t.Fatalf("Set after the last version: %v; want ErrVersion", err)
	}
	if err := db.Delete("a", []byte("k")); !errors.Is(err, ErrVersion) {
		t.Fatalf("Delete after the last version: %v; want ErrVersion", err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}); !errors.Is(err, ErrVersion) {
		t.Fatalf("ApplyUpgrades after the last version: %v; want ErrVersion", err)
	}
	if _, err := db.Commit(); !errors.Is(err, ErrVersion) {
		t.Fatalf("Commit after the last version: %v; want ErrVersion", err)
	}
	if v, err := db.Get("a", []byte("k")); err != nil || string(v) != "v" || db.Version() != math.MaxInt64 {
		t.Fatalf("after the refused Commit: %q, %v at %d", v, err, db.Version())
	}
	if w := db.WorkingVersion(); w != 0 {
		t.Fatalf("working version %d after the last version, want 0 (none)", w)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db.Version() != 0 || db.WorkingVersion() != 0 {
		t.Fatalf("after Close: version %d, working version %d; want 0 and 0", db.Version(), db.WorkingVersion())
	}
	if db, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if db.Version() != math.MaxInt64 || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
		t.Fatalf("reopened at %d", db.Version())
	}
}

// TestTreeAfterUnmap reads a tree and iterators taken from a view after the
// view is released and its snapshot unmapped, which the documentation
// calls invalid: every read must fail with an error wrapping
// snapshot.ErrClosed instead of panicking or reading freed memory.
func TestTreeAfterUnmap(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if err := db.Set("a", []byte(fmt.Sprintf("k%04d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	commitAndRewrite(t, db)
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	tr := view.Tree("a")
	it := tr.Iterator(nil, nil, true) // positioned in the snapshot's leaves
	if !it.Valid() {
		t.Fatal("empty iterator")
	}
	view.Release()
	if err := db.Close(); err != nil { // unmaps the snapshot, which nothing pins
		t.Fatal(err)
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, snapshot.ErrClosed) || errors.Is(err, memiavl.ErrCorrupt) {
			t.Errorf("%s after the unmap: %v, want snapshot.ErrClosed", what, err)
		}
	}
	_, err = tr.Get([]byte("k0100"))
	closed("Get", err)
	_, err = tr.Has([]byte("k0100"))
	closed("Has", err)
	_, err = tr.Copy().Get([]byte("k0200"))
	closed("Get of a copy", err)
	_, err = tr.GetMembershipProof([]byte("k0100"))
	closed("GetMembershipProof", err)
	for n := 0; it.Valid(); n++ {
		if n > 300 {
			t.Fatal("the iterator did not stop")
		}
		it.Next()
	}
	closed("an iterator's Next", it.Error())
	it2 := tr.Iterator([]byte("k0150"), nil, false)
	if it2.Valid() {
		t.Error("a new iterator is valid")
	}
	closed("a new iterator", it2.Error())
	_, err = tr.Export().Next()
	closed("an export", err)
}

// TestOpenFailureKinds: a snapshot file that cannot be opened for want of
// permission or descriptors is not reported as damage; a missing or
// unreadable one is.
func TestOpenFailureKinds(t *testing.T) {
	for _, c := range []struct {
		errno   syscall.Errno
		corrupt bool
	}{{syscall.EACCES, false}, {syscall.EPERM, false}, {syscall.EMFILE, false}, {syscall.ENOMEM, false}, {syscall.ENOENT, true}, {syscall.EIO, true}} {
		err := openFailure(fmt.Errorf("store %q: %w", "a", &os.PathError{Op: "open", Path: "kvs", Err: c.errno}))
		if errors.Is(err, ErrCorrupt) != c.corrupt || !errors.Is(err, c.errno) {
			t.Errorf("%v: %v (corrupt %v, want %v)", c.errno, err, errors.Is(err, ErrCorrupt), c.corrupt)
		}
	}
	t.Run("unreadable file", testOpenUnreadable)
}

// testOpenUnreadable opens a database with a snapshot file it may not
// read, where permissions apply.
func testOpenUnreadable(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	kvs := filepath.Join(dir, snapshotDirName(0), treeDirName("a"), "kvs")
	if err := os.Chmod(kvs, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(kvs, 0o644)
	if f, err := os.Open(kvs); err == nil {
		f.Close()
		t.Skip("permissions do not apply (running as root)")
	}
	if _, err := Open(dir, Options{ReadOnly: true}); err == nil || errors.Is(err, ErrCorrupt) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("open with an unreadable snapshot file: %v, want a permission error, not ErrCorrupt", err)
	}
}

// TestSnapshotDirThroughLink: a snapshot directory moved to another place
// and linked back under its name is a snapshot like the others: Verify,
// read-only and writable opens and historical views read through the link,
// and a prune removes the link (what it names is the owner's).
func TestSnapshotDirThroughLink(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	var hashes [][]byte
	for v := 1; v <= 6; v++ {
		if err := db.Set("a", []byte(fmt.Sprintf("k%d", v)), []byte("v")); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, info.Hash())
		if v == 3 || v == 5 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	for _, v := range []int64{3, 5} {
		name := snapshotDirName(v)
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(elsewhere, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(elsewhere, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("Verify through linked snapshots: %v", err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(3); v <= 6; v++ {
		view, err := ro.ViewAt(v)
		if err != nil {
			t.Fatalf("view of %d: %v", v, err)
		}
		if !bytes.Equal(view.CommitInfo().Hash(), hashes[v-1]) {
			t.Fatalf("view of %d: another app hash", v)
		}
		view.Release()
	}
	ro.Close()
	db, err = Open(dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil { // of 6: the others go
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // joins the prune
		t.Fatal(err)
	}
	for _, v := range []int64{3, 5} {
		if _, err := os.Lstat(filepath.Join(dir, snapshotDirName(v))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the link of the pruned snapshot %d: %v", v, err)
		}
	}
}
