package compat_test

import (
	"fmt"
	"testing"

	"cosmossdk.io/store/types"
)

// TestRefusedUpgradeAtVersion0KeepsWrites: a loaded multistore refuses a
// load whose upgrades its checks refuse before it changes anything, its
// stores' uncommitted writes included (compat/README), also before the
// first commit, when InitChain's genesis writes are uncommitted. At
// version 0 the upgrades were not checked before the reopen, so a refused
// one (a rename between two mounted stores) was refused only after the
// database was closed, and the writes were lost.
func TestRefusedUpgradeAtVersion0KeepsWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		up   *types.StoreUpgrades
	}{
		{"rename-between-mounted", &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "a", NewKey: "b"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := keyring{}
			m := mount{iavl: []string{"a", "b", "c"}}
			ms := newOurs(t, t.TempDir(), testConfig(), keys, m, nil)
			defer ms.Close()
			ms.GetKVStore(keys["b"]).Set([]byte("genesis"), []byte("v"))
			before := fmt.Sprintf("%X", ms.WorkingHash())
			err := ms.LoadLatestVersionAndUpgrade(tc.up)
			if err == nil {
				t.Fatal("load accepted")
			}
			t.Logf("refused: %v", err)
			got := outcome(func() any { return fmt.Sprintf("%q", ms.GetKVStore(keys["b"]).Get([]byte("genesis"))) })
			after := outcome(func() any { return fmt.Sprintf("%X", ms.WorkingHash()) })
			if got != `"v"` || after != before {
				t.Errorf("after the refused load: uncommitted write reads %s (want \"v\"), working hash %s (was %s)", got, after, before)
			}
		})
	}
}
