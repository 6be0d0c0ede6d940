package snapshot

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// checkAllLeaves verifies s and reads every leaf back through LeafKV,
// Search and Lookup.
func checkAllLeaves(t *testing.T, s *Snapshot, keys, values [][]byte) {
	t.Helper()
	if err := s.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if s.LeafCount() != uint64(len(keys)) {
		t.Fatalf("%d leaves, want %d", s.LeafCount(), len(keys))
	}
	for i := range keys {
		k, v, err := s.LeafKV(uint64(i))
		if err != nil || !bytes.Equal(k, keys[i]) || !bytes.Equal(v, values[i]) {
			t.Fatalf("leaf %d: %x=%.16x %v", i, k, v, err)
		}
		if idx, found, err := s.Search(keys[i], 0, s.LeafCount()); idx != uint64(i) || !found || err != nil {
			t.Fatalf("Search leaf %d: %d %v %v", i, idx, found, err)
		}
		if idx, lv, found, err := s.Lookup(keys[i]); idx != uint64(i) || !found || err != nil || !bytes.Equal(lv, values[i]) {
			t.Fatalf("Lookup leaf %d: %d %v %v", i, idx, found, err)
		}
	}
	checkNavigation(t, s)
}

// TestWriterExtremes: empty keys and values, keys that tie on
// their 8-byte prefix, a value larger than the write buffers, and tree
// versions at both ends (1 and MaxInt64) round-trip and verify; nodes of
// version 0 are refused.
func TestWriterExtremes(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, writeBufferSize+12345)
	keys := [][]byte{{}, {0}, {0, 0}, []byte("prefix00"), []byte("prefix00\x00"), []byte("prefix00\x00\x00"),
		[]byte("prefix00\xff"), []byte("prefix01"), bytes.Repeat([]byte{0xff}, 40)}
	values := [][]byte{nil, {}, big, []byte("x"), nil, big[:7], []byte("y"), nil, big}
	for _, version := range []int64{1, math.MaxInt64} {
		dir := filepath.Join(t.TempDir(), "snap")
		writeTree(t, dir, 5, version, true, keys, values)
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if s.Version() != version {
			t.Errorf("version %d, want %d", s.Version(), version)
		}
		checkAllLeaves(t, s, keys, values)
		s.Close()
	}
	// version 0: no node of an IAVL tree has it (the first version is
	// 1), so the writer refuses a leaf or branch of version 0 as it does
	// one newer than the tree
	for n := 1; n <= 2; n++ {
		dir := filepath.Join(t.TempDir(), "snap")
		w, err := NewWriter(dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		version := int64(0)
		if n == 2 {
			version = 1 // the leaves are valid, the branch is not
		}
		var hs [][]byte
		for i := 0; i < n; i++ {
			h := nodehash.Leaf(nil, keys[i], values[i], version)
			hs = append(hs, h)
			err := w.AddLeaf(keys[i], values[i], version, h)
			if n == 1 {
				if !errors.Is(err, ErrInvalidNode) {
					t.Fatalf("leaf of version 0: %v, want ErrInvalidNode", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if n == 2 {
			err := w.AddBranch(1, 2, 0, nodehash.Inner(nil, 1, 2, 0, hs[0], hs[1]))
			if !errors.Is(err, ErrInvalidNode) {
				t.Fatalf("branch of version 0: %v, want ErrInvalidNode", err)
			}
		}
	}
}

// TestWriterTargetAppears: the target directory appears (empty,
// or as a file) while the writer runs: Finish refuses it with ErrExists,
// leaves it as it was, and Abort removes the temporary directory.
func TestWriterTargetAppears(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(3)), 100)
	for _, kind := range []string{"dir", "file", "symlink"} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "s")
		w, gen := newTreeWriter(t, dir, 1, 5, false, keys, values)
		if _, err := gen.run(len(keys)); err != nil {
			t.Fatal(err)
		}
		var err error
		switch kind {
		case "dir":
			err = os.Mkdir(dir, 0o755)
		case "file":
			err = os.WriteFile(dir, []byte("x"), 0o644)
		case "symlink":
			err = os.Symlink(filepath.Join(parent, "nowhere"), dir)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); !errors.Is(err, ErrExists) {
			t.Errorf("%s: Finish onto an existing entry: %v, want ErrExists", kind, err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if left := tmpEntries(t, parent); len(left) != 0 {
			t.Errorf("%s: left %v", kind, left)
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			t.Fatalf("%s: the existing entry is gone: %v", kind, err)
		}
		if kind == "dir" {
			if ents, _ := os.ReadDir(dir); !fi.IsDir() || len(ents) != 0 {
				t.Errorf("%s: the existing entry changed: %v %v", kind, fi.Mode(), ents)
			}
		}
	}
}

// TestWriterCancelledMidway: a context cancelled in the middle of
// a paced write fails the write with the context's error; what is left on
// disk (before Abort) is only a temporary directory without a meta file,
// which Open refuses; Abort removes it.
func TestWriterCancelledMidway(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(4)), 4000)
	parent := t.TempDir()
	dir := filepath.Join(parent, "s")
	ctx, cancel := context.WithCancel(context.Background())
	l := &cancelLimiter{cancel: cancel, after: 3}
	w, gen := newTreeWriter(t, dir, 1, 5, true, keys, values)
	w.SetLimiter(ctx, l)
	_, err := gen.run(len(keys))
	if err == nil {
		err = w.Finish()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("write under a cancelled context: %v", err)
	}
	if err := w.Finish(); !errors.Is(err, context.Canceled) {
		t.Errorf("Finish after the failure: %v, want the first error", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the snapshot appeared")
	}
	for _, tmp := range tmpEntries(t, parent) {
		if s, err := Open(filepath.Join(parent, tmp)); err == nil {
			s.Close()
			t.Errorf("Open takes the half-written %s for a snapshot", tmp)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

type cancelLimiter struct {
	mu     sync.Mutex
	n      int
	after  int
	cancel func()
}

func (l *cancelLimiter) WaitN(ctx context.Context, n int) error {
	l.mu.Lock()
	l.n++
	if l.n == l.after {
		l.cancel()
	}
	l.mu.Unlock()
	return ctx.Err()
}

func (l *cancelLimiter) Burst() int { return 1 << 30 }
