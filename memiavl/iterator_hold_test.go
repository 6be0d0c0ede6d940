package memiavl_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// holdCount is a Releaser counting its releases.
type holdCount struct{ n atomic.Int32 }

func (h *holdCount) Release() { h.n.Add(1) }

func holdTree(t *testing.T) *memiavl.Tree {
	t.Helper()
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := tr.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// TestIteratorHold: what an iterator holds is released once, by its first
// Close; holding another releases the first; an iterator dropped without
// Close releases it once collected.
func TestIteratorHold(t *testing.T) {
	tr := holdTree(t)
	var a, b holdCount
	it := tr.Iterator(nil, nil, true)
	it.Hold(&a)
	it.Hold(&b)
	if a.n.Load() != 1 || b.n.Load() != 0 {
		t.Fatalf("after a second Hold: released %d and %d times, want 1 and 0", a.n.Load(), b.n.Load())
	}
	if !it.Valid() || string(it.Key()) != "a" {
		t.Fatal("Hold moved the iterator")
	}
	_ = it.Close()
	_ = it.Close()
	if a.n.Load() != 1 || b.n.Load() != 1 {
		t.Fatalf("after two Closes: released %d and %d times, want 1 and 1", a.n.Load(), b.n.Load())
	}

	var c holdCount
	func() {
		it := tr.Iterator(nil, nil, false)
		it.Hold(&c)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for c.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("an iterator dropped without Close did not release what it held in 20 s")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	if n := c.n.Load(); n != 1 {
		t.Fatalf("the dropped iterator released %d times, want 1", n)
	}
}
