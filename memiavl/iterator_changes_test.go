package memiavl_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestIteratorAcrossChanges: a tree changed while an iterator is open (Set
// and Remove of keys before and after the current one, in and out of the
// iterator's range, which rebalance and change nodes in place, over
// snapshot leaves and in-memory nodes) is iterated on from the current key:
// each Next gives the first key after the current one (before it,
// descending) in the changed tree, within the range, as a model says, never
// a key skipped or repeated.
func TestIteratorAcrossChanges(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		for _, ascending := range []bool{true, false} {
			t.Run(fmt.Sprintf("seed=%d/asc=%v", seed, ascending), func(t *testing.T) {
				iterateAcrossChanges(t, seed, ascending)
			})
		}
	}
}

func iterateAcrossChanges(t *testing.T, seed int64, ascending bool) {
	r := rand.New(rand.NewSource(seed))
	key := func() []byte { return []byte(fmt.Sprintf("k%03d", r.Intn(300))) }
	model := map[string]string{}
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 150; i++ {
		k := key()
		model[string(k)] = "v0"
		if _, err := tr.Set(k, []byte("v0")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	if seed%2 == 0 { // snapshot leaves under the iterator
		dir := filepath.Join(t.TempDir(), "snap")
		if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		tr = openSnapshotTree(t, dir)
	}
	var start, end []byte
	if r.Intn(2) == 0 {
		start = key()
	}
	if r.Intn(2) == 0 {
		end = key()
	}
	next := func(cur string, first bool) (string, bool) {
		return modelNext(model, start, end, ascending, cur, first)
	}
	it := tr.Iterator(start, end, ascending)
	defer it.Close()
	want, ok := next("", true)
	for steps := 0; ; steps++ {
		if it.Valid() != ok {
			t.Fatalf("step %d: valid %v, want %v (%q)", steps, it.Valid(), ok, want)
		}
		if !ok {
			break
		}
		if got := string(it.Key()); got != want {
			t.Fatalf("step %d: key %q, want %q", steps, got, want)
		}
		if got := string(it.Value()); got != model[want] {
			t.Fatalf("step %d: value of %q %q, want %q", steps, want, got, model[want])
		}
		cur := want
		for n := r.Intn(4); n > 0; n-- {
			k := key()
			if r.Intn(3) == 0 {
				delete(model, string(k))
				if _, err := tr.Remove(k); err != nil {
					t.Fatal(err)
				}
			} else {
				v := fmt.Sprintf("v%d", steps+1)
				model[string(k)] = v
				if _, err := tr.Set(k, []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
		}
		it.Next()
		want, ok = next(cur, false)
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	if d1, d2 := it.Domain(); !bytes.Equal(d1, start) || !bytes.Equal(d2, end) {
		t.Fatalf("Domain %q %q, want %q %q", d1, d2, start, end)
	}
}

// modelNext returns the key of model in [start, end) (a nil bound open)
// that an iterator in the direction given reaches after cur (before it,
// descending), or the first one; false when there is none.
func modelNext(model map[string]string, start, end []byte, ascending bool, cur string, first bool) (string, bool) {
	var keys []string
	for k := range model {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if !ascending {
		slices.Reverse(keys)
	}
	for _, k := range keys {
		if first || ascending && k > cur || !ascending && k < cur {
			return k, true
		}
	}
	return "", false
}
