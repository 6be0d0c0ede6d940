package memiavl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

func openSnapshot(t *testing.T, dir string) (*snapshot.Snapshot, *memiavl.Tree) {
	t.Helper()
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, tr
}

// TestRebase moves a tree onto snapshots written of its earlier versions,
// as a database's background rewrite does, and checks it against iavl
// through further changes. The snapshot the tree read from is closed
// (unmapped) right after each rebase, so a node still pointing into it
// faults.
func TestRebase(t *testing.T) {
	ctx := context.Background()
	w := newWorkload(t, 0)
	dir := t.TempDir()
	var cur *snapshot.Snapshot // the snapshot w.ours reads from, nil at first
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	steps := func(versions, ops int) {
		for v := 0; v < versions; v++ {
			for i := 0; i < ops; i++ {
				w.step()
			}
			w.save()
		}
	}
	drain := func() { // removes every key and saves
		for len(w.keys) > 0 {
			k, i := w.pickKey()
			w.remove(k)
			w.keys[i] = w.keys[len(w.keys)-1]
			w.keys = w.keys[:len(w.keys)-1]
		}
		w.save()
	}
	steps(5, 400)
	cycles := scale(15, 10)
	var copiedLeaves, copiedBranches int
	for c := 0; c < cycles; c++ {
		// versions between the tree's snapshot and the written one, and
		// between the written one and the rebased one (0 in some cycles:
		// with both 0 the tree is its old snapshot's root)
		before, after := (c+1)%4, []int{0, 1, 4}[c%3]
		if c%5 == 4 {
			drain() // an empty tree is written
		}
		steps(before, 300)
		written := w.ours.Copy()
		// the keys changed after the written version, for the rebased
		// tree's reads; without them (every fourth cycle) it descends
		if c%4 != 3 && !w.ours.StartNextTouches() {
			t.Fatalf("cycle %d: StartNextTouches refused a saved tree", c)
		}
		sdir := filepath.Join(dir, fmt.Sprint(c))
		// the write runs while the tree goes on changing, as in a database
		var m *memiavl.NodeMap
		done := make(chan error)
		go func() {
			var err error
			m, err = written.WriteSnapshotMapped(ctx, sdir)
			done <- err
		}()
		if c%5 == 2 {
			drain() // the rebased tree has no node of the written version
		}
		steps(after, 300)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if m.Version() != written.Version() {
			t.Fatalf("map of version %d, wrote %d", m.Version(), written.Version())
		}
		s, base := openSnapshot(t, sdir)
		rebaser, err := memiavl.NewRebaser(base, m)
		if err != nil {
			t.Fatal(err)
		}
		// rebase a few times as the tree goes on: each copies only the
		// nodes created since the last
		var rb *memiavl.Tree
		for round := 0; round < 1+c%3; round++ {
			if round > 0 {
				steps(1+round%2, 200)
			}
			if rb, err = rebaser.Rebase(ctx, w.ours.Copy()); err != nil {
				t.Fatalf("cycle %d round %d: %v", c, round, err)
			}
			if rb.Snapshot() != s || rebaser.Version() != w.ours.Version() {
				t.Fatalf("cycle %d: rebased tree reads another snapshot or has another version", c)
			}
			sameContents(t, w.ours, rb)
			ours := w.ours
			w.ours = rb
			w.compareGets(100) // removed keys too, which the new snapshot may hold
			w.ours = ours
		}
		l, b := memiavl.RebaserCopies(rebaser)
		copiedLeaves, copiedBranches = copiedLeaves+l, copiedBranches+b
		w.ours = rb
		if cur != nil {
			cur.Close()
		}
		cur = s
		w.sameAsRef(t, rb)
		steps(2, 300)
		w.compareGets(200)
		if err := w.ours.Check(); err != nil {
			t.Fatalf("cycle %d: %v", c, err)
		}
	}
	// later leaves are shared unless their bytes lie in the old snapshot
	// (here: set with the caller's bytes, so none is copied); the branches
	// above them are copied
	t.Logf("copied %d leaves and %d branches", copiedLeaves, copiedBranches)
	if copiedBranches == 0 || copiedLeaves > copiedBranches/10 {
		t.Fatalf("copied %d leaves and %d branches", copiedLeaves, copiedBranches)
	}
}

// sameAsRef compares tr's pairs with the iavl tree's, reading every key
// and value.
func (w *workload) sameAsRef(t *testing.T, tr *memiavl.Tree) {
	t.Helper()
	it, err := w.ref.Iterator(nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	ours := tr.Iterator(nil, nil, true)
	n := 0
	for ; it.Valid(); it.Next() {
		if !ours.Valid() || !bytes.Equal(ours.Key(), it.Key()) || !bytes.Equal(ours.Value(), it.Value()) {
			t.Fatalf("pair %d differs from iavl", n)
		}
		ours.Next()
		n++
	}
	if ours.Valid() || ours.Error() != nil {
		t.Fatalf("more pairs than iavl's %d, or error %v", n, ours.Error())
	}
}

// TestRebaseRejectsForeignTrees: a map only moves later versions of the
// tree it was written from onto the snapshot it wrote.
func TestRebaseRejectsForeignTrees(t *testing.T) {
	ctx := context.Background()
	w := newWorkload(t, 0)
	save := func(ops int) {
		for i := 0; i < ops; i++ {
			w.step()
		}
		w.save()
	}
	save(300)
	save(300)
	fork := w.ours.Copy() // version 2
	save(300)
	dir := t.TempDir()
	m, err := w.ours.Copy().WriteSnapshotMapped(ctx, filepath.Join(dir, "3"))
	if err != nil {
		t.Fatal(err)
	}
	_, base := openSnapshot(t, filepath.Join(dir, "3"))
	save(300)
	if err := w.ours.Copy().WriteSnapshot(ctx, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	_, other := openSnapshot(t, filepath.Join(dir, "other"))
	for name, b := range map[string]*memiavl.Tree{"nil base": nil, "base of a later version": other} {
		if _, err := memiavl.NewRebaser(b, m); !errors.Is(err, memiavl.ErrRebase) {
			t.Errorf("%s: NewRebaser returned %v, want ErrRebase", name, err)
		}
	}
	if _, err := memiavl.NewRebaser(base, nil); !errors.Is(err, memiavl.ErrRebase) {
		t.Errorf("nil map: NewRebaser returned %v, want ErrRebase", err)
	}

	older := fork.Copy()
	for i := 0; i < 50; i++ { // a diverged version 3 and 4
		if _, err := fork.Set([]byte(fmt.Sprintf("fork-%d", i)), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if i%25 == 24 {
			if _, _, err := fork.SaveVersion(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, tree := range map[string]*memiavl.Tree{
		"diverged lineage":         fork,
		"older version":            older,
		"tree on another snapshot": base,
	} {
		rb, err := memiavl.NewRebaser(base, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Rebase(ctx, tree); !errors.Is(err, memiavl.ErrRebase) {
			t.Errorf("%s: Rebase returned %v, want ErrRebase", name, err)
		}
		// a failed Rebaser stays failed
		if _, err := rb.Rebase(ctx, w.ours.Copy()); !errors.Is(err, memiavl.ErrRebase) {
			t.Errorf("%s: Rebase after a failure returned %v, want ErrRebase", name, err)
		}
	}
	rb, err := memiavl.NewRebaser(base, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rb.Rebase(ctx, w.ours.Copy())
	if err != nil {
		t.Fatal(err)
	}
	sameContents(t, w.ours, got)
	// versions older than the last rebased one are refused
	if _, err := rb.Rebase(ctx, older); !errors.Is(err, memiavl.ErrRebase) {
		t.Errorf("older than the last rebase: Rebase returned %v, want ErrRebase", err)
	}
}
