package multitree

// Readers beside a writer that switches snapshots and prunes: read-only
// opens, historical views and Verify.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// hashLog records the app hash of each version a writer commits, for
// readers on other goroutines.
type hashLog struct {
	mu sync.Mutex
	m  map[int64][]byte
}

// commit commits n versions of crashBlock(1, v) and records their hashes.
func (h *hashLog) commit(t *testing.T, db *DB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v := db.WorkingVersion()
		hash := commitBlock(t, db, crashBlock(1, v))
		h.mu.Lock()
		if h.m == nil {
			h.m = map[int64][]byte{}
		}
		h.m[v] = hash
		h.mu.Unlock()
	}
}

// get returns the hash of version v, nil if not committed yet.
func (h *hashLog) get(v int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[v]
}

// besideWriter opens a writer in a new directory with opts, commits
// versions versions of crashBlock(1, v) recording their hashes, and runs
// read over and over on readers goroutines meanwhile (g is the goroutine's
// number) until the commits are done or read returns false, which it does
// after reporting an error. It returns the directory, with the writer
// closed, and the last version's app hash.
func besideWriter(t *testing.T, opts Options, versions, readers int, read func(db *DB, dir string, g int, hashes *hashLog) bool) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	opts.CreateIfMissing, opts.InitialStores = true, crashStores
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		hashes hashLog
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for g := 0; g < readers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && read(db, dir, g, &hashes) {
			}
		}()
	}
	hashes.commit(t, db, versions)
	stop.Store(true)
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, hashes.get(int64(versions))
}

// openWithSnapshotAt creates a database in dir without background
// rewrites, commits versions 1..v and writes a snapshot at v.
func openWithSnapshotAt(t *testing.T, dir string, v int) *DB {
	t.Helper()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, v)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestReadOnlyOpenBesideSwitch: a read-only open that has read the current
// snapshot's version when the writer switches to a new snapshot and prunes
// the old one, and the log before the new one, starts again from the new
// snapshot instead of failing on the files that are gone.
func TestReadOnlyOpenBesideSwitch(t *testing.T) {
	dir := t.TempDir()
	db := openWithSnapshotAt(t, dir, 10)
	commitN(t, db, 1, 5)

	var seen []int64 // the current version each attempt read
	var last []byte  // the writer's last app hash
	afterReadCurrent = func(d string, cur int64) {
		if d != dir {
			return
		}
		seen = append(seen, cur)
		if len(seen) > 1 {
			return
		}
		// the writer moves on: a snapshot at 18, then a commit and a
		// close, which waits for the prune of the snapshot at 10 and of
		// the log up to 18
		commitN(t, db, 1, 3)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		commitN(t, db, 1, 1)
		last = db.LastCommitInfo().Hash()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { afterReadCurrent = nil }()

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open beside a switch: %v", err)
	}
	defer ro.Close()
	if len(seen) != 2 || seen[0] != 10 || seen[1] != 18 {
		t.Fatalf("attempts read current %v, want [10 18]", seen)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(10))); !os.IsNotExist(err) {
		t.Fatalf("the snapshot at 10 was not pruned: %v", err)
	}
	if ro.Version() != 19 || !bytes.Equal(ro.LastCommitInfo().Hash(), last) {
		t.Fatalf("read-only open at %d, want the writer's 19 and its hash", ro.Version())
	}
}

// TestReadOnlyOpenDamaged: a read-only open of a damaged snapshot fails
// after one attempt when the damage is not a missing file, and after
// besideWriterAttempts when a file is missing and the current snapshot stays
// the same (it could have been a prune racing with the open).
func TestReadOnlyOpenDamaged(t *testing.T) {
	dir := t.TempDir()
	db := openWithSnapshotAt(t, dir, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	attempts := 0
	afterReadCurrent = func(d string, _ int64) {
		if d == dir {
			attempts++
		}
	}
	defer func() { afterReadCurrent = nil }()
	meta := filepath.Join(dir, snapshotDirName(5), metadataFileName)
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(meta, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read-only open of damaged metadata: %v", err)
	}
	if attempts != 1 {
		t.Fatalf("damaged metadata: %d attempts, want 1", attempts)
	}
	attempts = 0
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), meta) {
		t.Fatalf("read-only open without metadata: %v", err)
	}
	if attempts != besideWriterAttempts {
		t.Fatalf("missing metadata: %d attempts, want %d", attempts, besideWriterAttempts)
	}
}

// TestReadOnlyOpensBesideBusyWriter opens the database read-only over and
// over from two goroutines while the writer commits, rewrites a snapshot
// every 5 versions and prunes the old ones: every open succeeds and sees a
// committed version with its hash.
func TestReadOnlyOpensBesideBusyWriter(t *testing.T) {
	versions := 400
	if testing.Short() {
		versions = 150
	}
	var opens, busy atomic.Int64
	dir, last := besideWriter(t, Options{SnapshotInterval: 5}, versions, 2, func(_ *DB, dir string, _ int, hashes *hashLog) bool {
		ro, err := Open(dir, Options{ReadOnly: true})
		if errors.Is(err, ErrBusy) {
			busy.Add(1)
			return true
		}
		if err != nil {
			t.Errorf("read-only open: %v", err)
			return false
		}
		opens.Add(1)
		v, h := ro.Version(), ro.LastCommitInfo().Hash()
		// a version the writer has logged but not yet returned from
		// Commit is not in hashes yet
		if want := hashes.get(v); want != nil && !bytes.Equal(h, want) {
			t.Errorf("read-only open at %d: hash differs", v)
		}
		if err := ro.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		return true
	})
	t.Logf("%d read-only opens, %d gave up beside the busy writer", opens.Load(), busy.Load())
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after the writer closed: %v", err)
	}
	defer ro.Close()
	if v := ro.Version(); v != int64(versions) || !bytes.Equal(ro.LastCommitInfo().Hash(), last) {
		t.Fatalf("read-only open after the writer closed: version %d, want %d with its hash", v, versions)
	}
}

// TestViewAtBesidePrune reads older versions with ViewAt from two
// goroutines while the writer commits, rewrites a snapshot every 5
// versions and prunes all but one older snapshot: each ViewAt returns its
// version with its hash, or ErrVersion once the version is no longer kept,
// never the error of a snapshot or log segment removed under it.
func TestViewAtBesidePrune(t *testing.T) {
	versions := 400
	if testing.Short() {
		versions = 250
	}
	var read, gone atomic.Int64
	rngs := []*rand.Rand{rand.New(rand.NewSource(0)), rand.New(rand.NewSource(1))}
	opts := Options{SnapshotInterval: 5, SnapshotKeepRecent: 1, ViewCacheSize: -1}
	besideWriter(t, opts, versions, len(rngs), func(db *DB, _ string, g int, hashes *hashLog) bool {
		latest := db.Version()
		v := latest - int64(rngs[g].Intn(14))
		if v < 1 {
			return true
		}
		view, err := db.ViewAt(v)
		if errors.Is(err, ErrVersion) {
			gone.Add(1)
			return true
		}
		if err != nil {
			t.Errorf("ViewAt(%d) at latest %d: %v", v, latest, err)
			return false
		}
		read.Add(1)
		want := hashes.get(v)
		// the latest version's Commit may not have returned to
		// hashes.commit yet
		if view.Version() != v || want != nil && !bytes.Equal(view.CommitInfo().Hash(), want) {
			t.Errorf("ViewAt(%d): version %d, or its hash differs", v, view.Version())
		}
		view.Release()
		return true
	})
	t.Logf("%d views read, %d versions no longer kept", read.Load(), gone.Load())
	if read.Load() == 0 {
		t.Error("no view was read")
	}
}

// TestInterruptedPrune: a snapshot directory whose removal was interrupted
// after its rename is not listed, and the next writable open removes it.
func TestInterruptedPrune(t *testing.T) {
	dir := t.TempDir()
	db := openWithSnapshotAt(t, dir, 5)
	commitN(t, db, 1, 3)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// what a crash between removeSnapshotDir's rename and removal leaves
	// (the prune after the rewrite removed the snapshot at 5; put one back)
	gone := filepath.Join(dir, snapshotDirName(5)+prunedSuffix+tmpSuffix)
	if err := os.CopyFS(gone, os.DirFS(filepath.Join(dir, snapshotDirName(8)))); err != nil {
		t.Fatal(err)
	}
	if got, err := listSnapshots(dir); err != nil || len(got) != 1 || got[0] != 8 {
		t.Fatalf("snapshots %v (%v), want [8]", got, err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if _, err := os.Stat(gone); err != nil {
		t.Fatalf("a read-only open changed the directory: %v", err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("the interrupted removal's directory is still there: %v", err)
	}
}

// TestVerifyBesideWriter runs Verify over and over beside a writer that
// rewrites a snapshot every 5 versions and prunes the older ones and the
// log before them: the changing directory is never reported as damaged.
func TestVerifyBesideWriter(t *testing.T) {
	versions := 300
	if testing.Short() {
		versions = 150
	}
	var verified, busy atomic.Int64
	dir, last := besideWriter(t, Options{SnapshotInterval: 5, SnapshotKeepRecent: 1}, versions, 1, func(_ *DB, dir string, _ int, hashes *hashLog) bool {
		rep, err := Verify(dir)
		if errors.Is(err, ErrBusy) {
			// a slow check beside a fast writer (the race detector
			// on a loaded machine): not damage
			busy.Add(1)
			return true
		}
		if err != nil {
			t.Errorf("verify beside a writer: %v", err)
			return false
		}
		if want := hashes.get(rep.Version); want != nil && !bytes.Equal(rep.AppHash, want) {
			t.Errorf("verify: version %d has another app hash", rep.Version)
		}
		verified.Add(1)
		return true
	})
	t.Logf("%d verifications, %d gave up beside the busy writer", verified.Load(), busy.Load())
	rep, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify after the writer closed: %v", err)
	}
	if rep.Version != int64(versions) || !bytes.Equal(rep.AppHash, last) {
		t.Fatalf("verify after the writer closed: version %d, want %d with its hash", rep.Version, versions)
	}
}

// TestReaderGivesUpBesideBusyWriter: a reader that fails on a file the
// writer removed, while the writer switches snapshots under each of its
// attempts, returns ErrBusy, not ErrCorrupt; one that meets damage beside
// the same writer, or fails with nothing changed, returns its own error.
func TestReaderGivesUpBesideBusyWriter(t *testing.T) {
	dir := t.TempDir()
	db := openWithSnapshotAt(t, dir, 3)
	defer db.Close()
	removed := fmt.Errorf("%w: snapshot: %w", ErrCorrupt, fs.ErrNotExist)
	damage := fmt.Errorf("%w: a checksum mismatch", ErrCorrupt)
	busy := func(fail error) (int, error) {
		calls := 0
		_, err := retryBesideWriter(dir, func() (int, error) {
			calls++
			commitN(t, db, 1, 1) // the writer moves on under the reader
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			return 0, fail
		})
		return calls, err
	}
	if calls, err := busy(removed); !errors.Is(err, ErrBusy) || errors.Is(err, ErrCorrupt) || calls != besideWriterAttempts {
		t.Fatalf("after %d attempts failing on removed files beside a busy writer: %v", calls, err)
	}
	if calls, err := busy(damage); err != damage || calls != besideWriterAttempts {
		t.Fatalf("after %d attempts meeting damage beside a busy writer: %v", calls, err)
	}
	// Close joins the writer's prunes, which would otherwise still move
	// the directory under the next reader
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := retryBesideWriter(dir, func() (int, error) { calls++; return 0, damage })
	if err != damage || calls != 1 {
		t.Fatalf("after %d attempts beside an idle writer: %v", calls, err)
	}
}
