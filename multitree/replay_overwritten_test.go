package multitree

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestReplayDropsOverwrittenValues: a reopen replays the log, and a key set
// again in a later replayed version keeps its first key (in its leaf,
// updated in place, and in the inner nodes made when it was inserted);
// that key must not keep the first value with it. 64 keys set to 256 KiB
// values in version 1 and to 16-byte values in versions 2-4: the reopened
// database holds about what the open one held, not the 16 MiB of
// overwritten values.
func TestReplayDropsOverwrittenValues(t *testing.T) {
	const (
		hot      = 64
		size     = 256 << 10
		versions = 4
	)
	value := func(v, i int) []byte {
		if v == 1 {
			return bytes.Repeat([]byte{byte(v), byte(i)}, size/2)
		}
		return bytes.Repeat([]byte{byte(v), byte(i)}, 8)
	}
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"s"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= versions; v++ {
		for i := 0; i < hot; i++ {
			if err := db.Set("s", []byte(fmt.Sprintf("hot%03d", i)), value(v, i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	openHeap := testutil.LiveHeap()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	closedHeap := testutil.LiveHeap()
	before := int64(openHeap) - int64(closedHeap)

	db, err = Open(dir, Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	after := int64(testutil.LiveHeap()) - int64(closedHeap)
	for i := 0; i < hot; i++ {
		got, err := db.Get("s", []byte(fmt.Sprintf("hot%03d", i)))
		if err != nil || !bytes.Equal(got, value(versions, i)) {
			t.Fatalf("hot key %d after replay: %v", i, err)
		}
	}
	t.Logf("heap of the open database before close %.2f MiB, after the replaying reopen %.2f MiB (overwritten values %d MiB)",
		float64(before)/(1<<20), float64(after)/(1<<20), hot*size>>20)
	// the same state: allow 2 MiB for nodes and buffers, far below the
	// 16 MiB of overwritten values
	if limit := before + 2<<20; after > limit {
		t.Errorf("after the replay the database holds %.2f MiB of heap, before close %.2f MiB: "+
			"the overwritten values of version 1 (%d MiB) are kept through their keys",
			float64(after)/(1<<20), float64(before)/(1<<20), hot*size>>20)
	}
}
