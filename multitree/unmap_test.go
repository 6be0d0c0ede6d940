package multitree

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestUnmapOffCommitPath: whoever releases the last reference to an old
// snapshot (a Commit switching to a background rewrite, RewriteSnapshot,
// a reader's View.Release) does not unmap it itself: unmapping takes time
// in proportion to the mapped pages, a pause that would grow with the
// state. With the background unmapping held up, all of them return, and
// Close waits for it.
func TestUnmapOffCommitPath(t *testing.T) {
	for _, holdView := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", holdView), func(t *testing.T) { testUnmapOffCommitPath(t, holdView) })
	}
}

// testUnmapOffCommitPath switches snapshots with background rewrites, or
// with holdView, with RewriteSnapshot while a view holds the old one.
func testUnmapOffCommitPath(t *testing.T, holdView bool) {
	opts := Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 3, ViewCacheSize: 1}
	if holdView {
		opts.SnapshotInterval = -1
	}
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	started, unblock := make(chan struct{}, 64), make(chan struct{})
	SetUnmapHook(db, func() {
		started <- struct{}{}
		<-unblock
	})
	// guard runs f, which must return while the unmapping is held up
	guard := func(name string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			close(unblock)
			<-done
			t.Fatalf("%s waits for an unmapping", name)
		}
	}
	unmapped := 0
	commit := func(i int) {
		t.Helper()
		guard("Commit", func() error {
			if err := db.Set("a", []byte(fmt.Sprint("k", i)), []byte("v")); err != nil {
				return err
			}
			_, err := db.Commit()
			return err
		})
		for len(started) > 0 {
			<-started
			unmapped++
		}
	}
	if holdView {
		for i := 0; i < 3; i++ {
			commit(i)
		}
		view, err := db.View() // pins the current snapshot
		if err != nil {
			t.Fatal(err)
		}
		guard("RewriteSnapshot", func() error { return db.RewriteSnapshot(context.Background()) })
		for i := 3; i < 10; i++ {
			commit(i)
		}
		if unmapped != 0 {
			t.Fatalf("%d snapshots unmapped while a view still reads the old one", unmapped)
		}
		guard("View.Release", func() error { view.Release(); return nil }) // the last reference
		select {
		case <-started:
			unmapped++
		case <-time.After(10 * time.Second):
			t.Fatal("the old snapshot was never unmapped")
		}
	} else {
		// background rewrites switch in commits until one unmaps
		for i := 0; i < 200 && unmapped == 0; i++ {
			commit(i)
			waitRewrite(db) // the next commit switches to its snapshot
		}
		if unmapped == 0 {
			t.Fatal("no snapshot was unmapped in 200 commits")
		}
	}
	if _, err := db.Get("a", []byte("k1")); err != nil {
		t.Fatal(err)
	}
	commit(1000)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the background unmapping finished", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(unblock)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestCollectAfterSwitch: the unmapping of the generation that a Commit
// replaced with a background rewrite's runs one garbage collection, since
// the old trees' nodes, most of the heap, have just become garbage; the
// release of any other generation (the one RewriteSnapshot replaces, views
// of old versions leaving the cache) runs none.
func TestCollectAfterSwitch(t *testing.T) {
	for _, background := range []bool{true, false} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) { testCollectAfterSwitch(t, background) })
	}
}

// forcedGCs returns the number of collections forced so far (runtime.GC).
func forcedGCs() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumForcedGC
}

// keyCommitter returns commit, which commits a version that writes the
// next key of store "a", and the number of versions it committed.
func keyCommitter(t *testing.T, db *DB) (commit func(), commits func() int) {
	i := 0
	commit = func() {
		t.Helper()
		if err := db.Set("a", []byte(fmt.Sprint("k", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		i++
	}
	return commit, func() int { return i }
}

func testCollectAfterSwitch(t *testing.T, background bool) {
	forced := forcedGCs
	opts := Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 3, SnapshotKeepRecent: 10, ViewCacheSize: 1}
	if !background {
		opts.SnapshotInterval = -1
	}
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	unmapped := make(chan struct{}, 64)
	SetUnmapHook(db, func() { unmapped <- struct{}{} })
	commit, commits := keyCommitter(t, db)
	// waitUnmapped waits for the next background unmapping to start and
	// then for the collections it may run to be counted
	waitUnmapped := func(what string) {
		t.Helper()
		select {
		case <-unmapped:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no snapshot was unmapped", what)
		}
		db.unmapper.wg.Wait()
	}

	if background {
		// commits until one switches to a background rewrite
		before := forced()
		snap := db.SnapshotVersion()
		// the commit of version 3 starts the rewrite; its end is waited
		// for (not a number of commits: a rewrite slower than 1000
		// commits on a loaded machine failed the test), and the next
		// commit switches to it
		for commits() < 3 {
			commit()
		}
		waitRewrite(db)
		commit()
		if db.SnapshotVersion() == snap {
			t.Fatalf("no background switch at version %d", db.Version())
		}
		waitUnmapped("background switch")
		if n := forced() - before; n != 1 {
			t.Fatalf("a background switch ran %d collections, want 1", n)
		}
		return
	}

	for commits() < 3 {
		commit()
	}
	before := forced()
	if err := db.RewriteSnapshot(context.Background()); err != nil { // snapshot 3
		t.Fatal(err)
	}
	waitUnmapped("RewriteSnapshot")
	for commits() < 6 {
		commit()
	}
	// views of old versions, rebuilt from the snapshots they need and
	// dropped from the cache of one: released, not replaced (the view of
	// 4, evicted by that of 2, shares the database's mapping of snapshot
	// 3 and unmaps nothing)
	for _, v := range []int64{1, 4, 2} {
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatal(err)
		}
		view.Release()
	}
	waitUnmapped("view of version 1")
	if n := forced() - before; n != 0 {
		t.Fatalf("RewriteSnapshot and the release of views of old versions ran %d collections", n)
	}
}

// TestUnmapAfterLogWritten: an asynchronous log may still hold the entry of
// the version a background switch replaced the snapshots under, and that
// entry may hold slices of them (a value read with GetZeroCopy and set
// again). The replaced snapshots are unmapped only after the log has
// written it: here the entry is 64 MiB, so that the writer is still busy
// with it when the switching Commit returns.
func TestUnmapAfterLogWritten(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 3,
		AsyncCommitBuffer: 4, ViewCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	written := make(chan int64, 8)
	SetUnmapHook(db, func() { written <- db.log.WrittenVersion() })
	commit := func(v int64, key string, value []byte) {
		t.Helper()
		if err := db.Set("a", []byte(key), value); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit(1, "k1", []byte("value of k1"))
	if err := db.RewriteSnapshot(context.Background()); err != nil { // k1 is in snapshot 1
		t.Fatal(err)
	}
	commit(2, "x", []byte("2"))
	commit(3, "x", []byte("3"))
	commit(4, "x", []byte("4")) // starts the rewrite of 4
	waitRewrite(db)
	k1, err := db.WorkingTree("a").GetZeroCopy([]byte("k1")) // a slice of snapshot 1
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set("a", []byte("k2"), k1); err != nil {
		t.Fatal(err)
	}
	db.unmapper.wg.Wait() // snapshot 0's unmapping, after RewriteSnapshot
	for len(written) > 0 {
		<-written
	}
	commit(5, "big", make([]byte, 64<<20)) // switches to the snapshot of 4
	if got := db.SnapshotVersion(); got != 4 {
		t.Fatalf("snapshot version %d after the switch, want 4", got)
	}
	select {
	case w := <-written:
		if w < 5 {
			t.Fatalf("snapshot 1 was unmapped with the log written up to version %d, before version 5", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("snapshot 1 was not unmapped")
	}
	if v, err := db.Get("a", []byte("k2")); err != nil || string(v) != "value of k1" {
		t.Fatalf("k2 = %q, %v", v, err)
	}
}
