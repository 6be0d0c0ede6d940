package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// lcModel is a sorted-map oracle of one tree's working state.
type lcModel map[string]string

func (m lcModel) clone() lcModel {
	c := make(lcModel, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// lcIter is an open iterator with the oracle it must follow: each Next
// gives the first key of its tree's state at that moment after (before,
// descending) the current key within [start, end) (memiavl.Iterator's doc).
type lcIter struct {
	it         *memiavl.Iterator
	model      *lcModel // the state of the iterator's tree, live
	start, end []byte
	asc        bool
	cur        string
	valid      bool
	first      bool
	desc       string
}

func (z *lcIter) want() (string, bool) {
	var keys []string
	for k := range *z.model {
		if (z.start == nil || k >= string(z.start)) && (z.end == nil || k < string(z.end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if !z.asc {
		slices.Reverse(keys)
	}
	for _, k := range keys {
		if z.first || z.asc && k > z.cur || !z.asc && k < z.cur {
			return k, true
		}
	}
	return "", false
}

func (z *lcIter) check(t *testing.T, what string) bool {
	t.Helper()
	if err := z.it.Error(); err != nil {
		t.Fatalf("%s: %s: iterator error %v", what, z.desc, err)
	}
	if z.it.Valid() != z.valid {
		t.Fatalf("%s: %s: valid %v, want %v (cur %q)", what, z.desc, z.it.Valid(), z.valid, z.cur)
	}
	if !z.valid {
		return false
	}
	if got := string(z.it.Key()); got != z.cur {
		t.Fatalf("%s: %s: key %q, want %q", what, z.desc, got, z.cur)
	}
	return true
}

// step advances the iterator and its oracle, and checks the value of the
// key it moved to against the model.
func (z *lcIter) step(t *testing.T, what string) {
	t.Helper()
	if !z.valid {
		return
	}
	z.it.Next()
	z.cur, z.valid = z.want()
	if z.check(t, what) {
		if got, want := string(z.it.Value()), (*z.model)[z.cur]; got != want {
			t.Fatalf("%s: %s: value of %q %q, want %q", what, z.desc, z.cur, got, want)
		}
	}
}

func lcKey(r *rand.Rand) []byte {
	switch r.Intn(12) {
	case 0:
		return []byte{} // the empty key is a key in memiavl
	case 1:
		return []byte("k01\x00") // the least key after k01
	case 2:
		return []byte("k01")
	case 3:
		return []byte("k01\x00\x00")
	}
	return []byte(fmt.Sprintf("k%02d", r.Intn(60)))
}

func lcBound(r *rand.Rand) []byte {
	if r.Intn(3) == 0 {
		return nil
	}
	return lcKey(r)
}

// TestIteratorRandomLifecycle: many iterators (ascending and descending,
// nil, empty, equal and reversed bounds) open on a tree, on copies of it
// and on trees that replaced it (a snapshot written and reopened, a
// Rebase), stepped while the tree is changed (Set, Remove, in and out of
// their ranges), saved and rewritten. Each iterator must follow its own
// tree's state: the working tree's as it changes, a copy's frozen at its
// version (Copy: "does not see t's later changes"), an old tree's as that
// tree was left.
func TestIteratorRandomLifecycle(t *testing.T) {
	seeds := int64(16)
	if testing.Short() {
		seeds = 6
	}
	for seed := int64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { lcLifecycle(t, seed) })
	}
}

func lcLifecycle(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := lcModel{}
	live := &model
	var its []*lcIter
	open := func(tree *memiavl.Tree, m *lcModel, label string) {
		z := &lcIter{model: m, start: lcBound(r), end: lcBound(r), asc: r.Intn(2) == 0, first: true}
		if r.Intn(8) == 0 {
			z.end = z.start // start == end: empty
		}
		z.desc = fmt.Sprintf("%s [%q,%q) asc=%v", label, z.start, z.end, z.asc)
		z.it = tree.Iterator(z.start, z.end, z.asc)
		z.cur, z.valid = z.want()
		z.first = false
		z.check(t, "open")
		its = append(its, z)
	}
	set := func(k []byte, v string) {
		(*live)[string(k)] = v
		if _, err := tr.Set(k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 40; i++ {
		set(lcKey(r), "v0")
	}
	for op := 0; op < 600; op++ {
		what := fmt.Sprintf("op %d", op)
		switch x := r.Intn(100); {
		case x < 30:
			set(lcKey(r), fmt.Sprintf("v%d", op))
		case x < 45:
			k := lcKey(r)
			delete(*live, string(k))
			if _, err := tr.Remove(k); err != nil {
				t.Fatal(err)
			}
		case x < 70:
			if len(its) > 0 {
				its[r.Intn(len(its))].step(t, what)
			}
		case x < 78:
			open(tr, live, fmt.Sprintf("working@%d", op))
		case x < 84:
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
			if r.Intn(2) == 0 {
				c := tr.Copy()
				cm := live.clone()
				open(c, &cm, fmt.Sprintf("copy v%d@%d", c.Version(), op))
			}
		case x < 87:
			// a snapshot of the saved version, reopened: the old tree
			// (and its iterators) stays as it was, the new one is the
			// working tree from now on
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "snap")
			if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			frozen := live.clone()
			for _, z := range its {
				if z.model == live {
					z.model = &frozen
				}
			}
			nm := live.clone()
			live = &nm
			tr = openSnapshotTree(t, dir)
		case x < 90:
			// Rebase onto a mapped snapshot of the saved version, with
			// later versions committed between write and rebase
			tr = lcRebase(t, r, tr, &live, &its, set)
		case x < 95:
			if len(its) > 0 {
				i := r.Intn(len(its))
				its[i].it.Close()
				its = append(its[:i], its[i+1:]...)
			}
		default:
			for _, z := range its {
				z.step(t, what)
			}
		}
	}
	for _, z := range its {
		for z.valid {
			z.step(t, "drain")
		}
		z.check(t, "drained")
	}
}

// lcRebase writes a mapped snapshot of tr's saved version, commits a few
// more versions, then rebases the latest saved version onto the snapshot
// and returns the rebased tree (whose working state is that version).
func lcRebase(t *testing.T, r *rand.Rand, tr *memiavl.Tree, live **lcModel, its *[]*lcIter, set func([]byte, string)) *memiavl.Tree {
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mapped")
	m, err := tr.WriteSnapshotMapped(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for n := r.Intn(3); n > 0; n-- {
		set(lcKey(r), "after-map")
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	base, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := memiavl.NewRebaser(base, m)
	if err != nil {
		t.Fatal(err)
	}
	nt, err := rb.Rebase(context.Background(), tr.Copy())
	if err != nil {
		t.Fatal(err)
	}
	frozen := (*live).clone()
	for _, z := range *its {
		if z.model == *live {
			z.model = &frozen
		}
	}
	nm := (*live).clone()
	*live = &nm
	return nt
}

// TestIteratorClosedSnapshotStops: an iterator over a snapshot-backed tree
// with in-memory changes on top, whose snapshot is closed under it while
// it is between keys (after a change, so that the next Next finds its
// place again), stops with an error wrapping snapshot.ErrClosed, and its
// Key and Value are nil (memiavl.Iterator.Valid/Released docs).
func TestIteratorClosedSnapshotStops(t *testing.T) {
	for _, asc := range []bool{true, false} {
		tr := keysTree(t, 500, "v")
		dir := filepath.Join(t.TempDir(), "snap")
		if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		s, err := snapshot.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		st, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Set([]byte("zz-mem"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		it := st.Iterator(nil, nil, asc)
		for i := 0; i < 20 && it.Valid(); i++ {
			it.Next()
		}
		if _, err := st.Set([]byte("zz-mem2"), []byte("y")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if it.Key() != nil || it.Value() != nil {
			t.Fatalf("asc=%v: Key/Value after close: %q %q", asc, it.Key(), it.Value())
		}
		it.Next()
		if it.Valid() {
			t.Fatalf("asc=%v: valid after the snapshot closed", asc)
		}
		if err := it.Error(); !errors.Is(err, snapshot.ErrClosed) {
			t.Fatalf("asc=%v: error %v, want snapshot.ErrClosed", asc, err)
		}
		it.Close()
	}
}

// TestIteratorCopyFrozenAcrossExclusive: an iterator of a Copy taken while
// the original had SetExclusive on reads the copy's version, however the
// original then changes: Copy ends the exclusive mode ("its nodes are
// shared from now on").
func TestIteratorCopyFrozenAcrossExclusive(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := lcModel{}
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("k%03d", i)
		want[k] = "a"
		if _, err := tr.Set([]byte(k), []byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr.SetExclusive(0)
	for i := 0; i < 200; i += 3 {
		k := fmt.Sprintf("k%03d", i)
		want[k] = "b"
		if _, err := tr.Set([]byte(k), []byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	c := tr.Copy()
	for _, asc := range []bool{true, false} {
		z := &lcIter{it: c.Iterator(nil, nil, asc), model: &want, asc: asc, first: true, desc: "copy"}
		z.cur, z.valid = z.want()
		z.first = false
		z.check(t, "open")
		r := rand.New(rand.NewSource(1))
		for z.valid {
			for n := r.Intn(3); n > 0; n-- {
				k := []byte(fmt.Sprintf("k%03d", r.Intn(220)))
				if r.Intn(2) == 0 {
					if _, err := tr.Remove(k); err != nil {
						t.Fatal(err)
					}
				} else if _, err := tr.Set(k, []byte("c")); err != nil {
					t.Fatal(err)
				}
			}
			z.step(t, "step")
		}
	}
}

// TestIteratorTreeEmptiedUnderIterator: a snapshot-backed tree emptied
// (every key removed) while an iterator is on one of its keys; keys then
// set again, ahead of the iterator and behind it, before its next Next.
// The Next must give the first key ahead of the current one in the tree
// as it then is (memiavl.Iterator doc): the ones set ahead, in order, and
// nothing behind; an iteration that has ended stays ended ("ended: nothing
// comes"), whatever is set after.
func TestIteratorTreeEmptiedUnderIterator(t *testing.T) {
	for _, asc := range []bool{true, false} {
		_, _, st := mappedTree(t, keysTree(t, 300, "v"))
		var all [][]byte
		it0 := st.Iterator(nil, nil, true)
		for ; it0.Valid(); it0.Next() {
			all = append(all, append([]byte(nil), it0.Key()...))
		}
		it := st.Iterator(nil, nil, asc)
		for i := 0; i < 100; i++ {
			it.Next()
		}
		cur := string(it.Key())
		for _, k := range all {
			if _, err := st.Remove(k); err != nil {
				t.Fatal(err)
			}
		}
		if !st.IsEmpty() {
			t.Fatal("not empty")
		}
		ahead, behind := all[len(all)-1], all[0]
		if !asc {
			ahead, behind = behind, ahead
		}
		if _, err := st.Set(behind, []byte("b")); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Set(ahead, []byte("a")); err != nil {
			t.Fatal(err)
		}
		it.Next()
		if !it.Valid() || string(it.Key()) != string(ahead) || string(it.Value()) != "a" {
			t.Fatalf("asc=%v: after %q: valid=%v %q=%q, want %q=a (err %v)", asc, cur, it.Valid(), it.Key(), it.Value(), ahead, it.Error())
		}
		it.Next()
		if it.Valid() {
			t.Fatalf("asc=%v: %q after the last key", asc, it.Key())
		}
		if _, err := st.Set([]byte("zzzz-late"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Set([]byte{}, []byte("x")); err != nil {
			t.Fatal(err)
		}
		it.Next()
		if it.Valid() || it.Error() != nil {
			t.Fatalf("asc=%v: ended iteration valid=%v err=%v", asc, it.Valid(), it.Error())
		}
		it.Close()
	}
}
