package multitree

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// wiOpen opens a database of store "a" holding n keys in a snapshot, with
// switches by RewriteSnapshot only and no older snapshot kept, and returns
// it with the keys in order.
func wiOpen(t *testing.T, n int) (*DB, []string) {
	t.Helper()
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"},
		SnapshotInterval: -1, SnapshotKeepRecent: 0, ViewCacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var keys []string
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%04d", i)
		keys = append(keys, k)
		wiSet(t, db, k)
	}
	wiCommit(t, db)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	wiCommit(t, db)
	return db, keys
}

func wiSet(t *testing.T, db *DB, k string) {
	t.Helper()
	if err := db.Set("a", []byte(k), []byte("v"+k)); err != nil {
		t.Fatal(err)
	}
}

func wiCommit(t *testing.T, db *DB) {
	t.Helper()
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
}

// wiSwitch commits a write of k and switches the working trees to a new
// snapshot, whose old one no other reference holds.
func wiSwitch(t *testing.T, db *DB, k string) {
	t.Helper()
	wiSet(t, db, k)
	wiCommit(t, db)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	wiCommit(t, db) // the view cache's entry of the old snapshot goes
}

// wiRest reads the iterator to its end, checking each value.
func wiRest(t *testing.T, it *memiavl.Iterator) []string {
	t.Helper()
	var got []string
	for ; it.Valid(); it.Next() {
		k := string(it.Key())
		if v := string(it.Value()); v != "v"+k {
			t.Fatalf("%s = %q", k, v)
		}
		got = append(got, k)
	}
	if err := it.Error(); err != nil {
		t.Fatalf("iteration stopped: %v", err)
	}
	return got
}

// wiWaitClosed waits for the snapshot to be unmapped, calling poll (a
// collection, for a finalizer) between looks.
func wiWaitClosed(t *testing.T, s *snapshot.Snapshot, what string, poll func()) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !s.Closed() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the old snapshot is still mapped after 20 s", what)
		}
		poll()
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWorkingIteratorHoldsSnapshot: an iterator of a working tree
// (WorkingTree) holds the snapshot it reads until its Close. Kept across a
// switch to a new snapshot, it reads on to its end: the keys written
// before the switch among those still to come, none written after it; the old snapshot is unmapped
// once it is closed (and not before), and a second Close releases nothing
// more. Without the hold, its reads after the switch stop with
// snapshot.ErrClosed.
func TestWorkingIteratorHoldsSnapshot(t *testing.T) {
	for _, asc := range []bool{true, false} {
		t.Run(fmt.Sprintf("ascending=%v", asc), func(t *testing.T) {
			db, keys := wiOpen(t, 300)
			r := db.WorkingTree("a").(treeReader)
			old := r.gen.snaps["a"]
			it := r.Iterator(nil, nil, asc)
			var got []string
			for i := 0; i < 10 && it.Valid(); i++ {
				got = append(got, string(it.Key()))
				it.Next()
			}
			// k9998 is written before the switch, into the tree the
			// iterator reads; k9999 after it, into the tree that replaced it
			wiSwitch(t, db, "k9998")
			wiSet(t, db, "k9999")
			wiCommit(t, db)
			if db.WorkingTree("a").(treeReader).gen == r.gen {
				t.Fatal("no switch to a new snapshot")
			}
			if old.Closed() {
				t.Fatal("the snapshot an open iterator reads was unmapped at the switch")
			}
			got = append(got, wiRest(t, it)...)
			// k9998 comes after the keys read when it is written: an
			// ascending iteration meets it, a descending one has passed it
			want := append(slices.Clone(keys), "k9998")
			if !asc {
				want = slices.Clone(keys)
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("iterated %d keys, want %d: %v ... %v", len(got), len(want), got[:min(3, len(got))], got[max(0, len(got)-3):])
			}
			if n := r.gen.refs.Load(); n != 1 {
				t.Fatalf("the old generation has %d references, want 1 (the iterator's)", n)
			}
			_ = it.Close()
			wiWaitClosed(t, old, "after Close", func() {})
			_ = it.Close() // releases nothing more: no "released too often" panic
			if n := r.gen.refs.Load(); n != 0 {
				t.Fatalf("the old generation has %d references after the iterator's Close, want 0", n)
			}
		})
	}
}

// TestWorkingIteratorUnclosed: an iterator of a working tree that is
// dropped without Close releases its snapshot once the garbage collector
// finds it.
func TestWorkingIteratorUnclosed(t *testing.T) {
	db, _ := wiOpen(t, 100)
	r := db.WorkingTree("a").(treeReader)
	old := r.gen.snaps["a"]
	func() {
		it := r.Iterator(nil, nil, true)
		if !it.Valid() {
			t.Fatal("empty iteration")
		}
	}()
	wiSwitch(t, db, "k9998")
	wiWaitClosed(t, old, "unclosed iterator dropped", runtime.GC)
}

// TestWorkingIteratorOutlivesClose: an iterator of a working tree open
// when the database closes reads on to its end, as rootmulti's iterators
// go on after their multistore is replaced; its Close then unmaps the
// snapshot. An iterator from a reader taken before Close but made after it
// holds nothing: it stops with snapshot.ErrClosed.
func TestWorkingIteratorOutlivesClose(t *testing.T) {
	db, keys := wiOpen(t, 200)
	r := db.WorkingTree("a").(treeReader)
	old := r.gen.snaps["a"]
	it := r.Iterator(nil, nil, true)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if old.Closed() {
		t.Fatal("Close unmapped the snapshot an open iterator reads")
	}
	if got := wiRest(t, it); !slices.Equal(got, keys) {
		t.Fatalf("iterated %d keys after Close, want %d", len(got), len(keys))
	}
	_ = it.Close()
	if !old.Closed() {
		t.Fatal("the iterator's Close after the database's did not unmap the snapshot")
	}
	late := r.Iterator(nil, nil, true)
	defer late.Close()
	if late.Valid() {
		t.Fatal("an iterator made after Close is valid")
	}
	if err := late.Error(); err == nil {
		t.Fatal("an iterator made after Close has no error")
	}
}
