package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

func edgeOpen(t *testing.T, dir string, opts Options) *DB {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func edgeCommit(t *testing.T, db *DB, store string, kv ...string) []byte {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := db.Set(store, []byte(kv[i]), []byte(kv[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return info.Hash()
}

func edgeNoPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// TestEdgeVersionsAtTheInt64Limit: a database whose initial version is
// close to math.MaxInt64 commits up to the last version, rewrites its
// snapshot (in the background and synchronously) and reopens at the
// latest version with the same app hash.
func TestEdgeVersionsAtTheInt64Limit(t *testing.T) {
	for _, interval := range []int64{1, -1} {
		t.Run(fmt.Sprint("interval", interval), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: math.MaxInt64 - 2, SnapshotInterval: interval})
			if err != nil {
				t.Fatal(err)
			}
			var last []byte
			edgeNoPanic(t, "commits", func() {
				for i := 0; i < 3; i++ {
					last = edgeCommit(t, db, "a", fmt.Sprint("k", i), "v")
				}
			})
			if db.Version() != math.MaxInt64 {
				t.Fatalf("version %d", db.Version())
			}
			edgeNoPanic(t, "RewriteSnapshot", func() {
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Errorf("RewriteSnapshot: %v", err)
				}
			})
			if err := db.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			edgeNoPanic(t, "reopen", func() {
				db2, err := Open(dir, Options{})
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer db2.Close()
				if db2.Version() != math.MaxInt64 || !bytes.Equal(db2.LastCommitInfo().Hash(), last) {
					t.Fatalf("reopened at %d", db2.Version())
				}
				v, err := db2.ViewAt(math.MaxInt64 - 1)
				if err != nil {
					t.Logf("ViewAt(max-1): %v", err)
				} else {
					v.Release()
				}
			})
		})
	}
}

// TestEdgeDeleteAndAddSameStore: deleting a store and adding one of the
// same name in one upgrade gives an empty store, before and after a
// reopen and across a background rewrite.
func TestEdgeDeleteAndAddSameStore(t *testing.T) {
	dir := t.TempDir()
	db := edgeOpen(t, dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 2})
	edgeCommit(t, db, "a", "k1", "v1", "k2", "v2")
	edgeCommit(t, db, "b", "k1", "v1")
	if err := db.ApplyUpgrades(wal.Upgrades{Deleted: []string{"a"}, Added: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get("a", []byte("k1")); err != nil || v != nil {
		t.Fatalf("a/k1 after delete+add: %q %v", v, err)
	}
	edgeCommit(t, db, "a", "k3", "v3")
	want := edgeCommit(t, db, "b", "k9", "v9")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := edgeOpen(t, dir, Options{})
	if !bytes.Equal(db2.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened hash differs")
	}
	if v, _ := db2.Get("a", []byte("k1")); v != nil {
		t.Fatalf("a/k1 came back: %q", v)
	}
}

// TestEdgeTargetVersionBeforeFirst: opening at a TargetVersion before
// the database's first version fails with ErrVersion, also with Rollback,
// and changes nothing.
func TestEdgeTargetVersionBeforeFirst(t *testing.T) {
	dir := t.TempDir()
	db := edgeOpen(t, dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: 100})
	var want []byte
	for i := 0; i < 3; i++ {
		want = edgeCommit(t, db, "a", fmt.Sprint("k", i), "v")
	}
	db.Close()
	for _, opts := range []Options{{TargetVersion: 50}, {TargetVersion: 50, ReadOnly: true}, {TargetVersion: 50, Rollback: true}, {TargetVersion: 1, Rollback: true}} {
		edgeNoPanic(t, fmt.Sprintf("%+v", opts), func() {
			d, err := Open(dir, opts)
			if err == nil {
				t.Errorf("%+v: opened at %d", opts, d.Version())
				d.Close()
			} else if !errors.Is(err, ErrVersion) {
				t.Errorf("%+v: %v, want ErrVersion", opts, err)
			}
		})
	}
	db2 := edgeOpen(t, dir, Options{})
	if db2.Version() != 102 || !bytes.Equal(db2.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened at %d", db2.Version())
	}
}

// TestEdgeViewAtExtremes: ViewAt of extreme versions fails cleanly.
func TestEdgeViewAtExtremes(t *testing.T) {
	db := edgeOpen(t, t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: 10})
	for i := 0; i < 3; i++ {
		edgeCommit(t, db, "a", fmt.Sprint("k", i), "v")
	}
	for _, v := range []int64{math.MinInt64, -1, 1, 9, 13, math.MaxInt64} {
		edgeNoPanic(t, fmt.Sprint("ViewAt ", v), func() {
			vw, err := db.ViewAt(v)
			if err == nil {
				t.Errorf("ViewAt(%d) gave version %d", v, vw.Version())
				vw.Release()
			} else if !errors.Is(err, ErrVersion) {
				t.Errorf("ViewAt(%d): %v", v, err)
			}
		})
	}
}

// TestEdgeCloseBesideReaders: Close while views are taken, read and
// released on other goroutines neither panics nor fails the reads with
// anything but ErrClosed.
func TestEdgeCloseBesideReaders(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 2, SnapshotKeepRecent: 10, ViewCacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		edgeCommit(t, db, "a", fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs <- fmt.Errorf("panic: %v", r)
				}
			}()
			for i := 0; i < 200; i++ {
				v, err := db.ViewAt(int64(1 + (i+g)%6))
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						errs <- err
					}
					return
				}
				if _, err := v.Get("a", []byte("k0")); err != nil {
					errs <- err
				}
				v.Release()
				v.Release()
			}
		}(g)
	}
	db.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEdgeClosedAndReadOnlyCalls: every method of a closed database and
// the writes of a read-only one fail cleanly (no panic) with ErrClosed or
// ErrReadOnly.
func TestEdgeClosedAndReadOnlyCalls(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	edgeCommit(t, db, "a", "k", "v")
	edgeCommit(t, db, "a", "k2", "v")
	ro := edgeOpen(t, dir, Options{ReadOnly: true})
	edgeNoPanic(t, "read-only writes", func() {
		for name, err := range map[string]error{
			"Set":               ro.Set("a", []byte("k"), []byte("w")),
			"Delete":            ro.Delete("a", []byte("k")),
			"ApplyChangeSets":   ro.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: []byte("x"), Value: []byte("y")}}}}),
			"ApplyUpgrades":     ro.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}),
			"RewriteSnapshot":   ro.RewriteSnapshot(context.Background()),
			"SetInitialVersion": ro.SetInitialVersion(5),
		} {
			if !errors.Is(err, ErrReadOnly) {
				t.Errorf("read-only %s: %v", name, err)
			}
		}
		if _, err := ro.Commit(); !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only Commit: %v", err)
		}
		if v, err := ro.ViewAt(1); err != nil {
			t.Errorf("read-only ViewAt(1): %v", err)
		} else {
			v.Release()
		}
		if names, err := ro.StoreNamesAt(1); err != nil || len(names) != 1 {
			t.Errorf("read-only StoreNamesAt(1): %v %v", names, err)
		}
		if err := ro.VerifySnapshot(); err != nil {
			t.Errorf("read-only VerifySnapshot: %v", err)
		}
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	edgeNoPanic(t, "closed calls", func() {
		if _, err := db.StoreNamesAt(1); !errors.Is(err, ErrClosed) {
			t.Errorf("StoreNamesAt: %v", err)
		}
		if _, err := db.StoreNamesAt(5); !errors.Is(err, ErrClosed) {
			t.Errorf("StoreNamesAt(5): %v", err)
		}
		if err := db.VerifySnapshot(); !errors.Is(err, ErrClosed) {
			t.Errorf("VerifySnapshot: %v", err)
		}
		_ = db.WaitOpenCheck(context.Background())
		db.LogTornTail()
		if db.LastCommitInfo() != nil || db.Version() != 0 || db.WorkingVersion() != 0 {
			t.Errorf("closed database reports a version")
		}
		if err := db.ApplyChangeSets(nil); !errors.Is(err, ErrClosed) {
			t.Errorf("ApplyChangeSets(nil): %v", err)
		}
	})
}

// TestEdgeOddStoreNames: store names that are path elements ("." and
// ".."), hold a separator, are not UTF-8 or differ only in case are
// distinct stores through commits, a rename, a rewrite, a reopen and a
// historical view.
func TestEdgeOddStoreNames(t *testing.T) {
	names := []string{".", "..", "a/b", "/", "\xff\xfe", "A", "a", "s-a", "x-61", " "}
	dir := t.TempDir()
	db := edgeOpen(t, dir, Options{CreateIfMissing: true, InitialStores: names, SnapshotInterval: 2, SnapshotKeepRecent: 100})
	for i, n := range names {
		edgeCommit(t, db, n, "k", fmt.Sprint("v", i))
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "a/b", NewName: "../c"}}, Deleted: []string{"."}, Added: []string{"./"}}); err != nil {
		t.Fatal(err)
	}
	want := edgeCommit(t, db, "../c", "k2", "v")
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantV := db.Version()
	db.Close()
	db2 := edgeOpen(t, dir, Options{OpenCheck: OpenCheckSync})
	if db2.Version() != wantV || !bytes.Equal(db2.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened at %d with another hash", db2.Version())
	}
	for i, n := range names {
		if n == "." || n == "a/b" {
			continue
		}
		if v, err := db2.Get(n, []byte("k")); err != nil || string(v) != fmt.Sprint("v", i) {
			t.Errorf("store %q: %q %v", n, v, err)
		}
	}
	if v, err := db2.Get("../c", []byte("k")); err != nil || string(v) != "v2" {
		t.Errorf("renamed store: %q %v", v, err)
	}
	vw, err := db2.ViewAt(3)
	if err != nil {
		t.Fatal(err)
	}
	defer vw.Release()
	if v, err := vw.Get("a/b", []byte("k")); err != nil || string(v) != "v2" {
		t.Errorf("view at 3: %q %v", v, err)
	}
	if rep, err := Verify(dir); err != nil {
		t.Errorf("verify: %+v %v", rep, err)
	}
}

// TestEdgeOptionsAtExtremes: the largest values of the options that take
// any (intervals, counts, rates, sizes) open, commit, rewrite and reopen.
func TestEdgeOptionsAtExtremes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: math.MaxInt64,
		SnapshotKeepRecent: math.MaxInt, RewriteRateLimit: math.MaxInt64, WALSegmentSize: math.MaxInt64,
		ViewCacheSize: math.MaxInt, AsyncCommitBuffer: MaxAsyncCommitBuffer, RewriteConcurrency: math.MaxInt}
	edgeNoPanic(t, "extreme options", func() {
		db := edgeOpen(t, dir, opts)
		var want []byte
		for i := 0; i < 4; i++ {
			want = edgeCommit(t, db, "a", fmt.Sprint("k", i), "v")
			if i == 1 {
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		for v := int64(1); v <= 4; v++ {
			vw, err := db.ViewAt(v)
			if err != nil {
				t.Fatalf("ViewAt(%d): %v", v, err)
			}
			vw.Release()
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		opts.CreateIfMissing = false
		opts.SnapshotInterval = 1
		db2 := edgeOpen(t, dir, opts)
		if !bytes.Equal(db2.LastCommitInfo().Hash(), want) {
			t.Fatalf("reopened with another hash")
		}
		edgeCommit(t, db2, "a", "k9", "v")
	})
}

// TestEdgeRewriteNothingToWritePrunes: RewriteSnapshot when the current
// snapshot already holds the last version writes nothing and still prunes
// the older snapshots beyond SnapshotKeepRecent, and the log before the
// oldest kept one, as after a write.
func TestEdgeRewriteNothingToWritePrunes(t *testing.T) {
	dir := t.TempDir()
	db := edgeOpen(t, dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 10})
	var want []byte
	for i := 1; i <= 6; i++ {
		want = edgeCommit(t, db, "a", fmt.Sprint("k", i), "v")
		if i%2 == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := listSnapshots(dir); err != nil || len(got) != 4 {
		t.Fatalf("snapshots %v (%v), want 0, 2, 4 and 6", got, err)
	}
	db = edgeOpen(t, dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // waits for the prune
		t.Fatal(err)
	}
	if got, err := listSnapshots(dir); err != nil || len(got) != 2 || got[0] != 4 || got[1] != 6 {
		t.Fatalf("snapshots %v (%v) after the rewrite with nothing to write, want [4 6]", got, err)
	}
	db = edgeOpen(t, dir, Options{})
	if db.Version() != 6 || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened at %d with another hash", db.Version())
	}
	if v, err := db.ViewAt(5); err != nil {
		t.Fatalf("version 5, after the kept snapshot 4: %v", err)
	} else {
		v.Release()
	}
	if _, err := db.ViewAt(3); err == nil {
		t.Fatal("version 3, before the oldest kept snapshot, still served")
	}
	if rep, err := Verify(dir); err != nil {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestEdgeRewriteSwitchPublishes: a RewriteSnapshot that switches to a
// finished background rewrite and then has nothing to write moves readers
// to the new snapshot at once (views opened after it read the new snapshot),
// not at the next commit.
func TestEdgeRewriteSwitchPublishes(t *testing.T) {
	db := edgeOpen(t, t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 2, SnapshotKeepRecent: 0})
	edgeCommit(t, db, "a", "k1", "v1")
	want := edgeCommit(t, db, "a", "k2", "v2") // starts the rewrite of version 2
	db.mu.Lock()
	job := db.mu.rewrite
	db.mu.Unlock()
	if job == nil {
		t.Fatal("no background rewrite after version 2")
	}
	<-job.done
	snapOf := func() int64 {
		v, err := db.View()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		if s := v.Tree("a").Snapshot(); s != nil {
			return s.Version()
		}
		return -1
	}
	if got := snapOf(); got == 2 {
		t.Fatal("readers on the rewritten snapshot before any switch")
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := snapOf(); got != 2 {
		t.Fatalf("a view after the switch reads the snapshot of version %d, want 2", got)
	}
	if db.SnapshotVersion() != 2 || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("snapshot %d, or another app hash", db.SnapshotVersion())
	}
}
