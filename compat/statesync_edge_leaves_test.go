package compat_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
)

func ssEdgeLeaf(k, v string, ver int64) *snapshottypes.SnapshotItem {
	var vb []byte
	if v != "" {
		vb = []byte(v)
	}
	return &snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte(k), Value: vb, Version: ver}}}
}

func ssEdgeInner(k string, ver int64, h int32) *snapshottypes.SnapshotItem {
	return &snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte(k), Version: ver, Height: h}}}
}

// TestStateSyncEdgeLeaves: streams that rootmulti takes, with an empty key, a
// huge key, empty values: side by side.
func TestStateSyncEdgeLeaves(t *testing.T) {
	bigKey := string(bytes.Repeat([]byte("z"), 1<<20))
	cases := map[string][]*snapshottypes.SnapshotItem{
		"empty key": {storeItem("a"), ssEdgeLeaf("", "v", 1), ssEdgeLeaf("b", "", 2), ssEdgeInner("b", 3, 1), storeItem("b")},
		"big key":   {storeItem("a"), ssEdgeLeaf("a", "v", 1), ssEdgeLeaf(bigKey, "", 2), ssEdgeInner(bigKey, 3, 1), storeItem("b")},
		"only a":    {storeItem("a"), ssEdgeLeaf("a", "v", 1), storeItem("b"), ssEdgeLeaf("x", "", 3)},
	}
	m := mount{iavl: []string{"a", "b"}}
	for name, items := range cases {
		t.Run(name, func(t *testing.T) {
			stream := ssEncode(t, items)
			keys := keyring{}
			rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
			ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
			defer ms.Close()
			_, rerr := rs.Restore(3, snapshottypes.CurrentFormat, ssReader(stream))
			_, oerr := ms.Restore(3, snapshottypes.CurrentFormat, ssReader(stream))
			if rerr != nil || oerr != nil {
				t.Fatalf("rootmulti %v ours %v", rerr, oerr)
			}
			a, b := rs.LastCommitID(), ms.LastCommitID()
			if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
				t.Fatalf("restored rootmulti %v ours %v", a, b)
			}
			if x, y := ssShapeStream(t, rs, 3), ssShapeStream(t, ms, 3); !bytes.Equal(x, y) || !bytes.Equal(x, stream) {
				t.Fatalf("streams differ")
			}
			for i := 0; i < 3; i++ {
				var ids [2]storetypes.CommitID
				for j, s := range []storetypes.CommitMultiStore{rs, ms} {
					s.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "n%d", i), []byte("v"))
					if i == 1 {
						s.GetKVStore(keys["a"]).Delete([]byte("b"))
						s.GetKVStore(keys["a"]).Delete([]byte("a"))
					}
					ids[j] = s.Commit()
				}
				if ids[0].Version != ids[1].Version || !bytes.Equal(ids[0].Hash, ids[1].Hash) {
					t.Fatalf("commit %d: rootmulti %v ours %v", i, ids[0], ids[1])
				}
			}
		})
	}
}
