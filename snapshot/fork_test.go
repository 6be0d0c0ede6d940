package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// writeForked writes the evenly split tree over keys as writeTree does, but
// the root's right subtree through a writer forked from the main one.
//
// With abortFirst, a first fork writes more leaves and branches than the
// right half has (keys after all of keys) and is aborted, and the main
// writer then writes the right half itself.
func writeForked(t *testing.T, dir string, seed, version int64, keys, values [][]byte, abortFirst bool) {
	t.Helper()
	w, g := newTreeWriter(t, dir, seed, version, false, keys, values)
	n := len(keys)
	a := (n + 1) / 2 // treeGen's even split
	l := g.build(0, a, -1)
	p, err := w.Fork(uint64(a), uint64(a-1))
	if err != nil {
		t.Fatal(err)
	}
	if abortFirst {
		if err := junkTree(p, max(2*n, 5000), seed+1); err != nil { // past a write buffer: on disk
			t.Fatal(err)
		}
		if err := p.Abort(); err != nil {
			t.Fatal(err)
		}
		p = nil
	}
	var r genNode
	if p == nil {
		r = g.build(a, n-a, -1)
	} else {
		g.sink = p
		r = g.build(a, n-a, -1)
		if g.err != nil {
			t.Fatal(g.err)
		}
		if err := w.Join(p); err != nil {
			t.Fatal(err)
		}
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	// the root, as treeGen makes it
	nd := genNode{height: max(l.height, r.height) + 1, size: l.size + r.size}
	mv := max(l.version, r.version)
	nd.version = mv + g.r.Int63n(g.treeVersion-mv+1)
	nodehash.Inner(nd.hash[:0], nd.height, nd.size, nd.version, l.hash[:], r.hash[:])
	if err := w.AddBranch(nd.height, nd.size, nd.version, nd.hash[:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestForkJoinSameBytes: a tree written with its right half through a
// forked writer is the same bytes as one written by one writer (the moved
// kvs offsets of the leaf records and of the lookup table included, and
// the checksums of the files the fork's records were placed in), for sizes
// around the index stride (the forked half's index entries); so is one
// whose main writer wrote the right half after a fork that wrote more was
// aborted; the scratch files are gone.
func TestForkJoinSameBytes(t *testing.T) {
	r := testutil.Rand(t)
	sizes := []int{2, 3, 5, IndexStride - 1, IndexStride, IndexStride + 1, 2*IndexStride + 1, 1000, 3000 + r.Intn(1000)}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			keys, values := sortedKVs(r, n)
			parent := t.TempDir()
			seed := r.Int63()
			writeTree(t, filepath.Join(parent, "one"), seed, 50, false, keys, values)
			writeForked(t, filepath.Join(parent, "forked"), seed, 50, keys, values, false)
			writeForked(t, filepath.Join(parent, "aborted"), seed, 50, keys, values, true)
			one := readDir(t, filepath.Join(parent, "one"))
			for _, dir := range []string{"forked", "aborted"} {
				forked := readDir(t, filepath.Join(parent, dir))
				if len(one) != len(forked) {
					t.Fatalf("files %d, %s %d", len(one), dir, len(forked))
				}
				for name, b := range one {
					if !bytes.Equal(forked[name], b) {
						t.Fatalf("%s: %s differs", dir, name)
					}
				}
			}
			s, err := Open(filepath.Join(parent, "forked"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Verify(); err != nil {
				t.Fatal(err)
			}
			if names := tmpEntries(t, parent); len(names) != 0 {
				t.Fatalf("left behind: %v", names)
			}
		})
	}
}

// TestForkMisuse: a fork at the wrong place, a Join that does not fit, a
// fork of a fork, Finish of a fork, and, while a fork is open, its
// parent's Finish, a second fork and the parent's records in the fork's
// places fail with the error that says so, and every scratch file goes
// with Abort.
func TestForkMisuse(t *testing.T) {
	h := leafHash("a", "1", 1)
	leaf := func(w *Writer, k string) error { return w.AddLeaf([]byte(k), []byte("1"), 1, h) }
	cases := []struct {
		name string
		run  func(w *Writer) error
		want error
	}{
		{"fork before the written leaves", func(w *Writer) error {
			_ = leaf(w, "a")
			_, err := w.Fork(0, 0)
			return err
		}, ErrTreeShape},
		{"fork of a fork", func(w *Writer) error {
			p, err := w.Fork(1, 0)
			if err != nil {
				return err
			}
			_, err = p.Fork(2, 1)
			return err
		}, ErrTreeShape},
		{"finish of a fork", func(w *Writer) error {
			p, _ := w.Fork(0, 0)
			_ = leaf(p, "a")
			return p.Finish()
		}, ErrTreeShape},
		{"join at other counts", func(w *Writer) error {
			p, _ := w.Fork(1, 0)
			_ = leaf(p, "b")
			return w.Join(p) // w has no leaf yet
		}, ErrTreeShape},
		{"join of two subtrees", func(w *Writer) error {
			_ = leaf(w, "a")
			p, _ := w.Fork(1, 0)
			_ = leaf(p, "b")
			_ = leaf(p, "c")
			return w.Join(p)
		}, ErrTreeShape},
		{"join of nothing", func(w *Writer) error {
			p, _ := w.Fork(0, 0)
			return w.Join(p)
		}, ErrTreeShape},
		{"keys out of order across the join", func(w *Writer) error {
			_ = leaf(w, "m")
			p, _ := w.Fork(1, 0)
			_ = leaf(p, "a")
			return w.Join(p)
		}, ErrKeyOrder},
		{"equal keys across the join", func(w *Writer) error {
			_ = leaf(w, "m")
			p, _ := w.Fork(1, 0)
			_ = leaf(p, "m")
			return w.Join(p)
		}, ErrKeyOrder},
		{"join of a failed fork", func(w *Writer) error {
			_ = leaf(w, "a")
			p, _ := w.Fork(1, 0)
			_ = leaf(p, "c")
			_ = leaf(p, "b") // fails p
			return w.Join(p)
		}, ErrKeyOrder},
		{"finish beside an open fork", func(w *Writer) error {
			_ = leaf(w, "a")
			p, _ := w.Fork(1, 0)
			defer p.Abort()
			_ = leaf(p, "b")
			return w.Finish()
		}, ErrTreeShape},
		{"a second fork while one is open", func(w *Writer) error {
			_ = leaf(w, "a")
			p, _ := w.Fork(1, 0)
			defer p.Abort()
			_, err := w.Fork(1, 0)
			return err
		}, ErrTreeShape},
		{"a leaf in an open fork's place", func(w *Writer) error {
			_ = leaf(w, "a")
			p, _ := w.Fork(1, 0)
			defer p.Abort()
			return leaf(w, "b")
		}, ErrTreeShape},
		{"a branch in an open fork's place", func(w *Writer) error {
			_ = leaf(w, "a")
			_ = leaf(w, "b")
			p, _ := w.Fork(2, 0) // the fork's first branch is w's first
			defer p.Abort()
			return w.AddBranch(1, 2, 1, h)
		}, ErrTreeShape},
		{"a fork's first branch past its first leaf", func(w *Writer) error {
			_ = leaf(w, "a")
			_, err := w.Fork(1, 1<<58) // at offset 0 of the branches, modulo 2^64
			return err
		}, ErrTreeShape},
		{"join of another writer's fork", func(w *Writer) error {
			o, err := NewWriter(w.dir+"-other", 10)
			if err != nil {
				return err
			}
			defer o.Abort()
			p, _ := o.Fork(0, 0)
			_ = leaf(p, "a")
			return w.Join(p)
		}, ErrTreeShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			w, err := NewWriter(filepath.Join(parent, "s"), 10)
			if err != nil {
				t.Fatal(err)
			}
			err = c.run(w)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			if names := tmpEntries(t, parent); len(names) != 0 {
				t.Fatalf("left behind: %v", names)
			}
		})
	}
}

// TestForkAbort: a fork's Abort removes its scratch files and leaves the
// main writer usable; a second Join of a joined fork fails; the main
// writer's Abort removes what an unjoined fork left.
func TestForkAbort(t *testing.T) {
	parent := t.TempDir()
	w, err := NewWriter(filepath.Join(parent, "s"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	h := leafHash("a", "1", 1)
	if err := w.AddLeaf([]byte("a"), []byte("1"), 1, h); err != nil {
		t.Fatal(err)
	}
	forkFiles := func() []string { return entriesWith(t, w.tmp, "fork-") }
	p, err := w.Fork(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(forkFiles()); got != 3 {
		t.Fatalf("%d scratch files for a fork, want 3 (kvs, index, key hashes)", got)
	}
	if err := p.Abort(); err != nil {
		t.Fatal(err)
	}
	if names := forkFiles(); len(names) != 0 {
		t.Fatalf("fork's Abort left %v", names)
	}
	// the main writer goes on: a second fork joins
	p, err = w.Fork(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddLeaf([]byte("b"), []byte("2"), 1, h); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(p); err != nil {
		t.Fatal(err)
	}
	if names := forkFiles(); len(names) != 0 {
		t.Fatalf("Join left %v", names)
	}
	// a fork left unjoined: its files go with the main writer's Abort
	if _, err := w.Fork(2, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(p); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Join of the same fork: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if names := tmpEntries(t, parent); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
}
