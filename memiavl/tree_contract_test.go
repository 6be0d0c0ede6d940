package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// deferredThenRootHash builds a tree whose last saved version was saved
// with SaveVersionDeferHash, then changed and hashed with RootHash: the
// point after which SaveVersionDeferHash's doc allows sharing the tree.
// With empty, the change removes every key instead.
func deferredThenRootHash(t *testing.T, tr *memiavl.Tree, n int, empty bool) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("v2-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.SaveVersionDeferHash(); err != nil {
		t.Fatal(err)
	}
	// a working change after the deferred save, then RootHash
	if empty {
		for i := 0; i < n; i++ {
			if _, err := tr.Remove([]byte(fmt.Sprintf("k%05d", i))); err != nil {
				t.Fatal(err)
			}
		}
	} else if _, err := tr.Set([]byte("k00000"), []byte("working")); err != nil {
		t.Fatal(err)
	}
	_ = tr.RootHash()
}

// TestRebaseAfterDeferredHashRootHash: a Copy taken after
// SaveVersionDeferHash, a change and RootHash (which the doc allows) is
// rebased: RootHash hashed the saved version's nodes that the change made
// unreachable from the working root.
func TestRebaseAfterDeferredHashRootHash(t *testing.T) {
	ctx := context.Background()
	tr, _ := memiavl.New(memiavl.Options{})
	for i := 0; i < 300; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("k%05d", i)), []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil { // 1
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "1")
	m, err := tr.Copy().WriteSnapshotMapped(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, base := openSnapshot(t, dir)
	defer s.Close()
	rb, err := memiavl.NewRebaser(base, m)
	if err != nil {
		t.Fatal(err)
	}
	deferredThenRootHash(t, tr, 300, false) // version 2 saved deferred, RootHash run
	c := tr.Copy()
	nt, err := rb.Rebase(ctx, c)
	if err != nil {
		t.Fatalf("Rebase of a copy of version %d taken after RootHash: %v", c.Version(), err)
	}
	want := c.RootHash()
	if got := nt.RootHash(); string(got) != string(want) {
		t.Fatalf("rebased hash %X, want %X", got, want)
	}
}

// TestCopiesAfterDeferredHashConcurrent: two copies taken after RootHash
// are read on two goroutines; no node of the saved version is left for them
// to hash (the race detector reports the writes if one is).
func TestCopiesAfterDeferredHashConcurrent(t *testing.T) {
	for _, empty := range []bool{false, true} {
		t.Run(fmt.Sprint("emptied=", empty), func(t *testing.T) { copiesAfterDeferredHash(t, empty) })
	}
}

func copiesAfterDeferredHash(t *testing.T, empty bool) {
	tr, _ := memiavl.New(memiavl.Options{})
	deferredThenRootHash(t, tr, 2000, empty)
	c1, c2 := tr.Copy(), tr.Copy()
	var wg sync.WaitGroup
	hs := make([][]byte, 2)
	for i, c := range []*memiavl.Tree{c1, c2} {
		wg.Add(1)
		go func(i int, c *memiavl.Tree) {
			defer wg.Done()
			hs[i] = c.RootHash()
		}(i, c)
	}
	wg.Wait()
	if string(hs[0]) != string(hs[1]) {
		t.Fatalf("copies of one version hash %X and %X", hs[0], hs[1])
	}
}

// TestExclusiveAbsentRemove: a Remove of an absent key leaves the tree
// unchanged (Remove's doc), so in exclusive mode Copy and Export still take
// the saved tree and StartNextTouches still records, as with no change.
func TestExclusiveAbsentRemove(t *testing.T) {
	tr, _ := memiavl.New(memiavl.Options{})
	for _, k := range []string{"a", "b", "c"} {
		if _, err := tr.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr.SetExclusive(0)
	before := tr.RootHash()
	removed, err := tr.Remove([]byte("absent"))
	if err != nil || removed {
		t.Fatalf("Remove(absent) = %v, %v", removed, err)
	}
	if string(tr.RootHash()) != string(before) {
		t.Fatal("a no-op Remove changed the root hash")
	}
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		_ = tr.Copy()
	}()
	if panicked != nil {
		t.Errorf("Copy after a no-op Remove panicked: %v", panicked)
	}
	if _, err := tr.Export().Next(); err != nil && !errors.Is(err, memiavl.ErrExportDone) {
		t.Errorf("Export after a no-op Remove: %v", err)
	}
	if !tr.StartNextTouches() {
		t.Errorf("StartNextTouches refused a tree with no unsaved change")
	}
}

// TestRebaseNilTree: Rebase(ctx, nil) is an error wrapping ErrRebase, as
// NewRebaser(nil, m) is and Follows(nil) is false, and does not fail the
// Rebaser.
func TestRebaseNilTree(t *testing.T) {
	ctx := context.Background()
	tr, _ := memiavl.New(memiavl.Options{})
	if _, err := tr.Set([]byte("a"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "1")
	m, err := tr.Copy().WriteSnapshotMapped(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, base := openSnapshot(t, dir)
	defer s.Close()
	rb, err := memiavl.NewRebaser(base, m)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Follows(nil) {
		t.Fatal("Follows(nil)")
	}
	var got error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Rebase(nil) panicked: %v", r)
			}
		}()
		_, got = rb.Rebase(ctx, nil)
	}()
	if !errors.Is(got, memiavl.ErrRebase) {
		t.Fatalf("Rebase(nil) = %v, want ErrRebase", got)
	}
	nt, err := rb.Rebase(ctx, tr.Copy())
	if err != nil {
		t.Fatalf("Rebase after Rebase(nil): %v", err)
	}
	if string(nt.RootHash()) != string(tr.RootHash()) {
		t.Fatalf("rebased root %X, want %X", nt.RootHash(), tr.RootHash())
	}
}

// iteratorOnSnapshot writes a tree of 500 keys as a snapshot and returns
// the snapshot and an ascending iterator over the tree read from it.
func iteratorOnSnapshot(t *testing.T) (*snapshot.Snapshot, *memiavl.Iterator) {
	t.Helper()
	tr, _ := memiavl.New(memiavl.Options{})
	for i := 0; i < 500; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("k%04d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "1")
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, st := openSnapshot(t, dir)
	return s, st.Iterator(nil, nil, true)
}

// TestIteratorAfterSnapshotClosed: an iterator over a snapshot that is
// closed under it (used past the life of the tree's snapshot) reads no
// more: it is invalid, Key and Value are nil, and Next stops it with an
// error wrapping snapshot.ErrClosed instead of reading an unmapped region.
func TestIteratorAfterSnapshotClosed(t *testing.T) {
	s, it := iteratorOnSnapshot(t)
	defer it.Close()
	it.Next() // into the scan's read-ahead
	if !it.Valid() || string(it.Key()) != "k0001" {
		t.Fatalf("before Close: valid %v key %q", it.Valid(), it.Key())
	}
	if it.Released() {
		t.Fatal("Released before the snapshot's Close")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !it.Released() || it.Valid() || it.Key() != nil || it.Value() != nil {
		t.Fatalf("after Close: released %v valid %v key %q value %q", it.Released(), it.Valid(), it.Key(), it.Value())
	}
	it.Next()
	if it.Valid() || !errors.Is(it.Error(), snapshot.ErrClosed) {
		t.Fatalf("Next after Close: valid %v err %v", it.Valid(), it.Error())
	}
}

// TestIteratorReleasedBeforeValid: the dbm.Iterator loop (for ; Valid();
// Next() {}, then Error()) over an iterator whose snapshot closes between a
// Next and the Valid after it ends with an error wrapping
// snapshot.ErrClosed, not with a nil Error that passes a cut-short
// iteration off as complete.
func TestIteratorReleasedBeforeValid(t *testing.T) {
	s, it := iteratorOnSnapshot(t)
	defer it.Close()
	it.Next() // positioned inside the tree
	// the snapshot closes between a Next and the Valid that follows it
	// (another goroutine's Close, or an iterator kept past its view)
	s.Close()
	n := 1
	for ; it.Valid(); it.Next() {
		n++
	}
	if !errors.Is(it.Error(), snapshot.ErrClosed) {
		t.Fatalf("iteration stopped after %d of 500 keys with Error() %v", n, it.Error())
	}
}

// TestIteratorCopyKeyValue: CopyKey and CopyValue return copies of the
// current pair that outlive the snapshot, and once the snapshot is closed
// under the iterator they return nil and an error wrapping
// snapshot.ErrClosed (not a read of the unmapped region).
func TestIteratorCopyKeyValue(t *testing.T) {
	s, it := iteratorOnSnapshot(t)
	defer it.Close()
	it.Next()
	k, kerr := it.CopyKey()
	v, verr := it.CopyValue()
	if kerr != nil || verr != nil || string(k) != "k0001" || string(v) != "v" {
		t.Fatalf("CopyKey %q %v, CopyValue %q %v", k, kerr, v, verr)
	}
	if &k[0] == &it.Key()[0] || &v[0] == &it.Value()[0] {
		t.Fatal("CopyKey or CopyValue returned the iterator's own slice")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if string(k) != "k0001" || string(v) != "v" {
		t.Fatalf("copies changed with the snapshot's Close: %q %q", k, v)
	}
	k, kerr = it.CopyKey()
	v, verr = it.CopyValue()
	if k != nil || v != nil || !errors.Is(kerr, snapshot.ErrClosed) || !errors.Is(verr, snapshot.ErrClosed) {
		t.Fatalf("after Close: CopyKey %q %v, CopyValue %q %v", k, kerr, v, verr)
	}
}
