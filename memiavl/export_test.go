package memiavl_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cosmos/iavl"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// exportAll drains an exporter of this package.
func exportAll(t *testing.T, e *memiavl.Exporter) []*memiavl.ExportNode {
	t.Helper()
	defer e.Close()
	var out []*memiavl.ExportNode
	for {
		n, err := e.Next()
		if errors.Is(err, memiavl.ErrExportDone) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
}

// exportIAVL drains cosmos/iavl's exporter of version.
func exportIAVL(t *testing.T, tr *iavl.MutableTree, version int64) []*memiavl.ExportNode {
	t.Helper()
	it, err := tr.GetImmutable(version)
	if err != nil {
		t.Fatal(err)
	}
	e, err := it.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out []*memiavl.ExportNode
	for {
		n, err := e.Next()
		if errors.Is(err, iavl.ErrorExportDone) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, (*memiavl.ExportNode)(n))
	}
}

// importTree imports nodes into a snapshot in dir and opens it as a tree.
func importTree(t *testing.T, dir string, version int64, nodes []*memiavl.ExportNode) *memiavl.Tree {
	t.Helper()
	im, err := memiavl.NewImporter(dir, version)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	for i, n := range nodes {
		if err := im.Add(n); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	if err := im.Commit(); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.RootHash(), im.RootHash()) {
		t.Fatalf("snapshot root %X, importer says %X", s.RootHash(), im.RootHash())
	}
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// importIAVL imports nodes into a new cosmos/iavl tree at version.
func importIAVL(t *testing.T, version int64, nodes []*memiavl.ExportNode) *iavl.MutableTree {
	t.Helper()
	tr := newIAVL(t, 0)
	im, err := tr.Import(version)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	for i, n := range nodes {
		if err := im.Add((*iavl.ExportNode)(n)); err != nil {
			t.Fatalf("iavl import of node %d: %v", i, err)
		}
	}
	if err := im.Commit(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func sameNodes(t *testing.T, got, want []*memiavl.ExportNode) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d nodes, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			g.Version != w.Version || g.Height != w.Height {
			t.Fatalf("node %d: %+v, want %+v", i, g, w)
		}
	}
}

// sameAsIAVL compares the contents and hash of tr with an iavl tree.
func sameAsIAVL(t *testing.T, tr *memiavl.Tree, ref *iavl.MutableTree) {
	t.Helper()
	if !bytes.Equal(tr.RootHash(), ref.Hash()) {
		t.Fatalf("root hash %X, iavl %X", tr.RootHash(), ref.Hash())
	}
	if tr.Version() != ref.Version() {
		t.Fatalf("version %d, iavl %d", tr.Version(), ref.Version())
	}
	it := tr.Iterator(nil, nil, true)
	rit, err := ref.Iterator(nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rit.Close()
	n := 0
	for ; rit.Valid(); rit.Next() {
		if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
			t.Fatalf("pair %d differs: iavl has %X", n, rit.Key())
		}
		it.Next()
		n++
	}
	if it.Valid() || it.Error() != nil {
		t.Fatalf("extra pair or error after %d pairs: %v", n, it.Error())
	}
}

func TestExportImportAgainstIAVL(t *testing.T) {
	sizes := []int{0, 1, 2, 3, 7, 600}
	if !testing.Short() || *fullRun {
		sizes = append(sizes, 30000)
	}
	for _, initial := range []int64{0, 100} {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("initial=%d/size=%d", initial, n), func(t *testing.T) {
				w := newWorkload(t, initial)
				for len(w.keys) < n {
					for i := 0; i < 2000 && len(w.keys) < n; i++ {
						w.step()
					}
					w.save()
				}
				w.save()
				if n >= 3 {
					// continue on a snapshot so the export mixes mapped and
					// in-memory nodes
					w.ours = reopen(t, w.ours, filepath.Join(t.TempDir(), "base"))
					for i := 0; i < n/10+2; i++ {
						w.step()
					}
					w.save()
				}
				// keep a working change that must not be exported
				if _, err := w.ours.Set([]byte("unsaved"), []byte("x")); err != nil {
					t.Fatal(err)
				}
				v := w.ours.Version()

				ours := exportAll(t, w.ours.Export())
				theirs := exportIAVL(t, w.ref, v)
				sameNodes(t, ours, theirs)
				if n == 0 && len(ours) != 0 {
					t.Fatalf("empty tree exported %d nodes", len(ours))
				}

				// iavl's stream through our importer
				imported := importTree(t, filepath.Join(t.TempDir(), "imported"), v, theirs)
				sameAsIAVL(t, imported, w.ref)
				if err := imported.Check(); err != nil {
					t.Fatal(err)
				}
				// and it exports the same stream again
				sameNodes(t, exportAll(t, imported.Export()), theirs)

				// our stream through iavl's importer
				back := importIAVL(t, v, ours)
				sameAsIAVL(t, w.ours.Copy(), back)
			})
		}
	}
}

func TestExportIsStableWhileTreeChanges(t *testing.T) {
	w := newWorkload(t, 0)
	for i := 0; i < 300; i++ {
		w.step()
	}
	w.save()
	want := exportAll(t, w.ours.Export())
	e := w.ours.Export()
	defer e.Close()
	var got []*memiavl.ExportNode
	for i := 0; ; i++ {
		n, err := e.Next()
		if errors.Is(err, memiavl.ErrExportDone) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if i%7 == 0 {
			w.step() // mutate and save the tree during the export
			w.save()
		}
	}
	sameNodes(t, got, want)
	if _, err := e.Next(); !errors.Is(err, memiavl.ErrExportDone) {
		t.Fatalf("Next after the end: %v", err)
	}
}

func TestExportClose(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := tr.Set([]byte{byte(i)}, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	e := tr.Export()
	if _, err := e.Next(); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e.Close()
	if _, err := e.Next(); !errors.Is(err, memiavl.ErrExportDone) {
		t.Fatalf("Next after Close: %v", err)
	}
	// an unsaved tree exports as empty
	fresh, _ := memiavl.New(memiavl.Options{})
	if _, err := fresh.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if nodes := exportAll(t, fresh.Export()); len(nodes) != 0 {
		t.Fatalf("unsaved tree exported %d nodes", len(nodes))
	}
}

func TestExportAllocations(t *testing.T) {
	w := newWorkload(t, 0)
	for i := 0; i < 500; i++ {
		w.set(w.gen.Key(), w.gen.Value(32))
	}
	w.save()
	tr := reopen(t, w.ours, filepath.Join(t.TempDir(), "s"))
	nodes := 2*tr.Size() - 1
	allocs := testing.AllocsPerRun(5, func() {
		e := tr.Export()
		for {
			if _, err := e.Next(); err != nil {
				break
			}
		}
	})
	// one ExportNode per node plus the exporter itself: keys and values are
	// not copied out of the snapshot
	if allocs > float64(nodes)+8 {
		t.Fatalf("%.0f allocations to export %d nodes", allocs, nodes)
	}
}
