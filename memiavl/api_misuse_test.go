package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestWriteSnapshotCancelledSmallTree: a write whose ctx is cancelled
// returns an error wrapping context.Canceled and leaves nothing at the
// target ("Cancelling ctx aborts the write and removes the partial files")
// also for an in-memory tree too small for the walk's periodic checks of
// ctx (every 4096 nodes).
func TestWriteSnapshotCancelledSmallTree(t *testing.T) {
	for _, n := range []int{0, 1, 100} {
		tr, err := memiavl.New(memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, err := tr.Set([]byte(fmt.Sprintf("k%05d", i)), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for name, write := range map[string]func(dir string) error{
			"WriteSnapshot": func(dir string) error { return tr.Copy().WriteSnapshot(ctx, dir) },
			"WriteSnapshotMapped": func(dir string) error {
				_, err := tr.Copy().WriteSnapshotMapped(ctx, dir)
				return err
			},
		} {
			dir := filepath.Join(t.TempDir(), "snap")
			err := write(dir)
			_, serr := os.Stat(dir)
			if !errors.Is(err, context.Canceled) || !os.IsNotExist(serr) {
				t.Errorf("%s of %d keys with a cancelled ctx: err %v, target stat %v; want context.Canceled and no target",
					name, n, err, serr)
			}
		}
	}
}

// TestNewFromSnapshotNil: NewFromSnapshot of a nil snapshot is an error, as
// the package's other constructors refuse a nil argument, not a panic.
func TestNewFromSnapshotNil(t *testing.T) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
				t.Errorf("NewFromSnapshot(nil) panicked: %v", r)
			}
		}()
		var tr *memiavl.Tree
		tr, err = memiavl.NewFromSnapshot(nil, memiavl.Options{})
		if err == nil {
			t.Errorf("NewFromSnapshot(nil) returned a tree (%v) and no error", tr != nil)
		}
	}()
}

// TestTreeOnClosedSnapshot: every error-returning Tree method on a tree
// whose snapshot was closed (a tree used past its snapshot's life) returns
// an error wrapping snapshot.ErrClosed, never a panic and never a result
// read from the released mapping (Tree doc: "The calls that return an error
// report a damaged snapshot ... instead of faulting"; persisted.go
// corruptFrom maps a read after release to snapshot.ErrClosed).
func TestTreeOnClosedSnapshot(t *testing.T) {
	ops := map[string]func(tr *memiavl.Tree) error{
		"Get":      func(tr *memiavl.Tree) error { _, err := tr.Get([]byte("k0000")); return err },
		"GetZero":  func(tr *memiavl.Tree) error { _, err := tr.GetZeroCopy([]byte("k0000")); return err },
		"Has":      func(tr *memiavl.Tree) error { _, err := tr.Has([]byte("k0000")); return err },
		"GetWI":    func(tr *memiavl.Tree) error { _, _, err := tr.GetWithIndex([]byte("k0000")); return err },
		"GetBI":    func(tr *memiavl.Tree) error { _, _, err := tr.GetByIndex(0); return err },
		"Set":      func(tr *memiavl.Tree) error { _, err := tr.Set([]byte("zz"), []byte("x")); return err },
		"Remove":   func(tr *memiavl.Tree) error { _, err := tr.Remove([]byte("k0000")); return err },
		"RootHash": func(tr *memiavl.Tree) error { _, err := tr.RootHashChecked(); return err },
		"Compute":  func(tr *memiavl.Tree) error { return tr.ComputeHashes() },
		"Save":     func(tr *memiavl.Tree) error { _, _, err := tr.SaveVersion(); return err },
		"Export":   func(tr *memiavl.Tree) error { e := tr.Export(); defer e.Close(); _, err := e.Next(); return err },
		"Write": func(tr *memiavl.Tree) error {
			return tr.WriteSnapshot(context.Background(), filepath.Join(t.TempDir(), "w"))
		},
		"Proof":    func(tr *memiavl.Tree) error { _, err := tr.GetMembershipProof([]byte("k0000")); return err },
		"NonProof": func(tr *memiavl.Tree) error { _, err := tr.GetNonMembershipProof([]byte("k00001")); return err },
		"Check":    func(tr *memiavl.Tree) error { return tr.Check() },
		"Iterate": func(tr *memiavl.Tree) error {
			it := tr.Iterator(nil, nil, true)
			defer it.Close()
			for ; it.Valid(); it.Next() {
			}
			return it.Error()
		},
		"IterDesc": func(tr *memiavl.Tree) error {
			it := tr.Iterator(nil, nil, false)
			defer it.Close()
			for ; it.Valid(); it.Next() {
			}
			return it.Error()
		},
		"CopyGet":   func(tr *memiavl.Tree) error { _, err := tr.Copy().Get([]byte("k0000")); return err },
		"SizeCheck": func(tr *memiavl.Tree) error { _, err := tr.SizeChecked(); return err },
	}
	for _, n := range []int{2, 300} {
		src, _ := memiavl.New(memiavl.Options{})
		for i := 0; i < n; i++ {
			src.Set([]byte(fmt.Sprintf("k%04d", i)), []byte("v"))
		}
		if _, _, err := src.SaveVersion(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "s")
		if err := src.WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		for name, op := range ops {
			s, tr := openSnapshot(t, dir)
			s.Close()
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("n=%d %s on a closed snapshot panicked: %v", n, name, r)
					}
				}()
				err = op(tr)
			}()
			if !errors.Is(err, snapshot.ErrClosed) {
				t.Errorf("n=%d %s on a closed snapshot: %v, want snapshot.ErrClosed", n, name, err)
			}
		}
	}
}
