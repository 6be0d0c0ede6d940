package compat_test

import (
	"context"
	"errors"
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
