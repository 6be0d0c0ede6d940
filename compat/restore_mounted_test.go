package compat_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// restoreOutcomes are the outcomes of a restore on both sides.
type restoreOutcomes struct {
	ourErr, rootErr error
	ours, root      storetypes.CommitID
}

// restoreBoth restores stream at height into rootmulti and into our
// multistore, both freshly loaded with the mount m, and returns the outcomes.
func restoreBoth(t *testing.T, m mount, height uint64, stream []byte) restoreOutcomes {
	t.Helper()
	var o restoreOutcomes
	keys := keyring{}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	_, o.rootErr = rs.Restore(height, snapshottypes.CurrentFormat, ssReader(stream))
	o.root = rs.LastCommitID()
	ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
	t.Cleanup(func() { ms.Close() })
	_, o.ourErr = ms.Restore(height, snapshottypes.CurrentFormat, ssReader(stream))
	o.ours = ms.LastCommitID()
	t.Logf("ours: %v %v; rootmulti: %v %v", o.ourErr, o.ours, o.rootErr, o.root)
	return o
}

// TestRestoreNoIAVLMounted: a multistore that mounts no IAVL store (only a
// transient one) is given a stream of five IAVL stores. rootmulti refuses it
// ("cannot import into non-IAVL store"), and so must ours: restoring the
// unmounted stores would report the source's app hash at the snapshot's
// height, and the next commit would drop them.
func TestRestoreNoIAVLMounted(t *testing.T) {
	src, hashes := ssOurs(t, t.TempDir(), ssBlocks(testutil.Rand(t), ssStores, 6, 10))
	defer src.Close()
	stream := ssStream(t, src, 6)
	keys := keyring{}
	m := mount{transient: "t"}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	_, rootErr := rs.Restore(6, snapshottypes.CurrentFormat, ssReader(stream))
	if rootErr == nil {
		t.Fatalf("rootmulti restored into no IAVL store: %v", rs.LastCommitID())
	}
	ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
	defer ms.Close()
	_, ourErr := ms.Restore(6, snapshottypes.CurrentFormat, ssReader(stream))
	if ourErr != nil {
		return
	}
	restored := ms.LastCommitID()
	next := ms.Commit() // the unmounted stores leave the state
	t.Fatalf("restore of 5 unmounted stores succeeded: version %d app hash %X (the source's %X, which state sync checks: equal %v); "+
		"the next commit drops them: version %d app hash %X; rootmulti refused the stream: %v",
		restored.Version, restored.Hash, hashes[6], bytes.Equal(restored.Hash, hashes[6]), next.Version, next.Hash, rootErr)
}

// TestRestoreStoreNamedAsTransient: the stream names a store that is
// mounted as a transient store, beside an IAVL store and alone; rootmulti
// refuses it, and so must ours (with no IAVL store mounted too).
func TestRestoreStoreNamedAsTransient(t *testing.T) {
	for _, iavl := range [][]string{{"a"}, nil} {
		t.Run(fmt.Sprint(iavl), func(t *testing.T) {
			items := []*snapshottypes.SnapshotItem{}
			if len(iavl) > 0 {
				items = append(items, storeItem("a"))
			}
			items = append(items, storeItem("t"),
				&snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte("k"), Value: []byte("v"), Version: 1}}})
			o := restoreBoth(t, mount{iavl: iavl, transient: "t"}, 3, ssEncode(t, items))
			ourErr, ours, rootErr, root := o.ourErr, o.ours, o.rootErr, o.root
			if rootErr == nil {
				t.Fatalf("rootmulti restored: %v", root)
			}
			if ourErr == nil || ours.Version != 0 {
				t.Fatalf("restore into a transient store's name: %v, version %d hash %X", ourErr, ours.Version, ours.Hash)
			}
		})
	}
}

// TestImportIAVLEmptyStoreMemDB: an application database on a
// backend that keeps empty values (cosmos-db's MemDB, as pebble does), with
// a store never written: iavl loads its empty root, and the import gives
// rootmulti's app hash.
func TestImportIAVLEmptyStoreMemDB(t *testing.T) {
	mem := dbm.NewMemDB()
	stores := []string{"acc", "empty"}
	rs := migLoad(t, mem, stores, nil)
	var last storetypes.CommitID
	for _, css := range ssBlocks(testutil.Rand(t), stores[:1], 4, 10) {
		last = ssApply(rs, css)
	}
	migImport(t, mem, last.Version, multitree.Options{}, last.Hash)
	migImport(t, mem, 2, multitree.Options{}, func() []byte { ci, _ := rs.GetCommitInfo(2); return ci.Hash() }())
}

// TestRestoreHostileStreamsSideBySide restores hostile variants of a
// good stream into rootmulti and ours, with the same mounted stores: ours
// must refuse each and stay at version 0, and rootmulti must not accept
// one with the source's app hash.
func TestRestoreHostileStreamsSideBySide(t *testing.T) {
	src, hashes := ssOurs(t, t.TempDir(), ssBlocks(testutil.Rand(t), ssStores, 6, 10))
	defer src.Close()
	good := ssStream(t, src, 6)
	var storeAt []int
	for i, it := range ssItems(t, good) {
		if it.GetStore() != nil {
			storeAt = append(storeAt, i)
		}
	}
	ext := &ssExtension
	edit := func(f func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem) []byte {
		return ssEncode(t, f(ssItems(t, good)))
	}
	cases := map[string][]byte{
		"extension after the first store": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append(its[:storeAt[1]:storeAt[1]], append([]*snapshottypes.SnapshotItem{ext}, its[storeAt[1]:]...)...)
		}),
		"a store twice": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append(its[:storeAt[2]:storeAt[2]], its[storeAt[1]:]...)
		}),
		"unmounted store": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append(its[:len(its)-1:len(its)-1], storeItem("zzz"), ext)
		}),
		"node before any store": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append([]*snapshottypes.SnapshotItem{its[storeAt[1]+1]}, its...)
		}),
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			o := restoreBoth(t, mount{iavl: ssStores, transient: "t"}, 6, stream)
			ourErr, ours, rootErr, root := o.ourErr, o.ours, o.rootErr, o.root
			if rootErr == nil && bytes.Equal(root.Hash, hashes[6]) {
				t.Fatalf("rootmulti restored the source's app hash: the case is not hostile")
			}
			if ourErr == nil || ours.Version != 0 {
				t.Fatalf("ours: %v, version %d (rootmulti: %v)", ourErr, ours.Version, rootErr)
			}
		})
	}
}

// TestSnapshotHeightsSideBySide: Snapshot of height 0, of a
// future height and of a huge one fail on both stores.
func TestSnapshotHeightsSideBySide(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	for _, h := range []uint64{0, 2, 1 << 63, ^uint64(0)} {
		var a, b bytes.Buffer
		oerr := p.ours.Snapshot(h, protoio.NewDelimitedWriter(&a))
		rerr := p.oracle.Snapshot(h, protoio.NewDelimitedWriter(&b))
		if oerr == nil || rerr == nil || a.Len() != 0 {
			t.Fatalf("snapshot of %d: ours %v (%d bytes), rootmulti %v", h, oerr, a.Len(), rerr)
		}
	}
}
