package multitree

import (
	"context"
	"fmt"
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
			time.Sleep(time.Millisecond) // lets rewrites finish
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
