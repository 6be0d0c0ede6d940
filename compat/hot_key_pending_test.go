package compat_test

import (
	"bytes"
	"testing"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestHotKeyWritesNotHeldUntilCommit: a key written again and again in one
// block through a TreeStore, with a read after each write (each read
// applies the buffered writes through multitree.DB.ApplyChangeSets), keeps
// one value in the version's pending log entry, not every value it was
// given: 512 writes of 64 KiB hold about one value until Commit, not
// 32 MiB.
func TestHotKeyWritesNotHeldUntilCommit(t *testing.T) {
	const writes, size = 512, 64 << 10
	ms, err := compat.NewMultiStore(t.TempDir(), log.NewNopLogger(), compat.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	bank := storetypes.NewKVStoreKey("bank")
	ms.MountStoreWithDB(bank, storetypes.StoreTypeIAVL, nil)
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	st := ms.GetKVStore(bank)
	st.Set([]byte("other"), []byte("x"))
	ms.Commit()

	base := testutil.LiveHeap()
	var last []byte
	for i := 0; i < writes; i++ {
		last = bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2)
		st.Set([]byte("supply"), last)
		if got := st.Get([]byte("supply")); !bytes.Equal(got, last) {
			t.Fatal("read back another value")
		}
	}
	held := int64(testutil.LiveHeap()) - int64(base)
	ms.Commit()
	afterCommit := int64(testutil.LiveHeap()) - int64(base)
	t.Logf("heap held before Commit %.1f MiB, after %.1f MiB (one value is %d KiB, %d writes)",
		float64(held)/(1<<20), float64(afterCommit)/(1<<20), size>>10, writes)
	if limit := int64(4 << 20); held > limit {
		t.Errorf("one key overwritten %d times with %d KiB values holds %.1f MiB until Commit (limit %d MiB): every superseded value is kept in the pending log entry",
			writes, size>>10, float64(held)/(1<<20), limit>>20)
	}
}
