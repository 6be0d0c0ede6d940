package compat_test

import (
	"context"
	"errors"
	"testing"

	"cosmossdk.io/log"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestRewriteSnapshotNotLoaded: RewriteSnapshot, which returns an error,
// reports ErrNotLoaded before a load and after Close (as Snapshot,
// GetCommitInfo and CacheMultiStoreWithVersion do); it does not panic.
func TestRewriteSnapshotNotLoaded(t *testing.T) {
	call := func(ms *compat.MultiStore) (panicked any, err error) {
		defer func() { panicked = recover() }()
		return nil, ms.RewriteSnapshot(context.Background())
	}

	ms, err := compat.NewMultiStore(t.TempDir(), log.NewNopLogger(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	keys := keyring{}
	mountAll(ms, keys, mount{iavl: []string{"bank"}})
	if p, err := call(ms); p != nil || !errors.Is(err, compat.ErrNotLoaded) {
		t.Errorf("before the load: err %v, panic %v; want an error wrapping ErrNotLoaded", err, p)
	}

	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	ms.GetKVStore(keys["bank"]).Set([]byte("k"), []byte("v"))
	ms.Commit()
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	if p, err := call(ms); p != nil || !errors.Is(err, compat.ErrNotLoaded) {
		t.Errorf("after Close: err %v, panic %v; want an error wrapping ErrNotLoaded", err, p)
	}
}
