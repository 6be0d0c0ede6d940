package snapshot

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// TestVerifyNodeVersions: Verify refuses node versions no IAVL tree
// holds, also where every hash and checksum is consistent with them (a
// file written wrong, or edited and hashed anew): a node of version 0
// (the first version is 1), and a branch older than a child (a node is
// saved with or after its children).
func TestVerifyNodeVersions(t *testing.T) {
	kA, vA := []byte("a"), []byte("1")

	// leaves of version 2 and 1 under a branch of version 1: written with
	// the branch at version 2 (the writer refuses an older one), then the
	// branch's version, its hash, the root hash and meta's checksums edited
	dir := filepath.Join(t.TempDir(), "snap")
	files := olderBranchFiles(t, dir)
	o, v := openMemAndCheck(t, files)
	if o != nil {
		t.Fatalf("Open: %v (the checksums match)", o)
	}
	if !errors.Is(v, ErrCorrupt) || !strings.Contains(v.Error(), "older than its child") {
		t.Errorf("a branch of version 1 over a leaf of version 2: Verify returned %v, want ErrCorrupt", v)
	}

	// one leaf of version 0: its hash, the root hash in meta and meta's
	// checksums made to match
	dir = filepath.Join(t.TempDir(), "snap")
	w, err := NewWriter(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AddLeaf(kA, vA, 1, nodehash.Leaf(nil, kA, vA, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	files = readDir(t, dir)
	h0 := nodehash.Leaf(nil, kA, vA, 0)
	binary.LittleEndian.PutUint64(files[FileLeaves][leafOffVersion:], 0)
	copy(files[FileLeaves][leafOffHash:], h0)
	copy(files[FileMeta][metaOffRootHash:], h0)
	fixMeta(files, true, false, true)
	o, v = openMemAndCheck(t, files)
	if o != nil {
		t.Fatalf("Open: %v (the checksums match)", o)
	}
	if !errors.Is(v, ErrCorrupt) || !strings.Contains(v.Error(), "outside [1, 1]") {
		t.Errorf("a leaf of version 0: Verify returned %v, want ErrCorrupt", v)
	}
}

// olderBranchFiles returns the files of a snapshot of version 2 whose root
// branch, of version 1, is older than its left leaf (version 2), with every
// hash and checksum consistent: written with the branch at version 2, then
// edited.
func olderBranchFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	kA, kB, vA, vB := []byte("a"), []byte("b"), []byte("1"), []byte("2")
	w, err := NewWriter(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	hA, hB := nodehash.Leaf(nil, kA, vA, 2), nodehash.Leaf(nil, kB, vB, 1)
	if err := w.AddLeaf(kA, vA, 2, hA); err != nil {
		t.Fatal(err)
	}
	if err := w.AddLeaf(kB, vB, 1, hB); err != nil {
		t.Fatal(err)
	}
	if err := w.AddBranch(1, 2, 2, nodehash.Inner(nil, 1, 2, 2, hA, hB)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	files := readDir(t, dir)
	h := nodehash.Inner(nil, 1, 2, 1, hA, hB)
	binary.LittleEndian.PutUint64(files[FileBranches][branchOffVersion:], 1)
	copy(files[FileBranches][branchOffHash:], h)
	copy(files[FileMeta][metaOffRootHash:], h)
	fixMeta(files, true, false, true)
	return files
}

// TestWriterBranchOlderThanChild: a branch older than one of its children
// is a node no IAVL tree holds (copy-on-write saves a node with or after
// its children) and Verify refuses it; the writer refuses to write one,
// node by node (AddBranch: ErrInvalidNode) and in bulk from a snapshot
// that holds one (AddSubtree: ErrCorrupt, naming the source's branch).
func TestWriterBranchOlderThanChild(t *testing.T) {
	kA, kB, vA, vB := []byte("a"), []byte("b"), []byte("1"), []byte("2")
	hA, hB := nodehash.Leaf(nil, kA, vA, 2), nodehash.Leaf(nil, kB, vB, 1)
	for _, right := range []bool{false, true} { // which child is newer
		w, err := NewWriter(filepath.Join(t.TempDir(), "snap"), 2)
		if err != nil {
			t.Fatal(err)
		}
		l1, l2 := int64(2), int64(1)
		if right {
			l1, l2 = 1, 2
		}
		if err := w.AddLeaf(kA, vA, l1, hA); err != nil {
			t.Fatal(err)
		}
		if err := w.AddLeaf(kB, vB, l2, hB); err != nil {
			t.Fatal(err)
		}
		err = w.AddBranch(1, 2, 1, nodehash.Inner(nil, 1, 2, 1, hA, hB))
		if !errors.Is(err, ErrInvalidNode) || !strings.Contains(err.Error(), "older than its child") {
			t.Errorf("newer right child %v: AddBranch of version 1 over a leaf of version 2: %v, want ErrInvalidNode", right, err)
		}
		if err := w.Finish(); err == nil {
			t.Errorf("newer right child %v: Finish after the refused branch succeeded", right)
		}
		w.Abort()
	}

	// a branch equal to its newest child's version is what an update of
	// one leaf saves
	w, err := NewWriter(filepath.Join(t.TempDir(), "snap"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AddLeaf(kA, vA, 2, hA); err != nil {
		t.Fatal(err)
	}
	if err := w.AddLeaf(kB, vB, 1, hB); err != nil {
		t.Fatal(err)
	}
	if err := w.AddBranch(1, 2, 2, nodehash.Inner(nil, 1, 2, 2, hA, hB)); err != nil {
		t.Fatalf("a branch of its newest child's version: %v", err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}

	s, err := openMem("mem", olderBranchFiles(t, filepath.Join(t.TempDir(), "src")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := copyWhole(t, s, 2)
	if err == nil {
		cs, oerr := openMem("copy", got)
		verr := oerr
		if oerr == nil {
			verr = cs.Verify()
		}
		t.Errorf("AddSubtree copied a branch older than its child (Verify of the copy: %v), want ErrCorrupt", verr)
	} else if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "older than its child") {
		t.Errorf("AddSubtree of a branch older than its child: %v, want ErrCorrupt", err)
	}
}
