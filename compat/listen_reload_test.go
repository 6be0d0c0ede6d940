package compat_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// listenPair is rootmulti and ours side by side, both with listeners and a
// tracer, driven by the same operations.
type listenPair struct {
	t      *testing.T
	keys   keyring
	o      *rootmulti.Store
	c      *compat.MultiStore
	to, tc bytes.Buffer
}

func newListenPair(t *testing.T, cfg compat.Config, m mount) *listenPair {
	z := &listenPair{t: t, keys: keyring{}}
	z.o = rootmulti.NewStore(dbm.NewMemDB(), log.NewNopLogger(), metrics.NewNoOpMetrics())
	c, err := compat.NewMultiStore(t.TempDir(), log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	z.c = c
	t.Cleanup(func() { z.c.Close() })
	mountAll(z.o, z.keys, m)
	mountAll(z.c, z.keys, m)
	return z
}

func (z *listenPair) both(f func(s types.CommitMultiStore)) {
	z.t.Helper()
	a := outcome(func() any { f(z.c); return nil })
	b := outcome(func() any { f(z.o); return nil })
	if strings.HasPrefix(a, "panic") != strings.HasPrefix(b, "panic") {
		z.t.Errorf("DIFF outcome: ours %s | rootmulti %s", a, b)
	}
}

func (z *listenPair) load(f func(s types.CommitMultiStore) error) {
	z.t.Helper()
	ec, eo := f(z.c), f(z.o)
	if (ec == nil) != (eo == nil) {
		z.t.Fatalf("DIFF load: ours %v | rootmulti %v", ec, eo)
	}
}

func listenPairs(ps []*types.StoreKVPair) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s:%v:%q=%q\n", p.StoreKey, p.Delete, p.Key, p.Value)
	}
	return b.String()
}

func (z *listenPair) pop(what string) {
	z.t.Helper()
	a, b := listenPairs(z.c.PopStateCache()), listenPairs(z.o.PopStateCache())
	if a != b {
		z.t.Errorf("DIFF PopStateCache %s:\n ours:\n%s rootmulti:\n%s", what, a, b)
	}
}

// trace compares the trace lines written since the last call (sorted when
// unordered: cachemulti writes its stores in map order).
func (z *listenPair) trace(what string, unordered bool) {
	z.t.Helper()
	a, b := z.tc.String(), z.to.String()
	z.tc.Reset()
	z.to.Reset()
	if unordered {
		la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
		sort.Strings(la)
		sort.Strings(lb)
		a, b = strings.Join(la, "\n"), strings.Join(lb, "\n")
	}
	if a != b {
		z.t.Errorf("DIFF trace %s:\n ours:\n%s\n rootmulti:\n%s", what, a, b)
	}
}

func (z *listenPair) commit() {
	z.t.Helper()
	a, b := z.c.Commit(), z.o.Commit()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		z.t.Fatalf("DIFF Commit: ours %d %X | rootmulti %d %X", a.Version, a.Hash, b.Version, b.Hash)
	}
}

// TestListenersUpgradeReloadSameInstance: listeners and a tracer on both
// stores, through a reload of the same instance with store upgrades (a store
// added, one deleted while still mounted): the change sets PopStateCache
// returns and the bytes traced are rootmulti's.
func TestListenersUpgradeReloadSameInstance(t *testing.T) {
	z := newListenPair(t, testConfig(), mount{iavl: []string{"s1", "s2", "s3"}, transient: "t", memory: "m"})
	all := []types.StoreKey{z.keys["s1"], z.keys["s2"], z.keys["s3"], z.keys["t"], z.keys["m"]}
	z.c.AddListeners(all)
	z.o.AddListeners(all)
	z.c.SetTracer(&z.tc)
	z.o.SetTracer(&z.to)
	z.load(func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.both(func(s types.CommitMultiStore) {
		for _, n := range []string{"s1", "s2", "s3", "t", "m"} {
			st := s.GetKVStore(z.keys[n])
			st.Set([]byte("a"), []byte(n+"-a"))
			st.Set([]byte("b"), []byte{})
			st.Delete([]byte("c"))
		}
	})
	z.trace("direct writes", false)
	z.pop("direct writes")
	z.commit()
	z.pop("after commit 1")
	z.trace("commit 1", false)

	// writes, not popped, then a reload of the same instance with
	// upgrades (s3 deleted while mounted, s4 added); s4 listened before load
	z.both(func(s types.CommitMultiStore) {
		s.GetKVStore(z.keys["s1"]).Set([]byte("pre"), []byte("reload"))
	})
	k4 := z.keys.key("s4", types.StoreTypeIAVL)
	z.c.MountStoreWithDB(k4, types.StoreTypeIAVL, nil)
	z.o.MountStoreWithDB(k4, types.StoreTypeIAVL, nil)
	z.c.AddListeners([]types.StoreKey{k4})
	z.o.AddListeners([]types.StoreKey{k4})
	z.load(func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"s4"}, Deleted: []string{"s3"}})
	})
	z.trace("upgrade load", false)
	z.pop("after upgrade reload")
	z.both(func(s types.CommitMultiStore) {
		s.GetKVStore(z.keys["s3"]).Set([]byte("dropped"), []byte("x"))
		s.GetKVStore(z.keys["s3"]).Get([]byte("a"))
		s.GetKVStore(k4).Set([]byte("new"), []byte("4"))
		br := s.CacheMultiStore()
		br.GetKVStore(z.keys["s3"]).Set([]byte("dropped-br"), []byte("y"))
		br.GetKVStore(z.keys["s3"]).Delete([]byte("a"))
		nested := br.CacheMultiStore()
		nested.GetKVStore(k4).Set([]byte("n"), []byte("nested"))
		nested.GetKVStore(z.keys["s1"]).Delete([]byte("a"))
		nested.Write()
		br.Write()
	})
	z.trace("writes after upgrade", true)
	z.pop("writes after upgrade")
	z.both(func(s types.CommitMultiStore) {
		h, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			panic(err)
		}
		h.GetKVStore(z.keys["t"]).Set([]byte("hist-t"), []byte("t"))
		h.GetKVStore(z.keys["m"]).Set([]byte("hist-m"), []byte("m"))
		h.GetKVStore(z.keys["s3"]).Get([]byte("a"))
		it := h.GetKVStore(z.keys["s3"]).Iterator(nil, nil)
		for ; it.Valid(); it.Next() {
			_, _ = it.Key(), it.Value()
		}
		it.Close()
		h.Write()
	})
	z.trace("historical branch", true)
	z.pop("historical branch")
	z.commit()
	z.pop("after commit 2")
	z.trace("commit 2", false)
	z.both(func(s types.CommitMultiStore) {
		s.GetKVStore(k4).Set([]byte("after"), []byte("2"))
		br := s.CacheMultiStore()
		br.GetKVStore(z.keys["s1"]).Set([]byte("br"), []byte("1"))
		br.Write()
	})
	z.trace("after commit 2 writes", true)
	z.pop("after commit 2 writes")
	z.commit()
	// an older version loaded: listeners kept, unpopped pairs kept
	z.both(func(s types.CommitMultiStore) {
		s.GetKVStore(z.keys["s1"]).Set([]byte("lost"), []byte("1"))
	})
	z.load(func(s types.CommitMultiStore) error { return s.LoadVersion(2) })
	z.both(func(s types.CommitMultiStore) {
		s.GetKVStore(z.keys["s1"]).Set([]byte("after"), []byte("2"))
		s.GetKVStore(k4).Set([]byte("after"), []byte("2"))
	})
	z.trace("after LoadVersion", false)
	z.pop("after LoadVersion")
}

// TestZeroCopyListenerPairsAcrossReload: with zero copy, a value read from a
// snapshot in the working version and written (the listener keeps it), then
// a reload of the same instance before the Commit: PopStateCache returns
// the pair afterwards, as rootmulti's does, and its value is still a slice
// of the open mapping it was read from (the reload keeps the snapshots of
// the database it closed mapped until the next Commit; the new database
// maps the same file, often at the same address, so the test checks the
// mapping, not only the bytes). A rollback closes the database and then
// loads again: the load, finding nothing open, must not release what the
// first close kept.
func TestZeroCopyListenerPairsAcrossReload(t *testing.T) {
	reloads := map[string]func(*compat.MultiStore) error{
		"LoadLatestVersion": (*compat.MultiStore).LoadLatestVersion,
		"RollbackToVersion": func(ms *compat.MultiStore) error { return ms.RollbackToVersion(1) },
	}
	for name, reload := range reloads {
		t.Run(name, func(t *testing.T) {
			keys := keyring{}
			cfg := testConfig()
			cfg.ZeroCopy = true
			ms := newOurs(t, t.TempDir(), cfg, keys, mount{iavl: []string{"a"}}, nil)
			defer ms.Close()
			key := keys["a"]
			ms.AddListeners([]types.StoreKey{key})
			want := bytes.Repeat([]byte("value-of-k1 "), 400)
			ms.GetKVStore(key).Set([]byte("k1"), bytes.Clone(want))
			ms.Commit()
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			ms.GetKVStore(key).Set([]byte("x"), []byte("y"))
			ms.Commit()
			ms.PopStateCache()
			st := ms.GetKVStore(key)
			v1 := st.Get([]byte("k1"))
			sp := snapshot.Mapping(v1)
			if sp == nil {
				t.Skip("k1 is not read from a mapped snapshot")
			}
			st.Set([]byte("k2"), v1)
			if err := reload(ms); err != nil {
				t.Fatal(err)
			}
			for _, kv := range ms.PopStateCache() {
				if string(kv.Key) == "k2" {
					if snapshot.Mapping(kv.Value) != sp {
						t.Fatalf("the listener's value of k2 is a slice of a snapshot mapping the %s unmapped", name)
					}
					return
				}
			}
			t.Fatal("no k2 in the change set")
		})
	}
}

// TestZeroCopyListenerReloadBeforePop: with zero copy, the block's change
// set (not yet popped) holds a value read from the snapshot a background
// rewrite's switch released; a reload of the same instance before
// PopStateCache keeps that snapshot mapped (as the next Commit would), so
// the value still reads what was written.
func TestZeroCopyListenerReloadBeforePop(t *testing.T) {
	keys := keyring{}
	cfg := testConfig()
	cfg.ZeroCopy, cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = true, 4, 0, 1
	ms := newOurs(t, t.TempDir(), cfg, keys, mount{iavl: []string{"a"}}, nil)
	defer ms.Close()
	key := keys["a"]
	ms.AddListeners([]types.StoreKey{key})
	want := bytes.Repeat([]byte("value-of-k1 "), 400)
	st := ms.GetKVStore(key)
	st.Set([]byte("k1"), bytes.Clone(want))
	for i := 0; i < 200; i++ {
		st.Set(fmt.Appendf(nil, "f%04d", i), bytes.Repeat([]byte{byte(i)}, 100))
	}
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms.PopStateCache()
	for v, deadline := 2, time.Now().Add(time.Minute); ms.DB().SnapshotVersion() == 1; v++ {
		if time.Now().After(deadline) {
			t.Fatal("no background rewrite was switched to")
		}
		if v > 5 {
			time.Sleep(time.Millisecond)
		}
		ms.PopStateCache()
		st = ms.GetKVStore(key)
		st.Set([]byte("k2"), st.Get([]byte("k1")))
		ms.Commit()
	}
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	// the new mappings must not take the old one's place by chance
	if got := listenedValueIs(ms.PopStateCache(), "k2", want); got != "true" {
		t.Fatalf("the listener's value of k2 after a reload: %s", got)
	}
}
