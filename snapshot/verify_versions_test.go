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
	kA, kB, vA, vB := []byte("a"), []byte("b"), []byte("1"), []byte("2")

	// leaves of version 2 under a branch of version 1: the writer takes
	// each node as given, so the file is consistent but for the versions
	dir := filepath.Join(t.TempDir(), "snap")
	w, err := NewWriter(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	hA, hB := nodehash.Leaf(nil, kA, vA, 2), nodehash.Leaf(nil, kB, vB, 1)
	for _, l := range []struct {
		k, v []byte
		ver  int64
		h    []byte
	}{{kA, vA, 2, hA}, {kB, vB, 1, hB}} {
		if err := w.AddLeaf(l.k, l.v, l.ver, l.h); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddBranch(1, 2, 1, nodehash.Inner(nil, 1, 2, 1, hA, hB)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	_, v := openAndCheck(t, dir)
	if !errors.Is(v, ErrCorrupt) || !strings.Contains(v.Error(), "older than its child") {
		t.Errorf("a branch of version 1 over a leaf of version 2: Verify returned %v, want ErrCorrupt", v)
	}

	// one leaf of version 0: its hash, the root hash in meta and meta's
	// checksums made to match
	dir = filepath.Join(t.TempDir(), "snap")
	w, err = NewWriter(dir, 1)
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
	files := readDir(t, dir)
	h0 := nodehash.Leaf(nil, kA, vA, 0)
	binary.LittleEndian.PutUint64(files[FileLeaves][leafOffVersion:], 0)
	copy(files[FileLeaves][leafOffHash:], h0)
	copy(files[FileMeta][metaOffRootHash:], h0)
	fixMeta(files, true, false, true)
	o, v := openMemAndCheck(t, files)
	if o != nil {
		t.Fatalf("Open: %v (the checksums match)", o)
	}
	if !errors.Is(v, ErrCorrupt) || !strings.Contains(v.Error(), "outside [1, 1]") {
		t.Errorf("a leaf of version 0: Verify returned %v, want ErrCorrupt", v)
	}
}
