package compat_test

import (
	"path/filepath"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// hookedReader runs hook before its first message is read: in the middle
// of a Restore, once the multistore has let go of its database.
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

// TestBranchReadDuringRestore: a branch taken before a state-sync restore
// (BaseApp's check state, which simulations and CheckTx read on their own
// goroutines while the snapshot manager's goroutine restores) read while
// the restore runs, here from inside the stream's first read: rootmulti's
// stores read their still empty trees, the importers not having committed
// anything; ours must read empty too, not panic on the closed database.
func TestBranchReadDuringRestore(t *testing.T) {
	blocks := ssBlocks(testutil.Rand(t), ssStores, 6, 10)
	src, _ := ssOurs(t, t.TempDir(), blocks)
	defer src.Close()
	stream := ssStream(t, src, 6)
	keys := keyring{}
	m := mount{iavl: ssStores}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
	defer ms.Close()
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
