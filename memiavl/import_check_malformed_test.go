package memiavl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestImportRejectsNewerRightChild: the importer refuses an inner node
// whose right child is newer than it, as it refuses a newer left child: such
// a stream is no IAVL tree at the import version (a node is rewritten with
// every change below it), and the snapshot it would give fails Check.
func TestImportRejectsNewerRightChild(t *testing.T) {
	for _, tc := range []struct {
		name        string
		left, right int64
	}{
		{"right newer", 1, 2},
		{"left newer", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tree")
			im, err := NewImporter(dir, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			nodes := []*ExportNode{
				{Key: []byte("a"), Value: []byte("va"), Version: tc.left},
				{Key: []byte("b"), Value: []byte("vb"), Version: tc.right},
				{Key: []byte("b"), Version: 1, Height: 1},
			}
			var first error
			for _, n := range nodes {
				if first = im.Add(n); first != nil {
					break
				}
			}
			if first == nil {
				first = im.Commit()
			}
			if !errors.Is(first, ErrImport) {
				t.Fatalf("inner node of version 1 over children of versions %d and %d: %v, want an error wrapping ErrImport", tc.left, tc.right, first)
			}
			if err := im.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("refused import left %s: %v", dir, err)
			}
		})
	}
}

// TestCheckRejectsMalformedTrees: Check reports, as ErrCorrupt, a
// tree whose leaves are out of key order (the inner key being the right
// subtree's smallest key, heights and sizes right) and a node of version 0.
func TestCheckRejectsMalformedTrees(t *testing.T) {
	inner := func(l, r *node) *node {
		n := &node{height: 1, size: 2, version: 1, left: memRef(l), right: memRef(r)}
		n.setKey(r.key())
		return n
	}
	tree := func(root *node) *Tree {
		return &Tree{root: memRef(root), saved: memRef(root), version: 1}
	}
	// the sound shape first, so that only the damage below fails
	good := tree(inner(newLeaf([]byte("a"), []byte("1"), 1), newLeaf([]byte("b"), []byte("2"), 1)))
	if err := good.Check(); err != nil {
		t.Fatalf("sound tree: %v", err)
	}
	for name, tr := range map[string]*Tree{
		"leaves out of order": tree(inner(newLeaf([]byte("b"), []byte("2"), 1), newLeaf([]byte("a"), []byte("1"), 1))),
		"leaf of version 0":   tree(inner(newLeaf([]byte("a"), []byte("1"), 0), newLeaf([]byte("b"), []byte("2"), 1))),
		"root of version 0":   tree(newLeaf([]byte("a"), []byte("1"), 0)),
	} {
		if err := tr.Check(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Check = %v, want an error wrapping ErrCorrupt", name, err)
		}
	}
}
