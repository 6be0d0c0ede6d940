package compat_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// bmLargeValuesDB makes a database of stores stores of leaves leaves of valueSize
// bytes each, rewritten so that all values are in the snapshot (mapped).
func bmLargeValuesDB(t *testing.T, dir string, stores, leaves, valueSize int) *multitree.DB {
	t.Helper()
	var names []string
	for i := 0; i < stores; i++ {
		names = append(names, fmt.Sprintf("s%03d", i))
	}
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: names, SnapshotInterval: -1, RewriteConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		for j := 0; j < leaves; j++ {
			v := make([]byte, valueSize)
			v[0], v[1] = byte(j), name[3]
			if err := db.Set(name, []byte(fmt.Sprintf("k%05d", j)), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = multitree.Open(dir, multitree.Options{SnapshotInterval: -1, RewriteConcurrency: 1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestBoundedMemStateSyncLargeValues: a state-sync export (SnapshotDB) piped
// into a restore (RestoreDB) of one store of 512 values of 256 KiB (128 MiB
// of values, in the source's mapped snapshot) grows the heap by a few MiB,
// as for 64 such values: both sides stream (memory bounded by the tree's
// height and the write buffers, see SnapshotDB and RestoreDB), none holds
// the values it passes on.
func TestBoundedMemStateSyncLargeValues(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	top := testutil.ShmTempDir(t)
	db := bmLargeValuesDB(t, filepath.Join(top, "src"), 1, 512, 256<<10)
	defer db.Close()
	grew := testutil.HeapGrowth(t, "export -> restore of 512 x 256 KiB values", func() error {
		pr, pw := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			err := compat.SnapshotDB(db, uint64(db.Version()), protoio.NewDelimitedWriter(pw))
			pw.CloseWithError(err)
			errc <- err
		}()
		_, err := compat.RestoreDB(filepath.Join(top, "dst"), uint64(db.Version()), snapshottypes.CurrentFormat,
			protoio.NewDelimitedReader(pr, 64<<20), multitree.Options{})
		pr.Close()
		if e := <-errc; err == nil {
			err = e
		}
		return err
	})
	if limit := int64(24 << 20); grew > limit {
		t.Fatalf("a state-sync export and restore of 128 MiB of values grew the heap by %.1f MiB (limit %d MiB)", float64(grew)/(1<<20), limit>>20)
	}
}

// bmTreeStream is a protoio.Reader that generates, item by item, a
// state-sync stream of stores stores, each a perfect IAVL tree of 1<<height
// leaves (post-order, version 1) whose keys are keySize bytes long.
type bmTreeStream struct {
	stores, height, keySize int
	store                   int
	nodes                   [][2]int // the current store's post-order: leaf index of the key, height
	next                    int
}

func (z *bmTreeStream) key(i int) []byte {
	k := make([]byte, z.keySize)
	copy(k, fmt.Sprintf("k%08d", i))
	return k
}

// postOrder appends the nodes of the perfect subtree of leaves [lo, lo+1<<h).
func postOrder(nodes [][2]int, lo, h int) [][2]int {
	if h == 0 {
		return append(nodes, [2]int{lo, 0})
	}
	half := 1 << (h - 1)
	nodes = postOrder(nodes, lo, h-1)
	nodes = postOrder(nodes, lo+half, h-1)
	return append(nodes, [2]int{lo + half, h})
}

func (z *bmTreeStream) ReadMsg(m proto.Message) error {
	item := m.(*snapshottypes.SnapshotItem)
	if z.next == len(z.nodes) {
		if z.store == z.stores {
			return io.EOF
		}
		*item = snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_Store{
			Store: &snapshottypes.SnapshotStoreItem{Name: fmt.Sprintf("s%04d", z.store)},
		}}
		z.store++
		z.nodes, z.next = postOrder(z.nodes[:0], 0, z.height), 0
		return nil
	}
	n := z.nodes[z.next]
	z.next++
	node := &snapshottypes.SnapshotIAVLItem{Key: z.key(n[0]), Version: 1, Height: int32(n[1])}
	if n[1] == 0 {
		node.Value = []byte{1}
	}
	*item = snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: node}}
	return nil
}

// bmHeldAtEnd restores the generated stream of stores stores and returns
// the live heap growth at the end of the stream (before the Commit).
func bmHeldAtEnd(t *testing.T, stores, height, keySize int) int64 {
	t.Helper()
	dir := filepath.Join(testutil.ShmTempDir(t), "db")
	base := testutil.LiveHeap()
	r := &boundedMemHeapReader{r: &bmTreeStream{stores: stores, height: height, keySize: keySize}}
	if _, err := compat.RestoreDB(dir, 5, snapshottypes.CurrentFormat, r, multitree.Options{}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !r.reached {
		t.Fatal("the restore did not read the stream to its end")
	}
	return int64(r.atEnd) - int64(base)
}

// TestBoundedMemRestoreFinishedStoresDropKeys: a restore (and every import
// through multitree.Importer) keeps each finished store's importer until
// the database's Commit; what it keeps is small records, not the copies of
// keys the import needed (its pending subtrees' smallest keys, the last
// key, its snapshot writer's), so that memory grows with the trees'
// heights, not with the number of stores times the key size. Here stores
// of 16 leaves with 64 KiB keys (trees of height 4): each extra store adds
// a few KiB, not ~400 KiB of key copies.
func TestBoundedMemRestoreFinishedStoresDropKeys(t *testing.T) {
	const height, keySize = 4, 64 << 10
	few := bmHeldAtEnd(t, 4, height, keySize)
	many := bmHeldAtEnd(t, 36, height, keySize)
	perStore := (many - few) / 32
	t.Logf("held at the end of the stream: 4 stores %.1f MiB, 36 stores %.1f MiB: %.0f KiB per extra store (keys of %d KiB, trees of height %d)",
		float64(few)/(1<<20), float64(many)/(1<<20), float64(perStore)/1024, keySize>>10, height)
	if limit := int64(64 << 10); perStore > limit {
		t.Fatalf("each finished store keeps %.0f KiB until the Commit (limit %d KiB): its importer's pending-subtree frames "+
			"and last key, and its writer's last key, still hold copies of %d KiB keys", float64(perStore)/1024, limit>>10, keySize>>10)
	}
}
