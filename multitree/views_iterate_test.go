package multitree

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// viState is the content of the stores at one version: store -> key -> value.
type viState map[string]map[string]string

func (s viState) clone() viState {
	c := viState{}
	for name, m := range s {
		cm := make(map[string]string, len(m))
		for k, v := range m {
			cm[k] = v
		}
		c[name] = cm
	}
	return c
}

// viRange returns the keys of m in [start, end), in the iteration's order.
func viRange(m map[string]string, start, end []byte, asc bool) []string {
	var keys []string
	for k := range m {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if !asc {
		slices.Reverse(keys)
	}
	return keys
}

func viKey(r *rand.Rand) []byte { return []byte(fmt.Sprintf("k%03d", r.Intn(150))) }

func viBound(r *rand.Rand) []byte {
	if r.Intn(3) == 0 {
		return nil
	}
	return viKey(r)
}

// TestViewIteratorsDuringCommits: iterators of views (the latest and older
// versions) stepped slowly on reader goroutines while the writer changes
// and commits versions, background rewrites write, rebase and switch
// snapshots, and old snapshots are pruned. A view is immutable ("A
// committed version is immutable", View doc): each iteration must give
// exactly the keys and values of its version in its range. Some readers
// change their copy (View.Tree: "the caller's own (it may even be mutated
// without affecting anything else)") while iterating it: the iteration
// follows the copy's changes (memiavl.Iterator) and no other reader of the
// version sees them. Meanwhile the writer iterates its working tree across
// its own writes of the block, against a model of the working state.
func TestViewIteratorsDuringCommits(t *testing.T) {
	versions := int64(150)
	if testing.Short() {
		versions = 60
	}
	baseline := runtime.NumGoroutine()
	stores := []string{"a", "b"}
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: stores,
		SnapshotInterval: 4, SnapshotKeepRecent: 2, AsyncCommitBuffer: 2, ViewCacheSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	DelayRewrites(db, 2)
	var states sync.Map // version -> viState
	working := viState{"a": {}, "b": {}}
	states.Store(int64(0), working.clone())

	var done atomic.Bool
	var iterations atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(100 + g)))
			for !done.Load() {
				if err := viReadView(db, &states, r, g == 2); err != nil {
					errs <- err
					return
				}
				iterations.Add(1)
			}
		}(g)
	}

	r := rand.New(rand.NewSource(7))
	for v := int64(1); v <= versions; v++ {
		// a working iterator, stepped across the block's writes
		store := stores[r.Intn(2)]
		start, end, asc := viBound(r), viBound(r), r.Intn(2) == 0
		wt := db.WorkingTree(store)
		it := wt.Iterator(start, end, asc)
		first := true
		var cur, curVal string
		valid := true
		// the value is the key's when the iterator moved to it
		next := func() {
			keys := viRange(working[store], start, end, asc)
			for _, k := range keys {
				if first || asc && k > cur || !asc && k < cur {
					cur, curVal, valid, first = k, working[store][k], true, false
					return
				}
			}
			valid, first = false, false
		}
		next()
		for op := 0; op < 30; op++ {
			if it.Valid() != valid || valid && (string(it.Key()) != cur || string(it.Value()) != curVal) {
				t.Fatalf("version %d op %d: working iterator of %s [%q,%q) asc=%v at %q/%q valid=%v, want %q/%q valid=%v",
					v, op, store, start, end, asc, it.Key(), it.Value(), it.Valid(), cur, curVal, valid)
			}
			s := stores[r.Intn(2)]
			k := viKey(r)
			switch r.Intn(4) {
			case 0:
				delete(working[s], string(k))
				if err := db.Delete(s, k); err != nil {
					t.Fatal(err)
				}
			case 1:
				if valid {
					it.Next()
					next()
				}
			default:
				val := fmt.Sprintf("%s@%d.%d", k, v, op)
				working[s][string(k)] = val
				if err := db.Set(s, k, []byte(val)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		states.Store(v, working.clone())
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	// at least one switch: blocks without changes until one (the delayed
	// rewrites wait for commits, so a wait without them would never end)
	for deadline := time.Now().Add(time.Minute); db.SnapshotVersion() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no background rewrite was switched to")
		}
		states.Store(db.WorkingVersion(), working.clone())
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; runtime.NumGoroutine() > baseline && i < 1000; i++ {
		runtime.Gosched()
	}
	t.Logf("%d view iterations", iterations.Load())
}

// viReadView iterates one store of a view of a random version, slowly,
// and compares it with the version's state. With mutate it changes its
// copy of the tree under the iteration.
func viReadView(db *DB, states *sync.Map, r *rand.Rand, mutate bool) error {
	latest := db.Version()
	var view *View
	var err error
	if latest > 2 && r.Intn(2) == 0 {
		view, err = db.ViewAt(latest - r.Int63n(4))
		if errors.Is(err, ErrVersion) {
			return nil // older than the kept snapshots
		}
	} else {
		view, err = db.View()
	}
	if err != nil {
		return err
	}
	defer view.Release()
	v := view.Version()
	st, ok := states.Load(v)
	if !ok {
		return fmt.Errorf("view of version %d, which the writer did not record", v)
	}
	store := []string{"a", "b"}[r.Intn(2)]
	model := st.(viState)[store]
	if mutate {
		cm := make(map[string]string, len(model))
		for k, val := range model {
			cm[k] = val
		}
		model = cm
	}
	start, end, asc := viBound(r), viBound(r), r.Intn(2) == 0
	tree := view.Tree(store)
	it := tree.Iterator(start, end, asc)
	defer it.Close()
	desc := fmt.Sprintf("view %d store %s [%q,%q) asc=%v mutate=%v", v, store, start, end, asc, mutate)
	var cur string
	first := true
	for steps := 0; ; steps++ {
		var want string
		found := false
		for _, k := range viRange(model, start, end, asc) {
			if first || asc && k > cur || !asc && k < cur {
				want, found = k, true
				break
			}
		}
		first = false
		if it.Valid() != found {
			return fmt.Errorf("%s step %d: valid %v, want %v (%q) err %v", desc, steps, it.Valid(), found, want, it.Error())
		}
		if !found {
			break
		}
		if string(it.Key()) != want || string(it.Value()) != model[want] {
			return fmt.Errorf("%s step %d: %q=%q, want %q=%q", desc, steps, it.Key(), it.Value(), want, model[want])
		}
		cur = want
		if r.Intn(3) == 0 {
			runtime.Gosched()
		}
		if mutate && r.Intn(2) == 0 {
			if err := viMutateCopy(tree, model, r); err != nil {
				return err
			}
		}
		it.Next()
	}
	return it.Error()
}

func viMutateCopy(tree *memiavl.Tree, model map[string]string, r *rand.Rand) error {
	k := viKey(r)
	if r.Intn(3) == 0 {
		delete(model, string(k))
		_, err := tree.Remove(k)
		return err
	}
	val := fmt.Sprintf("reader-%d", r.Intn(1000))
	model[string(k)] = val
	_, err := tree.Set(k, []byte(val))
	return err
}
