package compat

import (
	"context"
	"errors"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestRewriteSnapshotBesideClosePendingWrites: the interleaving of
// TestRewriteSnapshotBesideClose (the database pointer read just before a
// Close on another goroutine closed it), with a write buffered in a store
// (a block in progress): RewriteSnapshot answers ErrNotLoaded, as without
// the write, and does not panic applying the write to the closed database.
func TestRewriteSnapshotBesideClosePendingWrites(t *testing.T) {
	ms := besideCloseStore(t)
	db := ms.db.Load()
	ms.GetKVStore(ms.keysByName["a"]).Set([]byte("y"), []byte("pending"))
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	ms.db.Store(db) // as read by RewriteSnapshot before Close swapped it out
	defer ms.db.Store(nil)
	var err error
	if p := callNoPanic(func() { err = ms.RewriteSnapshot(context.Background()) }); p != nil {
		t.Fatalf("RewriteSnapshot beside Close with a buffered write panicked: %v", p)
	}
	if !errors.Is(err, ErrNotLoaded) && !errors.Is(err, multitree.ErrClosed) {
		t.Fatalf("err %v; want ErrNotLoaded or multitree.ErrClosed", err)
	}
}

// TestRewriteSnapshotBesideReloadKeepsNewWrites: RewriteSnapshot that read
// the database just before a reload replaced it leaves the stores of the
// new load alone: their buffered writes, which belong to the new database,
// are still there after it answers ErrNotLoaded.
func TestRewriteSnapshotBesideReloadKeepsNewWrites(t *testing.T) {
	ms := besideCloseStore(t)
	defer ms.Close()
	old := ms.db.Load()
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	cur := ms.db.Load()
	key := ms.keysByName["a"]
	ms.GetKVStore(key).Set([]byte("y"), []byte("new load's write"))
	ms.db.Store(old) // as read by RewriteSnapshot before the reload closed it
	var err error
	p := callNoPanic(func() { err = ms.RewriteSnapshot(context.Background()) })
	ms.db.Store(cur)
	if p != nil {
		t.Errorf("RewriteSnapshot beside a reload panicked: %v", p)
	} else if !errors.Is(err, ErrNotLoaded) && !errors.Is(err, multitree.ErrClosed) {
		t.Errorf("err %v; want ErrNotLoaded or multitree.ErrClosed", err)
	}
	if got := ms.GetKVStore(key).Get([]byte("y")); string(got) != "new load's write" {
		t.Fatalf("the new load's buffered write is gone: Get = %q", got)
	}
}

// TestWorkingHashBesideClosePendingWrites: WorkingHash beside Close answers
// as before a load (TestMethodsBesideClose), also with a buffered write,
// which it does not apply to the closed database.
func TestWorkingHashBesideClosePendingWrites(t *testing.T) {
	ms := besideCloseStore(t)
	db := ms.db.Load()
	ms.GetKVStore(ms.keysByName["a"]).Set([]byte("y"), []byte("pending"))
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	ms.db.Store(db)
	defer ms.db.Store(nil)
	if p := callNoPanic(func() { ms.WorkingHash() }); p != nil {
		t.Fatalf("WorkingHash beside Close with a buffered write panicked: %v", p)
	}
}
