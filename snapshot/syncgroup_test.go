package snapshot

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// recordSyncs replaces fsyncFile for the test with one that records the
// base names of the synced files and fails for those starting with one of
// failing.
func recordSyncs(t *testing.T, failing ...string) func() []string {
	var mu sync.Mutex
	var synced []string
	old := fsyncFile
	fsyncFile = func(f *os.File) error {
		name := filepath.Base(f.Name())
		mu.Lock()
		synced = append(synced, name)
		mu.Unlock()
		for _, n := range failing {
			if strings.HasPrefix(name, n) {
				return errors.New("injected fsync failure")
			}
		}
		return old(f)
	}
	t.Cleanup(func() { fsyncFile = old })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), synced...)
	}
}

// finishInto writes a tree over keys into dir with its fsyncs left to g
// and returns Finish's error. The writer is aborted at the test's end.
func finishInto(t *testing.T, g *SyncGroup, dir string, keys, values [][]byte) error {
	t.Helper()
	w, gen := newTreeWriter(t, dir, 1, 5, false, keys, values)
	if err := w.DeferSync(g); err != nil {
		t.Fatal(err)
	}
	if _, err := gen.run(len(keys)); err != nil {
		t.Fatal(err)
	}
	return w.Finish()
}

// TestDeferSync writes the same tree with Finish's own fsyncs and with a
// sync group: the files are the same, the deferred Finish syncs nothing,
// and the group syncs every file and both directories, then closes them.
func TestDeferSync(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(3)), 3000)
	parent := t.TempDir()
	want := writeTree(t, filepath.Join(parent, "plain"), 7, 20, true, keys, values)

	fds := openFDs(t)
	synced := recordSyncs(t)
	dir := filepath.Join(parent, "grouped")
	w, gen := newTreeWriter(t, dir, 7, 20, true, keys, values)
	g := &SyncGroup{}
	if err := w.DeferSync(g); err != nil {
		t.Fatal(err)
	}
	root, err := gen.run(len(keys))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(root.hash[:], want) {
		t.Fatal("different root hash for the same tree")
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := synced(); len(got) != 0 {
		t.Fatalf("Finish after DeferSync synced %v", got)
	}
	if err := g.AddDir(parent); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(synced(), " ")
	for _, name := range slices.Concat(allFiles, []string{"grouped", filepath.Base(parent)}) {
		if !strings.Contains(got, name) {
			t.Errorf("the group's Sync did not sync %s (synced %s)", name, got)
		}
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after Sync, %d before the write", n, fds)
	}
	if err := g.Sync(); err != nil {
		t.Errorf("second Sync: %v", err)
	}
	a, b := readDir(t, filepath.Join(parent, "plain")), readDir(t, dir)
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between the plain and the grouped write", name)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestSyncGroupFailure fails one fsync of a group: Sync returns an error
// naming the file, still syncs and closes the rest, returns the failure
// again if called again, and the group takes no more files.
func TestSyncGroupFailure(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(4)), 500)
	parent := t.TempDir()
	fds := openFDs(t)
	synced := recordSyncs(t, FileKVs)
	g := &SyncGroup{}
	for _, name := range []string{"a", "b"} {
		if err := finishInto(t, g, filepath.Join(parent, name), keys, values); err != nil {
			t.Fatal(err)
		}
	}
	err := g.Sync()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(parent, "a", FileKVs)) ||
		!strings.Contains(err.Error(), filepath.Join(parent, "b", FileKVs)) {
		t.Fatalf("Sync with failing fsyncs of kvs: %v", err)
	}
	if n := len(synced()); n != 2*(len(allFiles)+1) {
		t.Errorf("%d fsyncs, want every file and directory of both snapshots", n)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after a failed Sync, %d before", n, fds)
	}
	if again := g.Sync(); again == nil || again.Error() != err.Error() {
		t.Errorf("Sync again after a failed Sync: %v, want the same failure", again)
	}
	f, err := os.Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Add(f); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Sync: %v, want ErrClosed", err)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("Add after Sync left the file open")
	}
	if err := g.AddDir(parent); !errors.Is(err, ErrClosed) {
		t.Errorf("AddDir after Sync: %v, want ErrClosed", err)
	}
}

// TestSyncGroupClose abandons a group: Close closes its files unsynced,
// and a writer finishing into the closed group fails and can be aborted.
func TestSyncGroupClose(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(5)), 200)
	parent := t.TempDir()
	fds := openFDs(t)
	synced := recordSyncs(t)
	g := &SyncGroup{}
	if err := finishInto(t, g, filepath.Join(parent, "a"), keys, values); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := synced(); len(got) != 0 {
		t.Errorf("Close synced %v", got)
	}
	if err := g.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed (nothing was made durable)", err)
	}
	if got := synced(); len(got) != 0 {
		t.Errorf("Sync after Close synced %v", got)
	}

	// finishInto's writer is aborted at the end of the test; the check
	// of what it leaves runs after that
	t.Cleanup(func() {
		if n := openFDs(t); n != fds {
			t.Errorf("%d descriptors open, %d before", n, fds)
		}
		if ents := entriesWith(t, parent, "b"); len(ents) != 0 {
			t.Errorf("the failed write left %v", ents)
		}
	})
	if err := finishInto(t, g, filepath.Join(parent, "b"), keys, values); !errors.Is(err, ErrClosed) {
		t.Fatalf("Finish into a closed group: %v, want ErrClosed", err)
	}
}

// TestFinishSyncFailure fails an fsync of Finish's own, of each file and
// of the temporary directory: Finish fails and Abort leaves nothing.
func TestFinishSyncFailure(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(6)), 200)
	// "parent": the fsync of the parent directory, after the rename into
	// place, which the Abort below undoes too
	for _, name := range slices.Concat(allFiles, []string{"s.tmp-", "parent"}) {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			if name == "parent" {
				name = filepath.Base(parent)
			}
			synced := recordSyncs(t, name)
			w, gen := newTreeWriter(t, filepath.Join(parent, "s"), 1, 5, false, keys, values)
			if _, err := gen.run(len(keys)); err != nil {
				t.Fatal(err)
			}
			err := w.Finish()
			if !slices.ContainsFunc(synced(), func(s string) bool { return strings.HasPrefix(s, name) }) {
				t.Errorf("Finish did not sync %s", name)
			}
			if err == nil || !strings.Contains(err.Error(), "injected fsync failure") {
				t.Fatalf("Finish with a failing fsync of %s: %v", name, err)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			if ents := entriesWith(t, parent, ""); len(ents) != 0 {
				t.Errorf("failed fsync of %s left %v", name, ents)
			}
		})
	}
}

func TestDeferSyncMisuse(t *testing.T) {
	w, err := NewWriter(filepath.Join(t.TempDir(), "s"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	p, err := w.Fork(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abort()
	if err := p.DeferSync(&SyncGroup{}); !errors.Is(err, ErrTreeShape) {
		t.Errorf("DeferSync on a forked writer: %v, want ErrTreeShape", err)
	}
}

// TestSyncGroupBoundsOpenFiles: a group holds at most syncGroupMaxOpen
// files, syncing the earlier ones when more come, and Sync still reports
// the failures of those early fsyncs.
func TestSyncGroupBoundsOpenFiles(t *testing.T) {
	defer func(n int) { syncGroupMaxOpen = n }(syncGroupMaxOpen)
	syncGroupMaxOpen = 3
	keys, values := sortedKVs(rand.New(rand.NewSource(7)), 300)
	parent := t.TempDir()
	fds := openFDs(t)
	synced := recordSyncs(t, FileLeaves)
	g := &SyncGroup{}
	for _, name := range []string{"a", "b", "c"} {
		if err := finishInto(t, g, filepath.Join(parent, name), keys, values); err != nil {
			t.Fatal(err)
		}
		if n := openFDs(t); n > fds+syncGroupMaxOpen {
			t.Fatalf("%d descriptors open after finishing %s, at most %d more than the %d before", n, name, syncGroupMaxOpen, fds)
		}
	}
	if n := len(synced()); n < 2*(len(allFiles)+1) {
		t.Fatalf("%d fsyncs before Sync, want the first two snapshots' at least", n)
	}
	err := g.Sync()
	for _, name := range []string{"a", "b", "c"} {
		if p := filepath.Join(parent, name, FileLeaves); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Sync's error does not name %s: %v", p, err)
		}
	}
	if n := len(synced()); n != 3*(len(allFiles)+1) {
		t.Errorf("%d fsyncs, want every file and directory of the three snapshots", n)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after Sync, %d before", n, fds)
	}
}
