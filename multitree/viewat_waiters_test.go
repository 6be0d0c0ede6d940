package multitree

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestViewAtCloseWhileWaiting: callers waiting for a rebuild of their
// version, or for a rebuild slot, while Close runs must all return (a view
// or ErrClosed), none hang and none panic.
func TestViewAtCloseWhileWaiting(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 5, 30)
	gate := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	var once [2]sync.Once
	db.afterRebuild = func(v int64) {
		if v == 10 || v == 11 {
			once[v-10].Do(entered.Done)
		}
		<-gate
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	call := func(v int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			view, err := db.ViewAt(v)
			if err == nil {
				view.Release()
			}
			errs <- err
		}()
	}
	call(10)
	call(11)
	entered.Wait() // both slots held
	for i := 0; i < 3; i++ {
		call(10) // wait for the rebuild of 10
		call(12) // wait for a slot
	}
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	time.Sleep(50 * time.Millisecond)
	close(gate)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ViewAt callers hang after Close")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("ViewAt after Close: %v, want ErrClosed or a view", err)
		}
	}
}

// TestViewAtLeaderPanics: a rebuild that panics (here in the test
// hook) must not leave the callers waiting for it blocked forever.
func TestViewAtLeaderPanics(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitN(t, db, 6, 20)
	var mu sync.Mutex
	panicked := false
	db.afterRebuild = func(int64) {
		mu.Lock()
		first := !panicked
		panicked = true
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		if first {
			panic("boom")
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { recover() }()
			if view, err := db.ViewAt(7); err == nil {
				view.Release()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("callers hang after the leader's panic")
	}
	db.afterRebuild = nil
}

// TestViewAtSnapshotZeroCachedUntilPruned: a view rebuilt from snapshot 0 is
// cached, and dropped (no longer served from the cache) once a prune
// removes snapshot 0.
func TestViewAtSnapshotZeroCachedUntilPruned(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 5, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(0))); err != nil {
		t.Fatalf("snapshot 0 is not a directory: %v", err)
	}
	hashes := commitN(t, db, 7, 3)
	view, err := db.ViewAt(2)
	if err != nil {
		t.Fatal(err)
	}
	gen := view.st.gen
	view.Release()
	db.views.Lock()
	_, cached := db.views.cache[2]
	db.views.Unlock()
	if gen.version != 0 || !cached {
		t.Fatalf("view of 2 from snapshot %d cached: %v, want snapshot 0, cached", gen.version, cached)
	}
	for k, v := range commitN(t, db, 7, 30) {
		hashes[k] = v
	}
	// A finished background rewrite is switched to by the next Commit,
	// which then starts the prune (keeping one snapshot older than the
	// current one): let the running rewrite end, commit once more, and
	// wait for the prune, until snapshot 0 is gone.
	for i := 0; ; i++ {
		waitRewrite(db)
		for k, v := range commitN(t, db, 7, 1) {
			hashes[k] = v
		}
		// the prune forgets what it removed before it ends
		waitForPrune(t, db)
		vs, err := listSnapshots(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) > 0 && vs[0] > 0 {
			break
		}
		if i == 10 {
			t.Fatalf("snapshot 0 not pruned after %d more commits, each after the running rewrite ended: %v", i+1, vs)
		}
	}
	db.views.Lock()
	for ver, st := range db.views.cache {
		if st.gen.version == 0 {
			t.Errorf("view of %d from the pruned snapshot 0 still cached", ver)
		}
	}
	db.views.Unlock()
	if _, err := db.ViewAt(2); err == nil {
		t.Errorf("ViewAt(2) after snapshot 0 was pruned: served")
	}
}
