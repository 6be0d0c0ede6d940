package compat_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestReadsAfterClose: as MultiStore.Close documents, branches and stores
// still in use fail their next read, wherever the key lives: a working
// branch and a kept store with ErrNotLoaded and multitree.ErrClosed (before
// the fix, a key changed since the snapshot was still served from memory,
// one in the snapshot panicked with the snapshot's error), a historical
// branch with ErrVersionReleased. A load after Close reads again.
func TestReadsAfterClose(t *testing.T) {
	keys := keyring{}
	dir := t.TempDir()
	ms := newOurs(t, dir, testConfig(), keys, smallMount, nil)
	ms.GetKVStore(keys["a"]).Set([]byte("snap"), []byte("s"))
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil { // "snap" lives in the snapshot
		t.Fatal(err)
	}
	ms.GetKVStore(keys["a"]).Set([]byte("mem"), []byte("m")) // "mem" in an in-memory node
	ms.Commit()
	hist, err := ms.CacheMultiStoreWithVersion(2)
	if err != nil {
		t.Fatal(err)
	}
	branch := ms.CacheMultiStore()
	store := ms.GetKVStore(keys["a"])
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	panicErr := func(f func()) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				err = nil
				return
			}
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = errors.New("a panic that is not an error")
			}
		}()
		f()
		return errors.New("no panic")
	}
	for _, k := range []string{"snap", "mem"} {
		key := []byte(k)
		for name, tc := range map[string]struct {
			read func()
			want []error
		}{
			"historical branch get": {func() { hist.GetKVStore(keys["a"]).Get(key) }, []error{compat.ErrVersionReleased}},
			"working branch get":    {func() { branch.GetKVStore(keys["a"]).Get(key) }, []error{compat.ErrNotLoaded, multitree.ErrClosed}},
			"kept store get":        {func() { store.Get(key) }, []error{compat.ErrNotLoaded, multitree.ErrClosed}},
			"kept store has":        {func() { store.Has(key) }, []error{compat.ErrNotLoaded, multitree.ErrClosed}},
			"kept store iterator":   {func() { store.Iterator(key, nil).Close() }, []error{compat.ErrNotLoaded, multitree.ErrClosed}},
		} {
			err := panicErr(tc.read)
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("%s of %q after Close: %v, want a panic wrapping %v", name, k, err, want)
				}
			}
		}
	}
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	for k, want := range map[string]string{"snap": "s", "mem": "m"} {
		if got := ms.GetKVStore(keys["a"]).Get([]byte(k)); string(got) != want {
			t.Errorf("%q after a load following Close: %q, want %q", k, got, want)
		}
	}
}

// TestReadAfterCloseWithBufferedWrite: a kept store written after Close
// panics on its next read with an error wrapping ErrNotLoaded and
// multitree.ErrClosed, as compat/README.md says for any read after Close.
func TestReadAfterCloseWithBufferedWrite(t *testing.T) {
	keys := keyring{}
	dir := t.TempDir()
	ms := newOurs(t, dir, testConfig(), keys, smallMount, nil)
	ms.GetKVStore(keys["a"]).Set([]byte("k"), []byte("v"))
	ms.Commit()
	store := ms.GetKVStore(keys["a"])
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	store.Set([]byte("w"), []byte("x")) // buffered, no read
	var err error
	func() {
		defer func() {
			r := recover()
			if e, ok := r.(error); ok {
				err = e
			} else if r != nil {
				err = errors.New("non-error panic")
			}
		}()
		store.Get([]byte("k"))
	}()
	for _, want := range []error{compat.ErrNotLoaded, multitree.ErrClosed} {
		if !errors.Is(err, want) {
			t.Errorf("Get after Close with a buffered write: panic %v, want one wrapping %v", err, want)
		}
	}
}

// TestWriteThenReadAfterFailedReloadAndClose: after a reload that failed
// (its fallback too), the kept stores read copies of the last committed
// trees (own trees); Close releases the view they read from. A write and
// then a read of a kept store must panic with ErrNotLoaded, not apply the
// write to a tree whose snapshot is unmapped.
func TestWriteThenReadAfterFailedReloadAndClose(t *testing.T) {
	p := rfPair(t)
	st := p.ours.GetKVStore(p.keys["a"])
	restore := rfReplace(t, filepath.Join(rfSnapDir(p.dir, 10), "metadata"), 10)
	if err := p.ours.LoadLatestVersion(); err == nil {
		t.Fatal("loaded")
	}
	restore()
	if err := p.ours.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	runtime.GC()
	o := outcome(func() any {
		st.Set([]byte("k05x"), []byte("1"))
		return string(st.Get([]byte("k05")))
	})
	if !strings.Contains(o, "not loaded") {
		t.Errorf("write then read of a kept store after a failed reload and Close: %s, want a panic wrapping ErrNotLoaded", o)
	}
}
