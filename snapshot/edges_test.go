package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// edgeNoLeftovers checks that parent holds no temporary entry and that dir
// does not exist.
func edgeNoLeftovers(t *testing.T, parent, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the snapshot directory after a failed write: %v", err)
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Errorf("temporary entries left: %v", left)
	}
}

// TestEdgeJoinOfUnrelatedWriter: Join refuses a writer that is not a fork
// of w, and leaves that writer alone: it was never w's to abort.
func TestEdgeJoinOfUnrelatedWriter(t *testing.T) {
	parent := t.TempDir()
	w, err := NewWriter(filepath.Join(parent, "a"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	otherDir := filepath.Join(parent, "b")
	o, err := NewWriter(otherDir, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort()
	h := leafHash("k", "v", 1)
	if err := o.AddLeaf([]byte("k"), []byte("v"), 1, h); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(o); !errors.Is(err, ErrTreeShape) {
		t.Fatalf("Join of an unrelated writer: %v, want ErrTreeShape", err)
	}
	// o is not a fork of w: the misuse of w must not destroy o's write
	if err := o.Finish(); err != nil {
		t.Fatalf("the unrelated writer after w.Join refused it: Finish: %v", err)
	}
	s, err := Open(otherDir)
	if err != nil {
		t.Fatalf("the unrelated writer's snapshot: %v", err)
	}
	s.Close()
}

// TestEdgeJoinOfItself: w.Join(w) is refused with ErrTreeShape and w is
// failed, not aborted behind the caller's back with its files removed.
func TestEdgeJoinOfItself(t *testing.T) {
	parent := t.TempDir()
	w, err := NewWriter(filepath.Join(parent, "a"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AddLeaf([]byte("k"), []byte("v"), 1, leafHash("k", "v", 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(w); !errors.Is(err, ErrTreeShape) {
		t.Fatalf("w.Join(w): %v, want ErrTreeShape", err)
	}
}

// TestEdgeAddSubtreeMisuse: AddSubtree from a closed snapshot, with refs
// out of range, and from a format version 1 snapshot fails the writer with
// the documented error, never a panic, and Abort leaves nothing.
func TestEdgeAddSubtreeMisuse(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(7)), 20)
	src := writeAndOpen(t, 3, 9, true, keys, values)
	closed := writeAndOpen(t, 3, 9, true, keys, values)
	closed.Close()
	v1dir := filepath.Join("testdata", "golden-v1")
	v1, err := Open(v1dir)
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	cases := []struct {
		name string
		s    *Snapshot
		r    Ref
		want error
	}{
		{"closed snapshot, root", closed, BranchRef(closed.BranchCount() - 1), ErrClosed},
		{"closed snapshot, leaf", closed, LeafRef(0), ErrClosed},
		{"leaf past the end", src, LeafRef(src.LeafCount()), ErrInvalidNode},
		{"huge leaf", src, LeafRef(1<<62 - 1), ErrInvalidNode},
		{"branch past the end", src, BranchRef(src.BranchCount()), ErrInvalidNode},
		{"huge branch", src, BranchRef(1<<62 + 5), ErrInvalidNode},
		{"format version 1", v1, LeafRef(0), ErrFormatVersion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "s")
			w, err := NewWriter(dir, 9)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AddSubtree(c.s, c.r); !errors.Is(err, c.want) {
				t.Fatalf("AddSubtree: %v, want %v", err, c.want)
			}
			if err := w.Finish(); !errors.Is(err, c.want) {
				t.Fatalf("Finish after a failed AddSubtree: %v", err)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			edgeNoLeftovers(t, parent, dir)
		})
	}
}

// TestEdgeAfterFinish: every input after a successful Finish fails with
// ErrClosed and changes nothing on disk.
func TestEdgeAfterFinish(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(8)), 10)
	src := writeAndOpen(t, 1, 9, false, keys, values)
	parent := t.TempDir()
	dir := filepath.Join(parent, "s")
	w, err := NewWriter(dir, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddLeaf(nil, nil, 1, leafHash("", "", 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	before := readDir(t, dir)
	h := leafHash("z", "", 1)
	if err := w.AddLeaf([]byte("z"), nil, 1, h); !errors.Is(err, ErrClosed) {
		t.Errorf("AddLeaf: %v", err)
	}
	if err := w.AddBranch(1, 2, 1, h); !errors.Is(err, ErrClosed) {
		t.Errorf("AddBranch: %v", err)
	}
	if err := w.AddSubtree(src, LeafRef(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("AddSubtree: %v", err)
	}
	if _, err := w.Fork(1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Fork: %v", err)
	}
	if err := w.DeferSync(&SyncGroup{}); !errors.Is(err, ErrClosed) {
		t.Errorf("DeferSync: %v", err)
	}
	if err := w.Finish(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Finish: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("Abort: %v", err)
	}
	after := readDir(t, dir)
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed after Finish", name)
		}
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Errorf("temporary entries left: %v", left)
	}
}

// TestEdgeNilAndEmpty: a nil and an empty key or value are the same bytes;
// the empty key is the smallest and can be the first leaf only; Lookup and
// Search find it by nil and by empty.
func TestEdgeNilAndEmpty(t *testing.T) {
	write := func(dir string, k0, v0 []byte) {
		w, err := NewWriter(dir, 5)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		h0 := nodehash.Leaf(nil, k0, v0, 2)
		h1 := nodehash.Leaf(nil, []byte("a"), []byte{}, 3)
		if err := w.AddLeaf(k0, v0, 2, h0); err != nil {
			t.Fatal(err)
		}
		if err := w.AddLeaf([]byte("a"), []byte{}, 3, h1); err != nil {
			t.Fatal(err)
		}
		root := nodehash.Inner(nil, 1, 2, 4, h0, h1)
		if err := w.AddBranch(1, 2, 4, root); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	parent := t.TempDir()
	a, b := filepath.Join(parent, "nil"), filepath.Join(parent, "empty")
	write(a, nil, nil)
	write(b, []byte{}, []byte{})
	fa, fb := readDir(t, a), readDir(t, b)
	for name := range fa {
		if !bytes.Equal(fa[name], fb[name]) {
			t.Errorf("%s differs between nil and empty", name)
		}
	}
	s, err := Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{nil, {}} {
		i, v, found, err := s.Lookup(k)
		if err != nil || !found || i != 0 || len(v) != 0 {
			t.Errorf("Lookup(%q): %d %q %v %v", k, i, v, found, err)
		}
		j, found, err := s.Search(k, 0, s.LeafCount())
		if err != nil || !found || j != 0 {
			t.Errorf("Search(%q): %d %v %v", k, j, found, err)
		}
	}
	if _, _, found, err := s.Lookup([]byte{0}); found || err != nil {
		t.Errorf("Lookup(00): %v %v", found, err)
	}

	// a second empty key is refused, nil or not
	w, err := NewWriter(filepath.Join(parent, "dup"), 5)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AddLeaf(nil, nil, 1, leafHash("", "", 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddLeaf([]byte{}, nil, 1, leafHash("", "", 1)); !errors.Is(err, ErrKeyOrder) {
		t.Fatalf("a second empty key: %v", err)
	}
}

// TestEdgeDeferSyncDoneGroup: a writer that finishes into a group that has
// synced, or was closed, fails with ErrClosed and, after Abort, leaves
// neither the snapshot nor its temporary directory.
func TestEdgeDeferSyncDoneGroup(t *testing.T) {
	for _, how := range []string{"synced", "closed"} {
		t.Run(how, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "s")
			g := &SyncGroup{}
			if how == "synced" {
				if err := g.Sync(); err != nil {
					t.Fatal(err)
				}
			} else if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			w, err := NewWriter(dir, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.DeferSync(g); err != nil {
				t.Fatal(err)
			}
			if err := w.AddLeaf([]byte("k"), []byte("v"), 2, leafHash("k", "v", 2)); err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Finish into a %s group: %v", how, err)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			edgeNoLeftovers(t, parent, dir)
		})
	}
}

// TestEdgeForkWithSubtrees: the main writer and its fork both copy
// subtrees with AddSubtree around nodes added one by one; the joined
// snapshot is the same bytes as the source, with the lookup table built
// whole or in windows.
func TestEdgeForkWithSubtrees(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(11)), 700)
	src := writeAndOpen(t, 5, 9, false, keys, values)
	orig := readDir(t, src.Dir())
	root := src.BranchCount() - 1
	rootL, _ := src.Left(root)
	rootR, _ := src.Right(root)
	if rootL.IsLeaf() || rootR.IsLeaf() {
		t.Fatal("a root with a leaf child")
	}
	// the fork writes the root's right child, the main writer its left:
	// both from two copied subtrees and a branch added by AddBranch
	for _, whole := range []bool{true, false} {
		func() {
			if !whole {
				defer func(m, w uint64) { lookupWholeMax, lookupWindow = m, w }(lookupWholeMax, lookupWindow)
				lookupWholeMax, lookupWindow = 1024, 64
			}
			dir := filepath.Join(t.TempDir(), "copy")
			w, err := NewWriter(dir, 9)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			_, _, le, _ := src.branchLayout(rootL.Index())
			p, err := w.Fork(le, le-1)
			if err != nil {
				t.Fatal(err)
			}
			rl, _ := src.Left(rootR.Index())
			rr, _ := src.Right(rootR.Index())
			if err := p.AddSubtree(src, rl); err != nil {
				t.Fatal(err)
			}
			if err := p.AddSubtree(src, rr); err != nil {
				t.Fatal(err)
			}
			rb := rootR.Index()
			if err := p.AddBranch(src.BranchHeight(rb), src.BranchSize(rb), src.BranchVersion(rb), src.BranchHash(rb)); err != nil {
				t.Fatal(err)
			}
			ll, _ := src.Left(rootL.Index())
			lr, _ := src.Right(rootL.Index())
			if err := w.AddSubtree(src, ll); err != nil {
				t.Fatal(err)
			}
			if err := w.AddSubtree(src, lr); err != nil {
				t.Fatal(err)
			}
			lb := rootL.Index()
			if err := w.AddBranch(src.BranchHeight(lb), src.BranchSize(lb), src.BranchVersion(lb), src.BranchHash(lb)); err != nil {
				t.Fatal(err)
			}
			if err := w.Join(p); err != nil {
				t.Fatal(err)
			}
			if err := w.AddBranch(src.BranchHeight(root), src.BranchSize(root), src.BranchVersion(root), src.BranchHash(root)); err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			got := readDir(t, dir)
			for _, name := range allFiles {
				if !bytes.Equal(got[name], orig[name]) {
					t.Errorf("whole=%v: %s differs from the source's", whole, name)
				}
			}
		}()
	}
}

// TestEdgeChecksumCheckUnknownName: a check of a name that is not a data
// file of the snapshot must not report damaged files as sound.
func TestEdgeChecksumCheckUnknownName(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(12)), 50)
	dir := filepath.Join(t.TempDir(), "s")
	writeTree(t, dir, 1, 9, true, keys, values)
	// damage leaves under the mapping's length
	f, err := os.OpenFile(filepath.Join(dir, FileLeaves), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xAA}, 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.VerifyChecksums(context.Background()); !errors.Is(err, ErrChecksum) {
		t.Fatalf("all files: %v", err)
	}
	for _, name := range []string{"leaf", FileMeta, "Leaves"} {
		if err := s.VerifyChecksums(context.Background(), name); err == nil {
			t.Errorf("VerifyChecksums(%q) of a damaged snapshot returned nil: it checked no file", name)
		}
	}
}

// TestEdgeNilArguments: a nil snapshot to AddSubtree and a nil writer to
// Join are refused with an error, not a panic.
func TestEdgeNilArguments(t *testing.T) {
	try := func(name string, f func() error) {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("panic: %v", r)
				}
			}()
			if err := f(); err == nil {
				t.Error("accepted")
			}
		})
	}
	newW := func() *Writer {
		w, err := NewWriter(filepath.Join(t.TempDir(), "s"), 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Abort() })
		return w
	}
	try("AddSubtree(nil)", func() error { return newW().AddSubtree(nil, LeafRef(0)) })
	try("Join(nil)", func() error { return newW().Join(nil) })
}

// TestEdgeChecksumCheckRunAgain: a ChecksumCheck whose files are closed
// (by a Run that ctx stopped, by Close) must not report a sound snapshot
// as damaged when Run again.
func TestEdgeChecksumCheckRunAgain(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(13)), 50)
	s := writeAndOpen(t, 1, 9, true, keys, values)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, stop := range []string{"cancelled Run", "Close"} {
		t.Run(stop, func(t *testing.T) {
			c, err := s.NewChecksumCheck()
			if err != nil {
				t.Fatal(err)
			}
			if stop == "Close" {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			} else if err := c.Run(cancelled); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run under a cancelled context: %v", err)
			}
			if err := c.Run(context.Background()); errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) {
				t.Errorf("Run after %s reports the sound snapshot damaged: %v", stop, err)
			}
		})
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}
