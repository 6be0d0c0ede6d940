package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// copyWhole writes a snapshot at version of the whole tree of s with one
// AddSubtree, and returns its files or the first error.
func copyWhole(t *testing.T, s *Snapshot, version int64) (map[string][]byte, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "copy")
	w, err := NewWriter(dir, version)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if root, ok := s.Root(); ok {
		if err := w.AddSubtree(s, root); err != nil {
			return nil, err
		}
	}
	if err := w.Finish(); err != nil {
		return nil, err
	}
	return readDir(t, dir), nil
}

// TestAddSubtree copies every subtree of a snapshot on its own, and whole
// snapshots of random shapes: a whole copy gives the source's bytes, and a
// subtree copied next to node-by-node leaves verifies.
func TestAddSubtree(t *testing.T) {
	r := testutil.Rand(t)
	for _, n := range []int{1, 2, 3, 7, 100, 1000} {
		keys, values := sortedKVs(r, n)
		dir := filepath.Join(t.TempDir(), fmt.Sprint(n))
		writeTree(t, dir, r.Int63(), 9, true, keys, values)
		orig := readDir(t, dir)
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := copyWhole(t, s, 9)
		if err != nil {
			t.Fatalf("%d leaves: %v", n, err)
		}
		for _, name := range allFiles {
			if !bytes.Equal(got[name], orig[name]) {
				t.Fatalf("%d leaves: %s differs from the source's", n, name)
			}
		}
		newest := int64(0)
		for i := uint64(0); i < s.LeafCount(); i++ {
			newest = max(newest, s.LeafVersion(i))
		}
		for i := uint64(0); i < s.BranchCount(); i++ {
			newest = max(newest, s.BranchVersion(i))
		}
		if newest > 0 {
			if _, err := copyWhole(t, s, newest-1); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d leaves: copy into version %d: %v, want ErrCorrupt for the nodes of %d", n, newest-1, err, newest)
			}
		}

		// every branch's subtree, then the leaf after it, then a
		// parent: AddSubtree leaves the writer where the nodes would
		for i := uint64(0); i < s.BranchCount(); i++ {
			if s.BranchCount() > 40 && r.Intn(int(s.BranchCount())/40) != 0 {
				continue // a sample of the large trees' branches
			}
			f, _, e, err := s.branchLayout(i)
			if err != nil {
				t.Fatal(err)
			}
			if e == s.LeafCount() {
				continue // no leaf after it
			}
			sub := filepath.Join(t.TempDir(), "sub")
			w, err := NewWriter(sub, 9)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AddSubtree(s, BranchRef(i)); err != nil {
				t.Fatalf("branch %d: %v", i, err)
			}
			k, v, _ := s.LeafKV(e)
			if err := w.AddLeaf(k, v, s.LeafVersion(e), s.LeafHash(e)); err != nil {
				t.Fatalf("branch %d: leaf after: %v", i, err)
			}
			// the parent's hash is not checked by the writer
			if h := s.BranchHeight(i); h <= 1 {
				if err := w.AddBranch(h+1, int64(e-f+1), 9, s.BranchHash(i)); err != nil {
					t.Fatalf("branch %d: parent: %v", i, err)
				}
			}
			if err := w.AddSubtree(s, LeafRef(f)); err == nil || !errors.Is(err, ErrKeyOrder) {
				t.Fatalf("branch %d: its first leaf again: %v, want ErrKeyOrder", i, err)
			}
			w.Abort()
		}
		s.Close()
	}
}

// TestAddSubtreeCorrupt copies small snapshots with every byte of their
// leaves, branches and kvs changed (a sample of them with -short):
// AddSubtree must not panic, and a copy that verifies must be the pristine
// snapshot, never another tree.
func TestAddSubtreeCorrupt(t *testing.T) {
	r := testutil.Rand(t)
	for _, random := range []bool{false, true} {
		orig := smallSnapshot(t, random)
		n, errs := 0, 0
		for _, name := range []string{FileLeaves, FileBranches, FileKVs} {
			for off := range orig[name] {
				if testing.Short() && r.Intn(16) != 0 {
					continue
				}
				for _, mut := range byteMutations[:2] {
					files := map[string][]byte{}
					for k, v := range orig {
						files[k] = v
					}
					files[name] = bytes.Clone(orig[name])
					files[name][off] = mut(files[name][off])
					s, err := openMem("mem", files)
					if err != nil {
						t.Fatal(err)
					}
					n++
					got, err := copyWhole(t, s, 9)
					if err != nil {
						if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrKeyOrder) {
							t.Fatalf("%s byte %d: %v", name, off, err)
						}
						errs++
						continue
					}
					c, err := openMem("copy", got)
					if err != nil {
						t.Fatalf("%s byte %d: the copy does not open: %v", name, off, err)
					}
					if c.Verify() != nil {
						continue // the damage was copied, as a node-by-node copy does
					}
					for _, f := range allFiles[1:] {
						if !bytes.Equal(got[f], orig[f]) {
							t.Fatalf("%s byte %d: the copy verifies but its %s differs from the pristine one", name, off, f)
						}
					}
				}
			}
		}
		t.Logf("random=%v: %d mutations, %d refused", random, n, errs)
	}
}

// TestAddSubtreeChecksTreeFields changes one field that makes the tree at
// a time: the copy must fail with ErrCorrupt, as a node-by-node copy would.
func TestAddSubtreeChecksTreeFields(t *testing.T) {
	orig := smallSnapshot(t, true)
	s0, err := openMem("mem", orig)
	if err != nil {
		t.Fatal(err)
	}
	root := s0.BranchCount() - 1
	cases := []struct {
		name string
		file string
		off  uint64
		val  func(old uint64) uint64
		size int // bytes of the field
	}{
		{"root first leaf", FileBranches, root*RecordSize + branchOffFirstLeaf, func(v uint64) uint64 { return v + 1 }, 5},
		{"root key leaf", FileBranches, root*RecordSize + branchOffKeyLeaf, func(v uint64) uint64 { return v + 1 }, 5},
		{"inner key leaf", FileBranches, 0*RecordSize + branchOffKeyLeaf, func(v uint64) uint64 { return v + 1 }, 5},
		{"inner size", FileBranches, 1*RecordSize + branchOffSize, func(v uint64) uint64 { return v + 1 }, 5},
		{"root height", FileBranches, root*RecordSize + branchOffHeight, func(v uint64) uint64 { return v + 1 }, 1},
		{"inner height", FileBranches, 0*RecordSize + branchOffHeight, func(v uint64) uint64 { return v + 1 }, 1},
		{"branch version", FileBranches, 0*RecordSize + branchOffVersion, func(uint64) uint64 { return 10 }, 8},
		{"leaf version", FileLeaves, 3*RecordSize + leafOffVersion, func(uint64) uint64 { return 1 << 63 }, 8},
		{"leaf kvs offset", FileLeaves, 2*RecordSize + leafOffKVOff, func(v uint64) uint64 { return v + 1 }, 8},
		{"first leaf kvs offset", FileLeaves, leafOffKVOff, func(uint64) uint64 { return 0 }, 8},
		{"leaf key length", FileLeaves, 2*RecordSize + leafOffKeyLen, func(v uint64) uint64 { return v - 1 }, 4},
		{"leaf value length", FileLeaves, 6*RecordSize + leafOffValLen, func(v uint64) uint64 { return v + 1000 }, 4},
		{"entry header", FileKVs, 0, func(v uint64) uint64 { return v + 1 }, 4},
	}
	for _, c := range cases {
		files := map[string][]byte{}
		for k, v := range orig {
			files[k] = v
		}
		b := bytes.Clone(orig[c.file])
		var field [8]byte
		copy(field[:c.size], b[c.off:])
		v := c.val(binary.LittleEndian.Uint64(field[:]))
		binary.LittleEndian.PutUint64(field[:], v)
		copy(b[c.off:c.off+uint64(c.size)], field[:c.size])
		files[c.file] = b
		s, err := openMem("mem", files)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := copyWhole(t, s, 9); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}
