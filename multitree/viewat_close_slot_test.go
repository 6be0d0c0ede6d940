package multitree

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestViewAtWaitingForSlotAfterClose: a ViewAt that waits for one of the
// rebuild slots while Close ends returns ErrClosed once it gets the slot,
// without reading the database's files, which Close released: another
// writer may have changed them by then (here its prune removed the
// snapshots). It went on to read them, and failed on what it found.
func TestViewAtWaitingForSlotAfterClose(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 10)
	var rebuilds atomic.Int64
	release := make(chan struct{})
	held := make(chan struct{}, maxRebuilds)
	db.afterRebuild = func(int64) {
		if rebuilds.Add(1) <= int64(maxRebuilds) {
			held <- struct{}{}
			<-release // hold the slot
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, maxRebuilds+1)
	view := func(i int, v int64) {
		defer wg.Done()
		view, err := db.ViewAt(v)
		if err == nil {
			view.Release()
		}
		errs[i] = err
	}
	for i := 0; i < maxRebuilds; i++ {
		wg.Add(1)
		go view(i, int64(2+i))
		<-held
	}
	// one more version: its call waits for a slot
	wg.Add(1)
	go view(maxRebuilds, 8)
	time.Sleep(50 * time.Millisecond) // let it reach the wait (else it meets the closed views first)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// a writer that opens the directory after Close may prune what the
	// waiting call would read: it must not read it
	snaps, err := filepath.Glob(filepath.Join(db.dir, "snapshot-*"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("snapshots: %v %v", snaps, err)
	}
	for _, s := range snaps {
		if err := os.RemoveAll(s); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	wg.Wait()
	if !errors.Is(errs[maxRebuilds], ErrClosed) {
		t.Errorf("the ViewAt that waited for a slot across Close: %v, want ErrClosed", errs[maxRebuilds])
	}
	if n := rebuilds.Load(); n != int64(maxRebuilds) {
		t.Errorf("%d rebuilds, want %d: the call that waited across Close rebuilt its version", n, maxRebuilds)
	}
}
