package compat_test

import (
	"testing"

	"cosmossdk.io/store/types"
)

// TestMountAfterDroppedStoreCommit: once the Commit after an upgrade that
// deleted store "b" has unmounted it, rootmulti has forgotten the name, so a
// store of that name (a new key of any type, or the old key itself) mounts
// again before the next load; the reload then serves it beside rootmulti.
func TestMountAfterDroppedStoreCommit(t *testing.T) {
	cases := []struct {
		name string
		key  func(old types.StoreKey) (types.StoreKey, types.StoreType)
	}{
		{"transient", func(types.StoreKey) (types.StoreKey, types.StoreType) {
			return types.NewTransientStoreKey("b"), types.StoreTypeTransient
		}},
		{"iavl", func(types.StoreKey) (types.StoreKey, types.StoreType) {
			return types.NewKVStoreKey("b"), types.StoreTypeIAVL
		}},
		{"same key", func(old types.StoreKey) (types.StoreKey, types.StoreType) {
			return old, types.StoreTypeIAVL
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, smallMount)
			p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}, "b": {{[]byte("k"), []byte("v")}}})
			if err := p.ours.Close(); err != nil {
				t.Fatal(err)
			}
			up := &types.StoreUpgrades{Deleted: []string{"b"}}
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, up)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, up)
			p.commit(map[string][][2][]byte{"a": {{[]byte("k2"), []byte("v")}}})

			nk, typ := c.key(p.keys["b"])
			sameOutcome(t, "MountStoreWithDB of the freed name", p, func(s types.CommitMultiStore) any {
				s.MountStoreWithDB(nk, typ, nil)
				return "mounted"
			})
			// (an IAVL store of the name is new to the last version: a
			// load must add it with an upgrade, and refuses it without)
			sameOutcome(t, "reload", p, func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
			sameOutcome(t, "key of the name after the reload", p, func(s types.CommitMultiStore) any {
				return s.(interface {
					StoreKeysByName() map[string]types.StoreKey
				}).StoreKeysByName()["b"] == nk
			})
			if typ == types.StoreTypeIAVL {
				// adding it back: rootmulti refuses a store its database
				// held before (TestRootmultiSideReaddDeletedStore); ours
				// adds it empty
				if err := p.ours.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"b"}}); err != nil {
					t.Fatalf("load adding the store back: %v", err)
				}
				if got := p.ours.StoreKeysByName()["b"]; got != nk {
					t.Fatalf("StoreKeysByName()[\"b\"] after adding the store back: %v, want %v", got, nk)
				}
				if got := p.ours.GetKVStore(nk).Get([]byte("k")); got != nil {
					t.Fatalf("the store added back holds the deleted store's %q", got)
				}
				p.ours.GetKVStore(nk).Set([]byte("k3"), []byte("v3"))
				if id := p.ours.Commit(); id.Version != 3 {
					t.Fatalf("commit after adding the store back: %v", id)
				}
				if got := p.ours.GetKVStore(nk).Get([]byte("k3")); string(got) != "v3" {
					t.Fatalf("the store added back after its commit: %q", got)
				}
				return
			}
			p.commit(map[string][][2][]byte{"a": {{[]byte("k3"), []byte("v3")}}}) // the same app hash
		})
	}
}
