package multitree

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestReadersDuringCommits runs readers of views (latest and historical)
// while the writer commits, rewrites snapshots and prunes. Every version v
// writes key "version" = v and keys "k<i>" = "<i>@<v>" for a few i, so a
// reader can check that what it reads belongs to its view's version.
func TestReadersDuringCommits(t *testing.T) {
	r := testutil.Rand(t)
	baseline := runtime.NumGoroutine()
	dir := t.TempDir()
	stores := []string{"a", "b", "c"}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 5, SnapshotKeepRecent: 2, AsyncCommitBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	DelayRewrites(db, 2) // rebases run beside the readers too
	versions := 300
	if testing.Short() {
		versions = 120
	}
	// lastWrite[i] records, per version, which version last wrote k<i>:
	// it is derived from the deterministic schedule below.
	writes := func(v int64) []int {
		rr := rand.New(rand.NewSource(v))
		out := make([]int, 5)
		for j := range out {
			out[j] = rr.Intn(50)
		}
		return out
	}
	lastWriter := func(i int, v int64) int64 {
		for w := v; w >= 1; w-- {
			for _, j := range writes(w) {
				if j == i {
					return w
				}
			}
		}
		return 0
	}
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rr := rand.New(rand.NewSource(int64(g)))
			for !done.Load() {
				var view *View
				var err error
				if g%2 == 1 && db.Version() > 2 {
					view, err = db.ViewAt(1 + rr.Int63n(db.Version()))
					if err != nil {
						continue // older than the kept snapshots
					}
				} else if view, err = db.View(); err != nil {
					errs <- err
					return
				}
				v := view.Version()
				for _, s := range stores {
					got, err := view.Get(s, []byte("version"))
					if err != nil || (v > 0 && binary.BigEndian.Uint64(got) != uint64(v)) {
						errs <- fmt.Errorf("view %d store %s: version key %x, %v", v, s, got, err)
						return
					}
					i := rr.Intn(50)
					got, err = view.Get(s, []byte(fmt.Sprintf("k%d", i)))
					w := lastWriter(i, v)
					want := fmt.Sprintf("%d@%d", i, w)
					if err != nil || (w > 0 && string(got) != want) || (w == 0 && got != nil) {
						errs <- fmt.Errorf("view %d store %s key k%d: %q, want %q (%v)", v, s, i, got, want, err)
						return
					}
					it := view.Tree(s).Iterator(nil, nil, rr.Intn(2) == 0)
					for n := 0; it.Valid() && n < 20; it.Next() {
						n++
					}
					if it.Error() != nil {
						errs <- it.Error()
						return
					}
				}
				reads.Add(1)
				view.Release()
			}
		}(g)
	}
	// (past versions, on until a background rewrite has been switched to,
	// which a slow machine may not do within them)
	for v := int64(1); v <= int64(versions) || (db.SnapshotVersion() == 0 && v <= int64(versions)+5000); v++ {
		var css []wal.ChangeSet
		for _, s := range stores {
			cs := wal.ChangeSet{Name: s}
			ver := make([]byte, 8)
			binary.BigEndian.PutUint64(ver, uint64(v))
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte("version"), Value: ver})
			for _, i := range writes(v) {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%d@%d", i, v))})
			}
			for i := 0; i < 30; i++ {
				k := make([]byte, 16)
				r.Read(k)
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: k})
			}
			css = append(css, cs)
		}
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snapVersion, committed := db.SnapshotVersion(), db.Version()
	if snapVersion == 0 {
		t.Fatal("no background rewrite was switched to")
	}
	if rebased, _, failed := RebaseCounts(db); rebased == 0 || failed != 0 {
		t.Fatalf("%d catch-up rounds rebased, %d rebases failed", rebased, failed)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Close joins every background goroutine (a goroutine that already
	// signalled may still be returning, hence the short wait).
	for i := 0; runtime.NumGoroutine() > baseline && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		t.Fatalf("%d goroutines after Close, %d before Open", n, baseline)
	}
	t.Logf("%d view reads during %d commits, last snapshot %d", reads.Load(), committed, snapVersion)
}

// TestViewAtDuringClose rebuilds historical versions on several goroutines
// (the rebuilds run outside the view cache's lock) while the database
// closes: every call returns a usable view of its version or an error, and
// nothing is cached after Close.
func TestViewAtDuringClose(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 10, SnapshotKeepRecent: 3})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 60; v++ {
		if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: []byte("v"), Value: []byte(fmt.Sprint(v))}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldest := db.Version() - 25
	var wg sync.WaitGroup
	var served atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				want := oldest + int64((g*7+i*3)%25)
				view, err := db.ViewAt(want)
				if err != nil {
					continue // closed under it
				}
				tree := view.Tree("a")
				got, gerr := tree.Get([]byte("v"))
				if view.Version() != want || gerr != nil || string(got) != fmt.Sprint(want) {
					t.Errorf("ViewAt(%d): version %d, v=%q, %v", want, view.Version(), got, gerr)
				}
				view.Release()
				served.Add(1)
			}
		}(g)
	}
	time.Sleep(time.Millisecond)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	db.views.Lock()
	defer db.views.Unlock()
	if len(db.views.cache) != 0 || len(db.views.order) != 0 {
		t.Fatalf("%d views cached after Close", len(db.views.cache))
	}
	t.Logf("%d views served", served.Load())
}
