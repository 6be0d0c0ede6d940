package memiavl_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestClosedSnapshotIsNotCorrupt: a read of a tree's snapshot after its
// release fails with snapshot.ErrClosed, which is not damage: no method,
// the snapshot writes included (they check the files they copy from),
// reports it as memiavl.ErrCorrupt, which a database takes for damage.
func TestClosedSnapshotIsNotCorrupt(t *testing.T) {
	ops := []struct {
		name string
		op   func(tr *memiavl.Tree) error
	}{
		{"Get", func(tr *memiavl.Tree) error { _, err := tr.Get([]byte("key-00001")); return err }},
		{"Set", func(tr *memiavl.Tree) error { _, err := tr.Set([]byte("zz"), []byte("x")); return err }},
		{"RootHashChecked", func(tr *memiavl.Tree) error { _, err := tr.RootHashChecked(); return err }},
		{"Export", func(tr *memiavl.Tree) error { e := tr.Export(); defer e.Close(); _, err := e.Next(); return err }},
		{"WriteSnapshot", func(tr *memiavl.Tree) error {
			return tr.WriteSnapshot(context.Background(), filepath.Join(t.TempDir(), "w"))
		}},
		{"WriteSnapshotMapped", func(tr *memiavl.Tree) error {
			_, err := tr.WriteSnapshotMapped(context.Background(), filepath.Join(t.TempDir(), "w"))
			return err
		}},
	}
	dir, _, _ := mappedTree(t, keysTree(t, 300, ""))
	for _, o := range ops {
		s, tr := openSnapshot(t, dir)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		err := o.op(tr)
		if !errors.Is(err, snapshot.ErrClosed) || errors.Is(err, memiavl.ErrCorrupt) {
			t.Errorf("%s on a tree whose snapshot was closed: %v\n  wraps ErrClosed %v, ErrCorrupt %v; want ErrClosed and not ErrCorrupt",
				o.name, err, errors.Is(err, snapshot.ErrClosed), errors.Is(err, memiavl.ErrCorrupt))
		}
	}
}
