package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestRebaseRejectsBaseOfAnotherTree: a base of the map's version that is
// not the snapshot the map's write produced (here, the snapshot of another
// tree with the same keys and shape) does not fit the map: the nodes the
// rebase maps into it have other hashes, and Rebase fails with ErrRebase
// instead of returning a tree whose root hash is the rebased tree's but
// whose unchanged keys read the other tree's values.
func TestRebaseRejectsBaseOfAnotherTree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fill := func(value string) *memiavl.Tree {
		tr, err := memiavl.New(memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			if _, err := tr.Set([]byte(fmt.Sprintf("k%02d", i)), []byte(value)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := fill("a"), fill("b")
	m, err := a.Copy().WriteSnapshotMapped(ctx, filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy().WriteSnapshot(ctx, filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	s, foreign := openSnapshot(t, filepath.Join(dir, "b"))
	defer s.Close()
	// a later version of a: its root and one path are copied, the other
	// subtrees are mapped into the base
	if _, err := a.Set([]byte("k00"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	rb, err := memiavl.NewRebaser(foreign, m)
	if err != nil {
		return // refused up front: fine
	}
	got, err := rb.Rebase(ctx, a.Copy())
	if errors.Is(err, memiavl.ErrRebase) {
		return
	}
	v, _ := got.Get([]byte("k10"))
	t.Fatalf("Rebase onto another tree's snapshot: error %v, and k10 reads %q (want %q)", err, v, "a")
}
