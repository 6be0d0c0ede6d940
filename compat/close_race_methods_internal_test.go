package compat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// callNoPanic runs f and returns what it panicked with, if anything.
func callNoPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestMethodsBesideClose: each method of the multistore that loads the
// database pointer and then uses it is run with the pointer as it read it
// just before a Close on another goroutine swapped it out and closed the
// database (the interleaving of TestQueryBesideClose's "database closed").
// Each answers with an error (ErrNotLoaded or multitree.ErrClosed) or as
// after Close, never panics.
func TestMethodsBesideClose(t *testing.T) {
	closedErr := func(err error) bool {
		return errors.Is(err, ErrNotLoaded) || errors.Is(err, multitree.ErrClosed)
	}
	cases := []struct {
		name string
		call func(ms *MultiStore) error
	}{
		{"WorkingHash", func(ms *MultiStore) error { ms.WorkingHash(); return nil }},
		{"LastCommitInfo", func(ms *MultiStore) error { ms.LastCommitInfo(); return nil }},
		{"GetCommitInfo", func(ms *MultiStore) error {
			if _, err := ms.GetCommitInfo(4); err == nil {
				return errors.New("no error")
			}
			return nil
		}},
		{"CacheMultiStoreWithVersion", func(ms *MultiStore) error {
			if _, err := ms.CacheMultiStoreWithVersion(4); err == nil {
				return errors.New("no error")
			}
			return nil
		}},
		{"Snapshot", func(ms *MultiStore) error {
			var buf bytes.Buffer
			if err := ms.Snapshot(4, protoio.NewDelimitedWriter(&buf)); !closedErr(err) {
				return fmt.Errorf("err %v; want ErrNotLoaded or multitree.ErrClosed", err)
			}
			return nil
		}},
		{"Query", func(ms *MultiStore) error {
			if _, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("x"), Height: 4, Prove: true}); !closedErr(err) {
				return fmt.Errorf("err %v; want ErrNotLoaded or multitree.ErrClosed", err)
			}
			return nil
		}},
		{"LastCommitID", func(ms *MultiStore) error { ms.LastCommitID(); ms.LatestVersion(); return nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := besideCloseStore(t)
			db := ms.db.Load()
			if err := ms.Close(); err != nil {
				t.Fatal(err)
			}
			ms.db.Store(db) // as read by the method before Close swapped it out
			defer ms.db.Store(nil)
			var err error
			if p := callNoPanic(func() { err = c.call(ms) }); p != nil {
				t.Fatalf("%s beside Close panicked: %v", c.name, p)
			}
			if err != nil {
				t.Errorf("%s beside Close: %v", c.name, err)
			}
		})
	}
}

// TestRewriteSnapshotBesideClose: RewriteSnapshot, whose database a Close
// or a reload on another goroutine closes while it runs, returns an error
// (ErrNotLoaded), as when called after Close; it does not panic pointing
// the stores at a closed database's trees, nor point them at the old
// database's trees after a reload.
func TestRewriteSnapshotBesideClose(t *testing.T) {
	check := func(t *testing.T, ms *MultiStore, what string) {
		var err error
		p := callNoPanic(func() { err = ms.RewriteSnapshot(context.Background()) })
		if p != nil {
			t.Fatalf("RewriteSnapshot beside %s panicked: %v; want an error", what, p)
		}
		if !errors.Is(err, ErrNotLoaded) && !errors.Is(err, multitree.ErrClosed) {
			t.Errorf("RewriteSnapshot beside %s: %v; want ErrNotLoaded or multitree.ErrClosed", what, err)
		}
	}
	t.Run("Close", func(t *testing.T) {
		ms := besideCloseStore(t)
		db := ms.db.Load()
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
		ms.db.Store(db) // as read by RewriteSnapshot before Close swapped it out
		defer ms.db.Store(nil)
		check(t, ms, "Close")
	})
	t.Run("reload", func(t *testing.T) {
		ms := besideCloseStore(t)
		defer ms.Close()
		old := ms.db.Load()
		if err := ms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
		cur := ms.db.Load()
		ms.db.Store(old) // as read by RewriteSnapshot before the reload closed it
		defer ms.db.Store(cur)
		check(t, ms, "a reload")
	})
}
