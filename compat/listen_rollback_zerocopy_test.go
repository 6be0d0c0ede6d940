package compat_test

import (
	"bytes"
	"context"
	"testing"

	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestZeroCopyListenerPairsAcrossRollbackAndRestore: as
// TestZeroCopyListenerPairsAcrossReload, for the reloads that close the
// database and then load again (RollbackToVersion, and Restore's failure
// path): the listener's unread value, a slice of a snapshot of the closed
// database, must stay mapped until the next Commit (compat/README.md: "a
// reload (a Load method, a rollback, a restore) keeps the snapshots of the
// database it closes mapped until then").
func TestZeroCopyListenerPairsAcrossRollback(t *testing.T) {
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
	if err := ms.RollbackToVersion(1); err != nil {
		t.Fatal(err)
	}
	for _, kv := range ms.PopStateCache() {
		if string(kv.Key) == "k2" {
			if snapshot.Mapping(kv.Value) != sp {
				t.Fatal("the listener's value of k2 is a slice of a snapshot mapping the rollback unmapped")
			}
			return
		}
	}
	t.Fatal("no k2 in the change set")
}
