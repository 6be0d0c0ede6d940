package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestMisuseChangesNothing drives two databases with the same random valid
// changes and upgrades, and the first one also with invalid calls (nil
// keys and values, unknown stores, a bad pair among good ones, upgrades
// that name missing or existing stores, upgrades after changes, a rewrite
// with uncommitted changes): each invalid call must fail, with a sentinel
// error where there is one, and change nothing, so that both databases
// commit the same app hash every version; no call may panic.
func TestMisuseChangesNothing(t *testing.T) {
	r := testutil.Rand(t)
	open := func() *DB {
		db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 7})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	stores := []string{"a", "b"}
	next := 0 // for new store names
	both := func(f func(*DB) error) {
		t.Helper()
		if err := f(a); err != nil {
			t.Fatal(err)
		}
		if err := f(b); err != nil {
			t.Fatal(err)
		}
	}
	bad := func(what string, want error, err error) {
		t.Helper()
		if err == nil || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("%s: %v, want an error matching %v", what, err, want)
		}
	}
	key := func() []byte { return []byte(fmt.Sprintf("k%03d", r.Intn(200))) }
	versions := 60
	if testing.Short() {
		versions = 25
	}
	for v := 0; v < versions; v++ {
		// upgrades come first in a version
		if r.Intn(6) == 0 {
			var u wal.Upgrades
			switch r.Intn(3) {
			case 0:
				next++
				u.Added = []string{fmt.Sprintf("n%d", next)}
			case 1:
				if len(stores) > 1 {
					next++
					u.Renamed = []wal.RenamedStore{{OldName: stores[len(stores)-1], NewName: fmt.Sprintf("n%d", next)}}
				}
			case 2:
				if len(stores) > 1 {
					u.Deleted = []string{stores[len(stores)-1]}
				}
			}
			// invalid upgrades first, to a only
			misuseUpgrades(t, a, stores, bad)
			both(func(db *DB) error { return db.ApplyUpgrades(u) })
			stores = applyToNames(stores, u)
		}
		changed := false // the version has a change, so upgrades must fail
		for i := 0; i < 20; i++ {
			s := stores[r.Intn(len(stores))]
			k := key()
			switch r.Intn(8) {
			case 0:
				both(func(db *DB) error { return db.Delete(s, k) })
				changed = true
			case 1:
				bad("Set of a nil key", memiavl.ErrNilKey, a.Set(s, nil, []byte("v")))
			case 2:
				bad("Set of a nil value", memiavl.ErrNilValue, a.Set(s, k, nil))
			case 3:
				bad("Set in an unknown store", ErrUnknownStore, a.Set("nope", k, []byte("v")))
			case 4:
				good := wal.ChangeSet{Name: s, Pairs: []wal.KVPair{{Key: k, Value: []byte("batch")}}}
				bad("a change set of an unknown store among good ones", ErrUnknownStore,
					a.ApplyChangeSets([]wal.ChangeSet{good, {Name: "nope", Pairs: good.Pairs}}))
				badPair := wal.ChangeSet{Name: s, Pairs: []wal.KVPair{{Key: k, Value: []byte("x")}, {Key: nil, Value: []byte("y")}}}
				bad("a nil key among good pairs", memiavl.ErrNilKey, a.ApplyChangeSets([]wal.ChangeSet{good, badPair}))
				if changed {
					bad("upgrades after changes", ErrUncommitted, a.ApplyUpgrades(wal.Upgrades{Added: []string{"late"}}))
				}
				both(func(db *DB) error { return db.ApplyChangeSets([]wal.ChangeSet{good}) })
				changed = true
			default:
				val := []byte(fmt.Sprintf("v%d-%d", v, i))
				both(func(db *DB) error { return db.Set(s, k, val) })
				changed = true
			}
		}
		if r.Intn(4) == 0 {
			bad("RewriteSnapshot with uncommitted changes", ErrUncommitted, a.RewriteSnapshot(context.Background()))
		}
		ia, err := a.Commit()
		if err != nil {
			t.Fatal(err)
		}
		ib, err := b.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ia.Hash(), ib.Hash()) || ia.Version != ib.Version {
			t.Fatalf("version %d: app hash %X after misuse, %X without", ia.Version, ia.Hash(), ib.Hash())
		}
	}
}

// misuseUpgrades tries upgrades that must fail on db, whose stores are
// stores.
func misuseUpgrades(t *testing.T, db *DB, stores []string, bad func(string, error, error)) {
	t.Helper()
	last := stores[len(stores)-1]
	for _, u := range []wal.Upgrades{
		{Added: []string{last}},
		{Added: []string{""}},
		{Renamed: []wal.RenamedStore{{OldName: "missing", NewName: "x"}}},
		{Renamed: []wal.RenamedStore{{OldName: last, NewName: stores[0]}}},
		{Deleted: []string{"missing"}},
		{Added: []string{"dup", "dup"}},
	} {
		if len(stores) == 1 && len(u.Renamed) == 1 && u.Renamed[0].OldName == last {
			continue // renaming the only store onto itself
		}
		bad(fmt.Sprintf("upgrade %+v", u), nil, db.ApplyUpgrades(u))
	}
}

// applyToNames returns stores after upgrade u, last-added last.
func applyToNames(stores []string, u wal.Upgrades) []string {
	out := append([]string(nil), stores...)
	for _, d := range u.Deleted {
		for i, s := range out {
			if s == d {
				out = append(out[:i], out[i+1:]...)
				break
			}
		}
	}
	for _, rn := range u.Renamed {
		for i, s := range out {
			if s == rn.OldName {
				out[i] = rn.NewName
			}
		}
	}
	return append(out, u.Added...)
}

// TestOptionsAtTheirBounds: an asynchronous queue too long to allocate is
// refused; a rewrite concurrency far beyond the trees and processors
// writes the snapshot (it used to start that many goroutines).
func TestOptionsAtTheirBounds(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{CreateIfMissing: true, AsyncCommitBuffer: 1 << 40}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("AsyncCommitBuffer 1<<40: %v", err)
	}
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, RewriteConcurrency: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 3; i++ {
		if err := db.Set("a", []byte{byte(i)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if db.SnapshotVersion() != 3 {
		t.Fatalf("snapshot %d", db.SnapshotVersion())
	}
}

// TestFailedCreateLeavesNothing: the options an open with CreateIfMissing
// cannot honour (an invalid log segment size, a TargetVersion of a
// database not created yet) are refused before it creates anything.
func TestFailedCreateLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "db")
	if _, err := Open(dir, Options{CreateIfMissing: true, WALSegmentSize: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("WALSegmentSize 1: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed open left %s: %v", dir, err)
	}
	existing := t.TempDir()
	if _, err := Open(existing, Options{CreateIfMissing: true, WALSegmentSize: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("WALSegmentSize 1: %v", err)
	}
	if _, err := Open(existing, Options{CreateIfMissing: true, TargetVersion: 5}); !errors.Is(err, ErrVersion) {
		t.Fatalf("TargetVersion of a new database: %v", err)
	}
	if ents, _ := os.ReadDir(existing); len(ents) > 1 || len(ents) == 1 && ents[0].Name() != lockFileName {
		t.Fatalf("the failed opens left %v", ents)
	}
	if _, err := Open(existing, Options{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a database is left: %v", err)
	}
}

// TestRewriteSnapshotCancelledContext: a context cancelled before the call
// writes nothing.
func TestRewriteSnapshotCancelledContext(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitN(t, db, 1, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.RewriteSnapshot(ctx); !errors.Is(err, context.Canceled) || db.SnapshotVersion() != 0 {
		t.Fatalf("RewriteSnapshot with a cancelled context: %v, snapshot %d", err, db.SnapshotVersion())
	}
}

// TestRewriteSnapshotBesidePendingChanges: changes applied on another
// goroutine while RewriteSnapshot waits for a background rewrite make it
// refuse (ErrUncommitted) without switching to the finished rewrite, whose
// trees would then be compared with working trees holding those changes:
// the next Commit switches to it, with no error.
func TestRewriteSnapshotBesidePendingChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(db *DB) error
	}{
		{"set", func(db *DB) error { return db.Set("a", []byte("k"), []byte("v2")) }},
		{"upgrade", func(db *DB) error { return db.ApplyUpgrades(wal.Upgrades{Added: []string{"c"}}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			release := make(chan struct{})
			db.afterWrite = func(ctx context.Context, v int64) {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			if err := db.Set("a", []byte("k"), []byte("v1")); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Commit(); err != nil { // starts the rewrite of version 1
				t.Fatal(err)
			}
			waiting := make(chan struct{})
			var once sync.Once
			db.rewriteWait = func() { once.Do(func() { close(waiting) }) }
			done := make(chan error, 1)
			go func() { done <- db.RewriteSnapshot(context.Background()) }()
			<-waiting // RewriteSnapshot waits for the rewrite, without the lock
			if err := tc.change(db); err != nil {
				t.Fatal(err)
			}
			close(release)
			if err := <-done; !errors.Is(err, ErrUncommitted) {
				t.Fatalf("RewriteSnapshot with changes applied while it waited: %v", err)
			}
			if _, err := db.Commit(); err != nil {
				t.Fatalf("commit after it: %v", err)
			}
			if db.SnapshotVersion() != 1 {
				t.Fatalf("snapshot %d, want the rewrite of version 1", db.SnapshotVersion())
			}
		})
	}
}

// TestRewriteSnapshotWaitEndsWithContext: a RewriteSnapshot waiting for a
// background rewrite (held here until more versions are committed) returns
// when its context ends, writes nothing, and leaves the database working.
func TestRewriteSnapshotWaitEndsWithContext(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	DelayRewrites(db, 3)
	commitN(t, db, 1, 2) // the rewrite of version 2 starts and waits for version 5
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- db.RewriteSnapshot(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || db.SnapshotVersion() != 0 {
			t.Fatalf("RewriteSnapshot while a rewrite waits: %v, snapshot %d", err, db.SnapshotVersion())
		}
	case <-time.After(time.Minute):
		t.Fatal("RewriteSnapshot still waits a minute after its context ended")
	}
	commitN(t, db, 3, 3) // to version 5, which the rewrite of version 2 waits for
	waitRewrite(db)
	commitN(t, db, 3, 3) // to version 8; the first of them switches
	if db.Version() != 8 || db.SnapshotVersion() < 2 {
		t.Fatalf("version %d, snapshot %d", db.Version(), db.SnapshotVersion())
	}
}

// TestEmptyDirPath: every call that takes a database directory refuses an
// empty path with ErrInvalidOptions and creates nothing, in the working
// directory or anywhere else.
func TestEmptyDirPath(t *testing.T) {
	wd := t.TempDir()
	defer testutil.Chdir(t, wd)()
	calls := map[string]func() error{
		"Open": func() error {
			_, err := Open("", Options{CreateIfMissing: true, InitialStores: []string{"a"}})
			return err
		},
		"Open read-only": func() error { _, err := Open("", Options{ReadOnly: true}); return err },
		"Import": func() error {
			_, err := Import("", 1, map[string]NodeSource{}, ImportOptions{Stores: []string{"a"}})
			return err
		},
		"NewImporter":        func() error { _, err := NewImporter("", 1, ImportOptions{}); return err },
		"RemoveDatabase":     func() error { return RemoveDatabase("") },
		"Verify":             func() error { _, err := Verify(""); return err },
		"LatestVersion":      func() error { _, err := LatestVersion(""); return err },
		"UnfinishedRollback": func() error { _, err := UnfinishedRollback(""); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s(\"\"): %v; want ErrInvalidOptions", name, err)
		}
	}
	if entries, err := os.ReadDir(wd); err != nil || len(entries) != 0 {
		t.Fatalf("the working directory holds %v (%v) after the refused calls", entries, err)
	}
}

// TestWorkingTreeReadsOnly: the working tree a DB hands out reads the
// working version's changes as they are made, and has no write methods:
// a change that went around the DB would be committed in the app hash but
// not logged, and lost at the next open.
func TestWorkingTreeReadsOnly(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := db.WorkingTree("a")
	if r == nil || db.WorkingTree("b") != nil {
		t.Fatalf("WorkingTree: %v for a store, %v for none", r, db.WorkingTree("b"))
	}
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get([]byte("k")); err != nil || string(v) != "v" || r.Size() != 1 || r.WorkingVersion() != 1 {
		t.Fatalf("the reader after a Set: %q, %v, size %d, working version %d", v, err, r.Size(), r.WorkingVersion())
	}
	if !bytes.Equal(r.RootHash(), db.WorkingCommitInfo().StoreInfos[0].CommitId.Hash) {
		t.Fatal("the reader's root hash is not the working commit info's")
	}
	type setter interface {
		Set(key, value []byte) (bool, error)
	}
	type remover interface {
		Remove(key []byte) (bool, error)
	}
	if _, ok := r.(setter); ok {
		t.Error("the working tree reader has a Set method")
	}
	if _, ok := r.(remover); ok {
		t.Error("the working tree reader has a Remove method")
	}
	if _, ok := r.(*memiavl.Tree); ok {
		t.Error("the working tree reader is the tree itself")
	}
}

// TestRewriteSnapshotBesideCommit: RewriteSnapshot called on another
// goroutine while Commit starts and switches background rewrites (interval
// 2) waits for them instead of writing its snapshot beside one of them:
// every call succeeds (or refuses uncommitted changes), every version
// reads back its own values, and the database reopens at the last version
// with sound files.
func TestRewriteSnapshotBesideCommit(t *testing.T) {
	dir := t.TempDir()
	stores := []string{"a", "b", "c"}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 2, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		rewrites  atomic.Int64
		rewriteMu sync.Mutex
		rewriteEs []error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			err := db.RewriteSnapshot(context.Background())
			if err != nil && !errors.Is(err, ErrUncommitted) {
				rewriteMu.Lock()
				rewriteEs = append(rewriteEs, err)
				rewriteMu.Unlock()
				return
			}
			if err == nil {
				rewrites.Add(1)
			}
		}
	}()
	// a failure below stops the rewrites before the database closes
	t.Cleanup(func() {
		stop.Store(true)
		wg.Wait()
		db.Close()
	})
	const versions = 120
	for v := 1; v <= versions; v++ {
		var css []wal.ChangeSet
		for _, s := range stores {
			cs := wal.ChangeSet{Name: s}
			for k := 0; k < 40; k++ {
				key := []byte(fmt.Sprintf("k%02d", k))
				if (k+v)%7 == 0 {
					cs.Pairs = append(cs.Pairs, wal.KVPair{Key: key, Delete: true})
				} else {
					cs.Pairs = append(cs.Pairs, wal.KVPair{Key: key, Value: []byte(fmt.Sprintf("%s:%d", s, v))})
				}
			}
			css = append(css, cs)
		}
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
		view, err := db.View()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stores {
			for k := 0; k < 40; k++ {
				got, err := view.Get(s, []byte(fmt.Sprintf("k%02d", k)))
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("%s:%d", s, v)
				if (k+v)%7 == 0 {
					want = ""
				}
				if string(got) != want {
					t.Fatalf("version %d %s/k%02d: %q, want %q", v, s, k, got, want)
				}
			}
		}
		view.Release()
	}
	stop.Store(true)
	wg.Wait()
	if len(rewriteEs) > 0 {
		t.Fatalf("RewriteSnapshot: %v", errors.Join(rewriteEs...))
	}
	if rewrites.Load() == 0 {
		t.Fatal("no RewriteSnapshot call succeeded beside the commits")
	}
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatalf("close after %d rewrites: %v", rewrites.Load(), err)
	}
	db, err = Open(dir, Options{OpenCheck: OpenCheckSync})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != versions || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("reopened at version %d, app hash %X, want %d %X", db.Version(), db.LastCommitInfo().Hash(), versions, want)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}
