package snapshot

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

func leafHash(key, value string, version int64) []byte {
	return nodehash.Leaf(nil, []byte(key), []byte(value), version)
}

// tmpEntries lists the entries of parent other than the finished snapshot.
func tmpEntries(t *testing.T, parent string) []string {
	t.Helper()
	return entriesWith(t, parent, ".tmp-")
}

// entriesWith lists the entries of dir whose names contain part.
func entriesWith(t *testing.T, dir, part string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.Contains(e.Name(), part) {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestWriterMisuse(t *testing.T) {
	h := leafHash("a", "1", 1)
	cases := []struct {
		name string
		run  func(w *Writer) error
		want error
	}{
		{"equal keys", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			return w.AddLeaf([]byte("a"), nil, 1, h)
		}, ErrKeyOrder},
		{"decreasing keys", func(w *Writer) error {
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			return w.AddLeaf([]byte("a"), nil, 1, h)
		}, ErrKeyOrder},
		{"empty after non-empty key", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			return w.AddLeaf(nil, nil, 1, h)
		}, ErrKeyOrder},
		{"short hash", func(w *Writer) error { return w.AddLeaf([]byte("a"), nil, 1, h[:31]) }, ErrInvalidNode},
		{"version above tree version", func(w *Writer) error { return w.AddLeaf([]byte("a"), nil, 11, h) }, ErrInvalidNode},
		{"negative version", func(w *Writer) error { return w.AddLeaf([]byte("a"), nil, -1, h) }, ErrInvalidNode},
		{"branch without children", func(w *Writer) error { return w.AddBranch(1, 2, 1, h) }, ErrTreeShape},
		{"branch with one child", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			return w.AddBranch(1, 1, 1, h)
		}, ErrTreeShape},
		{"wrong size", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			return w.AddBranch(1, 3, 1, h)
		}, ErrTreeShape},
		{"negative size", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			return w.AddBranch(1, -2, 1, h)
		}, ErrTreeShape},
		{"wrong height", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			return w.AddBranch(2, 2, 1, h)
		}, ErrTreeShape},
		{"unbalanced", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			_ = w.AddLeaf([]byte("c"), nil, 1, h)
			_ = w.AddBranch(1, 2, 1, h)
			_ = w.AddLeaf([]byte("d"), nil, 1, h)
			_ = w.AddBranch(2, 3, 1, h)
			_ = w.AddBranch(3, 4, 1, h) // children heights 0 and 2
			return w.Finish()
		}, ErrTreeShape},
		{"two subtrees at finish", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			return w.Finish()
		}, ErrTreeShape},
		{"three subtrees at finish", func(w *Writer) error {
			_ = w.AddLeaf([]byte("a"), nil, 1, h)
			_ = w.AddLeaf([]byte("b"), nil, 1, h)
			_ = w.AddLeaf([]byte("c"), nil, 1, h)
			_ = w.AddBranch(1, 2, 1, h)
			_ = w.AddLeaf([]byte("d"), nil, 1, h)
			return w.Finish()
		}, ErrTreeShape},
		{"too many pending subtrees", func(w *Writer) error {
			var err error
			for i := 0; i <= maxPending && err == nil; i++ {
				err = w.AddLeaf([]byte{byte(i >> 8), byte(i)}, nil, 1, h)
			}
			return err
		}, ErrTreeShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "snap")
			w, err := NewWriter(dir, 10)
			if err != nil {
				t.Fatal(err)
			}
			err = c.run(w)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			// The error is sticky.
			if err2 := w.Finish(); !errors.Is(err2, c.want) {
				t.Fatalf("Finish after error: %v", err2)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("snapshot exists after failure: %v", err)
			}
			if left := tmpEntries(t, parent); len(left) != 0 {
				t.Fatalf("temporary entries left: %v", left)
			}
		})
	}
}

func TestWriterLifecycle(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "snap")
	if _, err := NewWriter(dir, -1); !errors.Is(err, ErrInvalidNode) {
		t.Fatalf("negative version: %v", err)
	}
	if _, err := NewWriter(filepath.Join(parent, "missing", "snap"), 1); err == nil {
		t.Fatal("missing parent accepted")
	}

	w, err := NewWriter(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpEntries(t, parent)) != 1 {
		t.Fatal("no temporary directory while writing")
	}
	if err := w.AddLeaf([]byte("k"), []byte("v"), 2, leafHash("k", "v", 2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort after Finish: %v", err)
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Fatalf("temporary entries left: %v", left)
	}
	if err := w.AddLeaf([]byte("l"), nil, 1, leafHash("l", "", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddLeaf after Finish: %v", err)
	}
	if err := w.Finish(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Finish: %v", err)
	}
	// exactly the snapshot's files: no scratch file is left behind
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := slices.Sorted(slices.Values(allFiles)); !slices.Equal(names, want) {
		t.Fatalf("snapshot directory holds %v, want %v", names, want)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The target exists: refused at creation.
	if _, err := NewWriter(dir, 3); !errors.Is(err, ErrExists) {
		t.Fatalf("existing directory: %v", err)
	}
	// The target appears while writing (even empty): refused at Finish.
	dir2 := filepath.Join(parent, "snap2")
	w, err = NewWriter(dir2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := os.Mkdir(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); !errors.Is(err, ErrExists) {
		t.Fatalf("directory created while writing: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Fatalf("temporary entries left: %v", left)
	}

	// Abort without Finish removes everything.
	w, err = NewWriter(filepath.Join(parent, "snap3"), 3)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.AddLeaf([]byte("k"), []byte("v"), 2, leafHash("k", "v", 2))
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Finish after Abort: %v", err)
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Fatalf("temporary entries left: %v", left)
	}
}

// TestWriterNoAllocs checks that streaming nodes allocates nothing per node.
// The tree is a perfect binary tree built like a binary counter: after each
// leaf, the two last subtrees are joined while they have the same size.
func TestWriterNoAllocs(t *testing.T) {
	w, err := NewWriter(filepath.Join(t.TempDir(), "snap"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	key := make([]byte, 40)
	value := make([]byte, 100)
	h := leafHash("x", "y", 1)
	i := uint32(0)
	allocs := testing.AllocsPerRun(2000, func() {
		i++
		binary.BigEndian.PutUint32(key, i)
		if err := w.AddLeaf(key, value, 1, h); err != nil {
			panic(err)
		}
		for n := len(w.stack); n >= 2 && w.stack[n-1].size == w.stack[n-2].size; n = len(w.stack) {
			top := w.stack[n-1]
			if err := w.AddBranch(top.height+1, int64(2*top.size), 1, h); err != nil {
				panic(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per leaf", allocs)
	}
}
