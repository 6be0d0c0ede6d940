package snapshot

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// writeHostile writes a small snapshot into a new directory and returns
// its path.
func writeHostile(t *testing.T, n int) string {
	t.Helper()
	keys, values := sortedKVs(rand.New(rand.NewSource(int64(n)+17)), n)
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, 3, 7, true, keys, values)
	return dir
}

// TestSearchAfterCloseEmptyRange: Search, an accessor that returns an
// error, returns one wrapping ErrClosed when called after Close, also for
// an empty range [0, 0) (and the whole range of the empty tree), which the
// range check against the cleared slices lets through.
func TestSearchAfterCloseEmptyRange(t *testing.T) {
	for _, n := range []int{0, 5} {
		s, err := Open(writeHostile(t, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Search([]byte("k"), 0, 0); !errors.Is(err, ErrClosed) {
			t.Errorf("%d leaves: Search(k, 0, 0) after Close: %v, want ErrClosed", n, err)
		}
		if _, _, err := s.Search([]byte("k"), 0, s.LeafCount()); !errors.Is(err, ErrClosed) {
			t.Errorf("%d leaves: Search(k, 0, LeafCount) after Close: %v, want ErrClosed", n, err)
		}
	}
}

// TestLookupAfterCloseEmptyTree: Lookup after Close reports ErrClosed on
// the empty tree as on a tree with leaves (TestAccessorErrors), never "not
// found" as if open.
func TestLookupAfterCloseEmptyTree(t *testing.T) {
	s, err := Open(writeHostile(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := s.Lookup([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Lookup on the closed empty tree: found %v, err %v, want ErrClosed", found, err)
	}
}

// TestFIFOEntry: a snapshot entry that is a FIFO instead of a
// regular file (a damaged or hostile directory) must fail Open with an
// error, not block it forever in open(2).
func TestFIFOEntry(t *testing.T) {
	for _, name := range []string{FileMeta, FileKVs} {
		t.Run(name, func(t *testing.T) {
			dir := writeHostile(t, 0)
			p := filepath.Join(dir, name)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skip(err)
			}
			done := make(chan error, 1)
			go func() {
				s, err := Open(dir)
				if err == nil {
					s.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("Open with %s a FIFO succeeded", name)
				}
			case <-time.After(time.Minute):
				t.Errorf("Open with %s a FIFO blocks (still blocked after a minute)", name)
				// unblock the goroutine: open the FIFO for writing
				if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
					f.Close()
				}
				<-done
			}
		})
	}
}

// TestDirectoryEntry: a data file replaced by a directory fails
// Open with an error (never a panic or a snapshot that serves it).
func TestDirectoryEntry(t *testing.T) {
	for _, name := range []string{FileMeta, FileLeaves, FileKVs, FileLookup} {
		for _, n := range []int{0, 3} {
			dir := writeHostile(t, n)
			p := filepath.Join(dir, name)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Errorf("%d leaves: Open with %s a directory succeeded", n, name)
			}
		}
	}
}

// TestMissingEntry: a missing data file fails Open with an error
// that names it.
func TestMissingEntry(t *testing.T) {
	for _, name := range allFiles {
		dir := writeHostile(t, 3)
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err == nil {
			s.Close()
			t.Errorf("Open without %s succeeded", name)
			continue
		}
		if !containsAll(err.Error(), filepath.Join(dir, name)) {
			t.Errorf("Open without %s: %v does not name the file", name, err)
		}
	}
}
