package compat_test

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// boundedMemHeapReader is a protoio.Reader over an encoded stream that, at
// the end of the stream, records the live heap (after a GC): what the restore
// holds once it has read all of its input, before its Commit.
type boundedMemHeapReader struct {
	r       protoio.Reader
	atEnd   uint64
	reached bool
}

func (h *boundedMemHeapReader) ReadMsg(m proto.Message) error {
	err := h.r.ReadMsg(m)
	if err == io.EOF && !h.reached {
		h.reached = true
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.atEnd = ms.HeapAlloc
	}
	return err
}

// boundedMemStoreStream encodes a state-sync stream of n empty stores (a
// store item each, no nodes).
func boundedMemStoreStream(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := protoio.NewDelimitedWriter(&buf)
	for i := 0; i < n; i++ {
		item := &snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_Store{
			Store: &snapshottypes.SnapshotStoreItem{Name: fmt.Sprintf("s%04d", i)},
		}}
		if err := w.WriteMsg(item); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestBoundedMemRestoreManyStores: a state-sync stream of a few KiB holding
// only store items (no nodes) must not make the restore hold memory in
// proportion to the number of stores times a fixed large per-store cost.
// Each store item costs ~9 bytes of input; a finished store's importer
// (memiavl.Importer -> snapshot.Writer) is kept until the database's
// Commit, but not its ~850 KiB of file write buffers.
func TestBoundedMemRestoreManyStores(t *testing.T) {
	const stores = 96
	stream := boundedMemStoreStream(t, stores)
	dir := filepath.Join(testutil.ShmTempDir(t), "db")
	base := testutil.LiveHeap()
	r := &boundedMemHeapReader{r: protoio.NewDelimitedReader(bytes.NewReader(stream), 1<<20)}
	start := time.Now()
	_, err := compat.RestoreDB(dir, 5, snapshottypes.CurrentFormat, r, multitree.Options{})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !r.reached {
		t.Fatal("the restore did not read the stream to its end")
	}
	held := int64(r.atEnd) - int64(base)
	t.Logf("stream of %d bytes (%d store items): heap held at the end of the stream %.1f MiB (%.0f KiB per store), in %v",
		len(stream), stores, float64(held)/(1<<20), float64(held)/1024/stores, time.Since(start))
	// 64 KiB per store would be generous (the names, the map entries, an
	// importer's small records); the input is under 1 KiB.
	if limit := int64(stores) * 64 << 10; held > limit {
		t.Fatalf("a stream of %d bytes made the restore hold %.1f MiB (limit %.1f MiB): finished stores keep their snapshot writers' buffers",
			len(stream), float64(held)/(1<<20), float64(limit)/(1<<20))
	}
}
