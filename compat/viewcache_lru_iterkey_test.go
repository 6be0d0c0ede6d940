package compat_test

import (
	"errors"
	"fmt"
	"testing"

	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestTreeStoreIteratorKeyAfterClose: an iterator of a TreeStore (default
// config: copies) stepped to a pair whose key it has not read yet, then
// read after the multistore closed, gives that pair: it holds its snapshot
// until its Close, so the step's first Key, copied from the memory map, is
// the key (not nil, which would be taken for data, nor a fault).
func TestTreeStoreIteratorKeyAfterClose(t *testing.T) {
	p, ak := pairOnSnapshot(t) // 100 keys of store "a" in the current snapshot
	st := p.ours.GetKVStore(ak)
	it := st.Iterator(nil, nil)
	defer outcome(func() any { return it.Close() })
	if !it.Valid() || string(it.Key()) != "k000" {
		t.Fatalf("iterator at %q", it.Key())
	}
	it.Next() // k001, not read yet
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	if got := outcome(func() any { return fmt.Sprintf("%q", it.Key()) }); got != `"k001"` {
		t.Errorf("Key of an iterator stepped before its multistore closed and read after: %s; want \"k001\"", got)
	}
	if got := outcome(func() any { return fmt.Sprintf("%q", it.Value()) }); got != `"v1"` {
		t.Errorf("Value of the same iterator: %s; want \"v1\"", got)
	}
}

// TestViewCacheLeastRecentlyUsed: the multistore keeps Config.QueryViews
// versions open, evicting the least recently used one ("Config.QueryViews
// entries, least recently used evicted first", views.go). Older versions
// are rebuilt for their branches (no snapshot rewrites here), so an evicted
// one can no longer be read (ErrVersionReleased). With a cache of 2:
// branches of versions 1 then 2 are opened, version 1 is used again (a
// query), and the commit of version 5 evicts version 2, the least recently
// used, not version 1, the oldest insertion: the branch of 1 still reads,
// the branch of 2 fails.
func TestViewCacheLeastRecentlyUsed(t *testing.T) {
	cfg := compat.DefaultConfig()
	cfg.Enable = true
	cfg.QueryViews = 2
	cfg.SnapshotInterval = -1
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, mount{iavl: []string{"a"}}, nil)
	defer ms.Close()
	ak := keys["a"]
	commit := func(v int) {
		ms.GetKVStore(ak).Set([]byte("k"), []byte(fmt.Sprint("v", v)))
		ms.GetKVStore(ak).Set([]byte("j"), []byte(fmt.Sprint("j", v)))
		ms.Commit()
	}
	for v := 1; v <= 4; v++ {
		commit(v)
	}
	branch := func(v int64) types.KVStore {
		b, err := ms.CacheMultiStoreWithVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		return b.GetKVStore(ak)
	}
	// (each key is read once per branch: the branch's cache would answer
	// a second read without reading the version)
	read := func(kv types.KVStore, key string) (string, any) {
		var got string
		var rec any
		func() {
			defer func() { rec = recover() }()
			got = string(kv.Get([]byte(key)))
		}()
		return got, rec
	}
	b1 := branch(1) // rebuilt and cached: versions 4, 1
	b2 := branch(2) // rebuilt and cached: versions 1, 2
	if got, rec := read(b1, "k"); got != "v1" || rec != nil {
		t.Fatalf("branch of version 1: %q %v", got, rec)
	}
	if got, rec := read(b2, "k"); got != "v2" || rec != nil {
		t.Fatalf("branch of version 2: %q %v", got, rec)
	}
	// a use of version 1: now the most recently used
	if res, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("k"), Height: 1}); err != nil || string(res.Value) != "v1" {
		t.Fatalf("query at height 1: %v %v", res, err)
	}
	commit(5) // evicts one of 1 and 2: the least recently used, 2
	if got, rec := read(b1, "j"); got != "j1" || rec != nil {
		t.Errorf("branch of version 1, the most recently used of the cache's 2 versions, after the commit of version 5: %q %v; want j1 (version 2, the least recently used, evicted instead)", got, rec)
	}
	if _, rec := read(b2, "j"); !isErr(rec, compat.ErrVersionReleased) {
		t.Errorf("branch of version 2, the least recently used, after the commit of version 5: %v; want a panic wrapping ErrVersionReleased", rec)
	}
}

// isErr reports whether rec, a recovered panic, is an error wrapping target.
func isErr(rec any, target error) bool {
	err, ok := rec.(error)
	return ok && errors.Is(err, target)
}
