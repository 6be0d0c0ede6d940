package compat_test

// Assertions of cosmossdk.io/store v1.1.1's own tests (cachemulti,
// rootmulti, iavl) that the side-by-side tests of this package do not
// make, run against compat.MultiStore.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// sdkMounts is the SDK tests' newMultiStoreWithMounts: store1..3, loaded.
func sdkMounts(t *testing.T) *compat.MultiStore {
	t.Helper()
	ms, err := compat.NewMultiStore(t.TempDir(), log.NewNopLogger(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	for _, n := range []string{"store1", "store2", "store3"} {
		ms.MountStoreWithDB(types.NewKVStoreKey(n), types.StoreTypeIAVL, nil)
	}
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	return ms
}

// panicValue returns what f panics with, nil if it returns.
func panicValue(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestSDKCacheMultiGetKVStore (cachemulti's TestStoreGetKVStore): a key
// that is not mounted panics with cachemulti's message, on a branch of
// the working state and on a historical one.
func TestSDKCacheMultiGetKVStore(t *testing.T) {
	ms := sdkMounts(t)
	ms.Commit()
	key := types.NewKVStoreKey("abc")
	want := fmt.Sprintf("kv store with key %v has not been registered in stores", key)
	versioned, err := ms.CacheMultiStoreWithVersion(1)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]types.CacheMultiStore{"CacheMultiStore": ms.CacheMultiStore(), "CacheMultiStoreWithVersion": versioned} {
		if got := panicValue(func() { s.GetStore(key) }); got != want {
			t.Errorf("%s: GetStore panicked with %v, want %q", name, got, want)
		}
		if got := panicValue(func() { s.GetKVStore(key) }); got != want {
			t.Errorf("%s: GetKVStore panicked with %v, want %q", name, got, want)
		}
	}
}

// TestSDKSnapshotErrors (rootmulti's TestMultistoreSnapshot_Errors):
// Snapshot of height 0 or of an unknown height fails, also with a nil
// writer, without a panic.
func TestSDKSnapshotErrors(t *testing.T) {
	ms := sdkMounts(t)
	for i := 0; i < 3; i++ {
		ms.GetStoreByName("store1").(types.KVStore).Set([]byte{byte(i)}, []byte{1})
		ms.Commit()
	}
	for _, h := range []uint64{0, 9} {
		var err error
		if p := panicValue(func() { err = ms.Snapshot(h, nil) }); p != nil {
			t.Fatalf("height %d: panic %v", h, p)
		}
		if err == nil {
			t.Errorf("height %d: no error", h)
		}
	}
}

// TestSDKTreeStoreSetInitialVersion (iavl's TestSetInitialVersion): the
// initial version set on a store itself (types.StoreWithInitialVersion)
// before the first commit is the first commit's, for every store.
func TestSDKTreeStoreSetInitialVersion(t *testing.T) {
	ms := sdkMounts(t)
	ms.GetStoreByName("store1").(types.StoreWithInitialVersion).SetInitialVersion(5)
	if v := ms.Commit().Version; v != 5 {
		t.Fatalf("first commit at %d, want 5", v)
	}
	if v := ms.GetStoreByName("store2").(types.CommitKVStore).LastCommitID().Version; v != 5 {
		t.Fatalf("store2 committed %d, want 5", v)
	}
}

// TestSDKTraceConcurrency (rootmulti's TestTraceConcurrency, for the race
// detector): SetTracingContext beside a traced branch's writes.
func TestSDKTraceConcurrency(t *testing.T) {
	multi := sdkMounts(t)
	b := &bytes.Buffer{}
	key := multi.StoreKeysByName()["store1"]
	tc := types.TraceContext(map[string]interface{}{"blockHeight": 64})
	multi.SetTracer(b)
	multi.SetTracingContext(tc)
	cms := multi.CacheMultiStore()
	store1 := cms.GetKVStore(key)
	_ = store1.CacheWrapWithTrace(b, tc)
	stop, stopW := make(chan struct{}), make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				store1.Set([]byte{1}, []byte{1})
				cms.Write()
			}
		}
	}()
	go func() {
		for {
			select {
			case <-stopW:
				return
			default:
				multi.SetTracingContext(tc)
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	stop <- struct{}{}
	stopW <- struct{}{}
}
