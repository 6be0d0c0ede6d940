package snapshot

import (
	"context"
	"math/rand"
	"path/filepath"
	"testing"
)

// TestForkLimiterSeesFileBytes: a limiter sees each byte of the
// snapshot's files once (TestWriterLimiter), also when the right half goes
// through a fork: not the fork's scratch files as well as their copies at
// Join, nor the leaf records Join rewrites in place.
func TestForkLimiterSeesFileBytes(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	n := 5000
	calls := recordTree(t, r, n)
	parent := t.TempDir()

	// one writer, paced
	one := &countingLimiter{burst: 4096}
	{
		w, err := NewWriter(filepath.Join(parent, "one"), 50)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		w.SetLimiter(context.Background(), one)
		if err := replayNodes(w, calls); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	files := readDir(t, filepath.Join(parent, "one"))
	data := 0
	for name, b := range files {
		if name != FileMeta {
			data += len(b)
		}
	}

	// the same tree, its right half forked
	forked := &countingLimiter{burst: 4096}
	a := (n + 1) / 2
	left, right, root := calls[:2*a-1], calls[2*a-1:len(calls)-1], calls[len(calls)-1:]
	dir := filepath.Join(parent, "forked")
	w, err := NewWriter(dir, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.SetLimiter(context.Background(), forked)
	p, err := w.Fork(uint64(a), uint64(a-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := replayNodes(p, right); err != nil {
		t.Fatal(err)
	}
	if err := replayNodes(w, left); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(p); err != nil {
		t.Fatal(err)
	}
	if err := replayNodes(w, root); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "forked", files, readDir(t, dir))
	t.Logf("data files %d bytes; limiter saw %d (one writer) and %d (forked)", data, one.total, forked.total)
	if one.total != data {
		t.Fatalf("one writer: limiter saw %d bytes, files hold %d", one.total, data)
	}
	if forked.total != data {
		t.Errorf("forked write: limiter saw %d bytes, files hold %d (%d extra: %.0f%%)",
			forked.total, data, forked.total-data, 100*float64(forked.total-data)/float64(data))
	}
}
