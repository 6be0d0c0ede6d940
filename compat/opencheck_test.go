package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// bankSnapshot commits 500 keys to the store "bank" of a new multistore
// with cfg, writes snapshot 1 and closes it.
func bankSnapshot(t *testing.T, cfg compat.Config) (string, keyring, mount) {
	t.Helper()
	dir := t.TempDir()
	keys := keyring{}
	m := mount{iavl: []string{"bank", "acc"}}
	ms := newOurs(t, dir, cfg, keys, m, nil)
	bank := ms.GetKVStore(keys.key("bank", 0))
	for i := 0; i < 500; i++ {
		bank.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("value %d", i)))
	}
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, keys, m
}

// TestOpenCheckStopsTheNode damages a value in the current snapshot: with
// open-check "sync" the store does not load; with "background" it loads and
// the next Commit panics naming the damaged file, after which a restart
// with "none" still loads (the operator's way to look at the state).
func TestOpenCheckStopsTheNode(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotInterval = -1
	dir, keys, m := bankSnapshot(t, cfg)
	var ms *compat.MultiStore
	// the bank kvs of snapshot 1 (multitree/format.go): its last byte is
	// in the last value
	kvs := filepath.Join(dir, "snapshot-00000000000000000001", "s-bank", snapshot.FileKVs)
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	defer testutil.DamageByte(t, kvs, fi.Size()-1)()

	cfg.OpenCheck = "sync"
	ms, err = compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
	if err == nil {
		mountAll(ms, keys, m)
		err = ms.LoadLatestVersion()
		ms.Close()
	}
	if !errors.Is(err, multitree.ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
		t.Fatalf("sync open check: %v", err)
	}

	cfg.OpenCheck = "background"
	ms = newOurs(t, dir, cfg, keys, m, nil)
	if err := ms.DB().WaitOpenCheck(context.Background()); !errors.Is(err, multitree.ErrCorrupt) {
		t.Fatalf("background open check: %v", err)
	}
	func() {
		defer func() {
			r := recover()
			err, _ := r.(error)
			if !errors.Is(err, multitree.ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
				t.Fatalf("Commit after the check: panic %v", r)
			}
		}()
		ms.GetKVStore(keys.key("acc", 0)).Set([]byte("a"), []byte("b"))
		ms.Commit()
	}()
	ms.Close()

	cfg.OpenCheck = "none"
	ms = newOurs(t, dir, cfg, keys, m, nil)
	defer ms.Close()
	if got := ms.LastCommitID().Version; got != 2 {
		t.Fatalf("reopened at %d, want 2 (the version the panicking Commit committed)", got)
	}
	// a state-sync snapshot checks the files it reads from first
	var buf bytes.Buffer
	err = ms.Snapshot(2, protoio.NewDelimitedWriter(&buf))
	if !errors.Is(err, multitree.ErrCorrupt) || !strings.Contains(err.Error(), kvs) || buf.Len() != 0 {
		t.Fatalf("state-sync snapshot of a damaged store: %v, %d bytes written", err, buf.Len())
	}
}

// TestDamagedStoreIterationPanics damages a leaf record of the current
// snapshot so that iteration meets it: the store's iterators, a cache
// branch's and a past version's panic with ErrCorrupt naming the file, as
// Get does, instead of ending the iteration early as if the state ended
// there.
func TestDamagedStoreIterationPanics(t *testing.T) {
	for _, zeroCopy := range []bool{false, true} {
		t.Run(fmt.Sprintf("zeroCopy=%v", zeroCopy), func(t *testing.T) {
			cfg := testConfig()
			cfg.SnapshotInterval = -1
			cfg.ZeroCopy = zeroCopy
			dir, keys, m := bankSnapshot(t, cfg)
			// the top byte of leaf 250's key length: the key then lies
			// beyond the end of kvs
			leaves := filepath.Join(dir, "snapshot-00000000000000000001", "s-bank", snapshot.FileLeaves)
			testutil.DamageByte(t, leaves, 250*snapshot.RecordSize+51)
			cfg.OpenCheck = "none"
			ms := newOurs(t, dir, cfg, keys, m, nil)
			defer ms.Close()

			// each iteration must serve exactly the pairs before leaf 250
			iterate := func(name string, want int, open func() storetypes.Iterator) {
				t.Helper()
				n := 0
				func() {
					defer func() {
						r := recover()
						err, _ := r.(error)
						if !errors.Is(err, memiavl.ErrCorrupt) || !strings.Contains(err.Error(), leaves) {
							t.Errorf("%s: panic %v after %d pairs, want ErrCorrupt naming %s", name, r, n, leaves)
						}
					}()
					it := open()
					defer it.Close()
					for ; it.Valid(); it.Next() {
						n++
					}
				}()
				if n != want {
					t.Errorf("%s: %d pairs before the panic, want %d", name, n, want)
				}
			}
			store := ms.GetKVStore(keys.key("bank", 0))
			iterate("store ascending", 250, func() storetypes.Iterator { return store.Iterator(nil, nil) })
			iterate("store descending", 249, func() storetypes.Iterator { return store.ReverseIterator(nil, nil) })
			iterate("store range", 10, func() storetypes.Iterator { return store.Iterator([]byte("k00240"), []byte("k00260")) })
			cache := ms.CacheMultiStore().GetKVStore(keys.key("bank", 0))
			iterate("cache branch", 250, func() storetypes.Iterator { return cache.Iterator(nil, nil) })
			past, err := ms.CacheMultiStoreWithVersion(1)
			if err != nil {
				t.Fatal(err)
			}
			iterate("version 1", 250, func() storetypes.Iterator { return past.GetKVStore(keys.key("bank", 0)).Iterator(nil, nil) })
			// keys the damage does not reach still read
			if v := store.Get([]byte("k00010")); string(v) != "value 10" {
				t.Errorf("Get k00010 = %q", v)
			}
		})
	}
}

// TestLostCurrentStopsTheNode: a database directory that lost its current
// pointer is not taken for a new chain: the load fails with ErrCorrupt (the
// store always opens with CreateIfMissing) and the snapshot stays.
func TestLostCurrentStopsTheNode(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotInterval = -1
	dir, keys, m := bankSnapshot(t, cfg)
	if err := os.Remove(filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	mountAll(ms, keys, m)
	// asked before the load by the SDK's upgrade store loader
	if id := ms.LastCommitID(); id.Version != 0 {
		t.Errorf("LastCommitID before the load: %v", id)
	}
	if err := ms.LoadLatestVersion(); !errors.Is(err, multitree.ErrCorrupt) {
		t.Fatalf("load without current: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshot-00000000000000000001")); err != nil {
		t.Fatalf("the snapshot after the refused load: %v", err)
	}
}
