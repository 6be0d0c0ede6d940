package memiavl

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-6dfbb450/memiavl/snapshot"
)

func touchKey(i int) []byte {
	var b [12]byte
	copy(b[:], "key-")
	binary.BigEndian.PutUint64(b[4:], uint64(i))
	return b[:]
}

// TestTouchSetReportsEveryKey: every added key is reported across the
// filters added as the set grows, a key added twice takes no more room,
// and keys never added are rarely reported.
func TestTouchSetReportsEveryKey(t *testing.T) {
	s := newTouchSet(7, 0)
	const n = 400_000 // past the first three filters (4,096, 32,768 and 262,144 keys)
	for i := 0; i < n; i++ {
		s.add(touchHash(touchKey(i)))
	}
	for i := 0; i < n; i += 1000 {
		s.add(touchHash(touchKey(i))) // again
	}
	if got := len(*s.chain.Load()); got != 4 {
		t.Fatalf("%d filters for %d keys, want 4", got, n)
	}
	if k := s.keys(); k > n+n/10 || k < n-n/33 { // a key taken for one added already is not counted
		t.Fatalf("%d keys counted for %d added, some twice", k, n)
	}
	for i := 0; i < n; i++ {
		if !s.mayContain(touchHash(touchKey(i))) {
			t.Fatalf("key %d added but not reported", i)
		}
	}
	fp := 0
	for i := n; i < 2*n; i++ {
		if s.mayContain(touchHash(touchKey(i))) {
			fp++
		}
	}
	// four filters, none past its capacity: about 1% in all
	rate := float64(fp) / n
	t.Logf("%.2f%% of keys never added are reported", 100*rate)
	if rate > 0.03 {
		t.Fatalf("%.2f%% of keys never added are reported", 100*rate)
	}
	// the next set is sized by this one: one filter holds as many keys
	next := newTouchSet(8, s.keys())
	if c := (*next.chain.Load())[0].capacity; c < n {
		t.Fatalf("next set's filter holds %d keys, want at least %d", c, n)
	}
}

// TestTouchSetFull: the last filter takes what is left of the memory bound,
// and past the bound a set reports every key.
func TestTouchSetFull(t *testing.T) {
	defer func(w int) { maxTouchWords = w }(maxTouchWords)
	// room for the first filter and one of twice its size, not 8 times
	maxTouchWords = minTouchKeys / 4 * 3
	s := newTouchSet(0, 0)
	i := 0
	for ; i < 8*minTouchKeys && !s.full.Load(); i++ {
		s.add(touchHash(touchKey(i)))
	}
	// a few keys are taken for ones added already, and take no room
	if i < 3*minTouchKeys*95/100 || !s.full.Load() {
		t.Fatalf("full after %d keys, or not at all (%v)", i, s.full.Load())
	}
	chain := *s.chain.Load()
	words := 0
	for _, b := range chain {
		words += len(b.words)
	}
	if len(chain) != 2 || chain[1].capacity != 2*minTouchKeys || words > maxTouchWords {
		t.Fatalf("%d filters, the second of %d keys, %d words in all", len(chain), chain[len(chain)-1].capacity, words)
	}
	for i := 0; i < 1000; i++ {
		if !s.mayContain(touchHash(touchKey(1<<40 + i))) {
			t.Fatal("a full set reports a key as unchanged")
		}
	}
}

// TestTouchSetConcurrentReaders: readers asking while a writer adds (and
// grows the set) see every key added before the count they read. Run with
// -race.
func TestTouchSetConcurrentReaders(t *testing.T) {
	s := newTouchSet(0, 0)
	n := 200_000
	if testing.Short() {
		n = 100_000
	}
	var committed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan int, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for {
				c := committed.Load()
				for i := int64(r); i < c; i += 97 {
					if !s.mayContain(touchHash(touchKey(int(i)))) {
						errs <- int(i)
						return
					}
				}
				if c == int64(n) {
					return
				}
			}
		}(r)
	}
	for i := 0; i < n; i++ {
		s.add(touchHash(touchKey(i)))
		if i%1000 == 999 || i == n-1 {
			committed.Store(int64(i + 1))
		}
	}
	wg.Wait()
	close(errs)
	for i := range errs {
		t.Fatalf("key %d added before the reader's count but not reported", i)
	}
}

// TestStartNextTouches: the record starts only on a saved tree, and a
// rebase takes it as the new tree's touched set only when it covers the
// changes since the new snapshot.
func TestStartNextTouches(t *testing.T) {
	tr, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.StartNextTouches() || tr.next == nil || tr.next.from != 0 {
		t.Fatal("StartNextTouches refused a new tree")
	}
	if _, err := tr.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if !tr.next.mayContain(touchHash([]byte("a"))) {
		t.Fatal("a change after the start is not recorded")
	}
	if tr.StartNextTouches() || tr.next != nil {
		t.Fatal("StartNextTouches started with an unsaved change")
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	if !tr.StartNextTouches() || tr.next.from != 1 {
		t.Fatal("StartNextTouches refused a saved tree")
	}
	if _, err := tr.Remove([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if c := tr.Copy(); c.next != tr.next {
		t.Fatal("a copy does not share the record")
	}
	if !tr.next.mayContain(touchHash([]byte("a"))) {
		t.Fatal("a removal is not recorded")
	}
}

// TestRebaseAdoptsOwnLineFilter: a rebased tree reads unchanged keys
// straight from the new snapshot (its filter of changed keys) only when the
// snapshot holds the tree's own version at which the filter started. Rebased
// onto the snapshot of a copy that changed on its own (taken before
// StartNextTouches, then written at the same version), every node still
// checks by hash, but the filter misses the copy's changes: the rebased tree
// must read by descending, or a key only the copy has would be found.
func TestRebaseAdoptsOwnLineFilter(t *testing.T) {
	for _, diverge := range []bool{false, true} {
		ctx := context.Background()
		b, _ := New(Options{})
		for _, k := range []string{"a", "c"} {
			if _, err := b.Set([]byte(k), []byte("v"+k)); err != nil {
				t.Fatal(err)
			}
		}
		mustSave := func(tr *Tree) {
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
		}
		mustSave(b) // 1
		written := b.Copy()
		if diverge {
			mustSave(b) // 2, no change
		}
		if !b.StartNextTouches() {
			t.Fatal("StartNextTouches refused a saved tree")
		}
		if diverge {
			if _, err := written.Set([]byte("d"), []byte("vd")); err != nil {
				t.Fatal(err)
			}
			mustSave(written) // 2, with d
		}
		dir := filepath.Join(t.TempDir(), "snap")
		m, err := written.WriteSnapshotMapped(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Set([]byte("e"), []byte("ve")); err != nil {
			t.Fatal(err)
		}
		mustSave(b)
		s, err := snapshot.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		base, err := NewFromSnapshot(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := NewRebaser(base, m)
		if err != nil {
			t.Fatal(err)
		}
		nt, err := rb.Rebase(ctx, b)
		if err != nil {
			t.Fatalf("diverge=%v: %v", diverge, err)
		}
		if got, want := nt.touched != nil, !diverge; got != want {
			t.Errorf("diverge=%v: the rebased tree reads unchanged keys from the snapshot: %v, want %v", diverge, got, want)
		}
		for k, want := range map[string]string{"a": "va", "c": "vc", "d": "", "e": "ve"} {
			v, err := nt.Get([]byte(k))
			if err != nil || !bytes.Equal(v, []byte(want)) && !(want == "" && v == nil) {
				t.Errorf("diverge=%v: Get(%q) = %q, %v; want %q", diverge, k, v, err, want)
			}
		}
	}
}
