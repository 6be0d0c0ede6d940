package compat_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/store/rootmulti"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// branchPairs reads every pair of store through branch b, a recovered
// panic as the error.
func branchPairs(b storetypes.CacheMultiStore, key storetypes.StoreKey) (pairs [][2][]byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	it := b.GetKVStore(key).Iterator(nil, nil)
	defer it.Close()
	for ; it.Valid(); it.Next() {
		pairs = append(pairs, [2][]byte{it.Key(), it.Value()})
	}
	return pairs, nil
}

// restoreBranchPair returns the state-sync stream of a source database of
// the stores ssStores at height 6, and rootmulti and ours, both empty and
// mounting those stores, to restore it into.
func restoreBranchPair(t *testing.T) ([]byte, keyring, *rootmulti.Store, *compat.MultiStore) {
	t.Helper()
	src, _ := ssOurs(t, t.TempDir(), ssBlocks(testutil.Rand(t), ssStores, 6, 10))
	defer src.Close()
	stream := ssStream(t, src, 6)
	keys := keyring{}
	m := mount{iavl: ssStores}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
	t.Cleanup(func() { ms.Close() })
	return stream, keys, rs, ms
}

type hookedReader struct {
	protoio.Reader
	hook func()
}

func (h *hookedReader) ReadMsg(m proto.Message) error {
	if h.hook != nil {
		h.hook()
		h.hook = nil
	}
	return h.Reader.ReadMsg(m)
}

// TestBranchBeforeRestoreReadsRestoredState: a branch taken before a
// state-sync restore, as BaseApp's check state is (it lives until the first
// Commit after the restore, serving CheckTx and simulations), reads the
// restored state on rootmulti, whose importers restore into the trees its
// stores read. Ours must read the same, not the empty database the restore
// replaced. A branch taken before a failed restore reads the reopened,
// still empty, database.
func TestBranchBeforeRestoreReadsRestoredState(t *testing.T) {
	stream, keys, rs, ms := restoreBranchPair(t)

	// a failed restore first (a stream cut inside the first store): the
	// old branch reads the database reopened as it was
	failed := ms.CacheMultiStore()
	if _, err := ms.Restore(6, snapshottypes.CurrentFormat, ssReader(stream[:len(stream)/3])); err == nil {
		t.Fatal("restore of a cut stream succeeded")
	}
	for _, name := range ssStores {
		if got, err := branchPairs(failed, keys[name]); err != nil || len(got) != 0 {
			t.Fatalf("store %s through a branch taken before a failed restore: %d pairs, %v", name, len(got), err)
		}
	}

	rb, ob := rs.CacheMultiStore(), ms.CacheMultiStore()
	if _, err := rs.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range ssStores {
		want, err := branchPairs(rb, keys[name])
		if err != nil {
			t.Fatalf("rootmulti, store %s: %v", name, err)
		}
		got, err := branchPairs(ob, keys[name])
		if err != nil {
			t.Fatalf("store %s through a branch taken before the restore: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("store %s through a branch taken before the restore: %d pairs, rootmulti's %d", name, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i][0], want[i][0]) || !bytes.Equal(got[i][1], want[i][1]) {
				t.Fatalf("store %s, pair %d: %x=%x, rootmulti's %x=%x", name, i, got[i][0], got[i][1], want[i][0], want[i][1])
			}
		}
		total += len(want)
	}
	if total == 0 {
		t.Fatal("the restored stores are empty")
	}
	// the branches still write to their own caches only, and the next
	// block commits on the restored state
	ob.GetKVStore(keys["bank"]).Set([]byte("branch-only"), []byte("x"))
	ms.GetKVStore(keys["bank"]).Set([]byte("k"), []byte("v"))
	rs.GetKVStore(keys["bank"]).Set([]byte("k"), []byte("v"))
	if o, r := ms.Commit(), rs.Commit(); o.Version != r.Version || !bytes.Equal(o.Hash, r.Hash) {
		t.Fatalf("commit after the restore: %v, rootmulti %v", o, r)
	}
}

// TestBranchReadDuringRestore: a branch taken before a state-sync restore
// (BaseApp's check state, which simulations and CheckTx read on their own
// goroutines while the snapshot manager's goroutine restores) read while
// the restore runs, here from inside the stream's first read: rootmulti's
// stores read their still empty trees, the importers not having committed
// anything; ours must read empty too, not panic on the closed database.
func TestBranchReadDuringRestore(t *testing.T) {
	stream, keys, rs, ms := restoreBranchPair(t)
	for _, s := range []storetypes.CommitMultiStore{rs, ms} {
		branch := s.CacheMultiStore()
		var errs []error
		r := &hookedReader{Reader: ssReader(stream), hook: func() {
			for _, name := range ssStores {
				got, err := branchPairs(branch, keys[name])
				if err == nil && len(got) != 0 {
					t.Errorf("%T: store %s read %d pairs during the restore", s, name, len(got))
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
		}}
		if _, err := s.Restore(6, snapshottypes.CurrentFormat, r); err != nil {
			t.Fatal(err)
		}
		if len(errs) > 0 {
			t.Errorf("%T: a branch taken before the restore, read during it: %v", s, errs[0])
		}
	}
}

// TestRestoreRefusesUncommittedWrites: rootmulti's importers refuse a store
// whose working tree holds a key (iavl's "tree must be empty"), as after a
// write at version 0 that was not committed. Ours refuses too, before
// anything is touched, and keeps the write. Once the key is deleted again
// the trees are empty, and both restore the same state.
func TestRestoreRefusesUncommittedWrites(t *testing.T) {
	stream, keys, rs, ms := restoreBranchPair(t)
	key := []byte("uncommitted")
	// the stream's first store: rootmulti fails before it imports any
	// (a later one would leave the stores before it imported, at the
	// height, and its next restore refused)
	first := ssStores[0]
	for _, s := range []storetypes.CommitMultiStore{rs, ms} {
		s.GetKVStore(keys[first]).Set(key, []byte("v"))
	}
	if _, err := rs.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err == nil {
		t.Fatal("rootmulti restored into a store holding an uncommitted write")
	}
	_, err := ms.Restore(6, snapshottypes.CurrentFormat, ssReader(stream))
	if !errors.Is(err, multitree.ErrUncommitted) {
		t.Fatalf("restore into a store holding an uncommitted write: %v, want ErrUncommitted", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", first)) {
		t.Errorf("the refusal does not name the store %q: %v", first, err)
	}
	if got := ms.GetKVStore(keys[first]).Get(key); string(got) != "v" {
		t.Fatalf("the uncommitted write after the refused restore: %q, want \"v\"", got)
	}
	for _, name := range ssStores[1:] {
		if got, err := branchPairs(ms.CacheMultiStore(), keys[name]); err != nil || len(got) != 0 {
			t.Fatalf("store %s after the refused restore: %d pairs, %v", name, len(got), err)
		}
	}

	for _, s := range []storetypes.CommitMultiStore{rs, ms} {
		s.GetKVStore(keys[first]).Delete(key)
	}
	if _, err := rs.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatalf("rootmulti, with the write deleted again: %v", err)
	}
	if _, err := ms.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatalf("with the write deleted again: %v", err)
	}
	if o, r := ms.LastCommitID(), rs.LastCommitID(); o.Version != r.Version || !bytes.Equal(o.Hash, r.Hash) {
		t.Fatalf("after the restore: %v, rootmulti %v", o, r)
	}
}
