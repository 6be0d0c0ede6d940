package multitree

import (
	"sync"
	"sync/atomic"
	"testing"
)

// hammerWhile runs hammer on another goroutine until drive returns, so
// that the two overlap for as long as drive runs.
func hammerWhile(hammer, drive func()) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			hammer()
		}
	}()
	drive()
	stop.Store(true)
	wg.Wait()
}

// TestTryAcquireNoResurrect: a reader's tryAcquire beside the release
// of a generation's last reference (View beside the Commit that replaces the
// published state) either fails or takes its reference before that release:
// it never revives a generation whose last release has unmapped it. A check
// of the count followed by a plain increment would hand out a reference on
// unmapped snapshots, which a second unmapping then releases again.
func TestTryAcquireNoResurrect(t *testing.T) {
	n := 200000
	if testing.Short() {
		n = 50000
	}
	type gen struct {
		g        *generation
		unmapped atomic.Bool
		unmaps   atomic.Int32
	}
	newGen := func() *gen {
		x := &gen{}
		x.g = &generation{unmap: func(func(), bool) { x.unmaps.Add(1); x.unmapped.Store(true) }}
		x.g.refs.Store(1)
		return x
	}
	var cur atomic.Pointer[gen]
	cur.Store(newGen())
	var revived, acquired atomic.Int64
	var all []*gen
	hammerWhile(func() {
		x := cur.Load()
		if x.g.tryAcquire() {
			acquired.Add(1)
			if x.unmapped.Load() {
				revived.Add(1)
			}
			x.g.release()
		}
	}, func() {
		for i := 0; i < n; i++ {
			x := newGen()
			old := cur.Swap(x)
			old.g.release()
			all = append(all, old)
		}
	})
	last := cur.Load()
	last.g.release()
	all = append(all, last)
	for i, x := range all {
		if u := x.unmaps.Load(); u != 1 || x.g.refs.Load() != 0 {
			if revived.Load() < 5 {
				t.Errorf("generation %d: unmapped %d times, %d references left, want once and 0", i, u, x.g.refs.Load())
			}
			revived.Add(1)
		}
	}
	t.Logf("%d generations, %d references taken beside their release", len(all), acquired.Load())
	if revived.Load() > 0 {
		t.Fatalf("%d references taken on a generation already unmapped (of %d generations)", revived.Load(), len(all))
	}
}

// TestViewReleaseConcurrent: Release is idempotent also when two
// goroutines call it at once (a View may be used from any goroutine): the
// view's reference is dropped once, never another holder's.
func TestViewReleaseConcurrent(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitN(t, db, 3, 3)
	gen := db.state.Load().gen
	before := gen.refs.Load()
	n := 200000
	if testing.Short() {
		n = 50000
	}
	var cur atomic.Pointer[View]
	hammerWhile(func() {
		if v := cur.Load(); v != nil {
			v.Release()
		}
	}, func() {
		for i := 0; i < n; i++ {
			v, err := db.View()
			if err != nil {
				t.Error(err)
				return
			}
			cur.Store(v)
			v.Release()
			if got := gen.refs.Load(); got < before {
				t.Errorf("after %d views: %d references on the database's generation, want %d: a view released twice", i+1, got, before)
				return
			}
		}
	})
	if got := gen.refs.Load(); got != before {
		t.Fatalf("%d references on the database's generation once every view is released, want %d", got, before)
	}
	v, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if _, err := v.Get("bank", []byte("k")); err != nil {
		t.Fatalf("Get after the concurrent Releases: %v", err)
	}
}
