package multitree

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestReplayHoldsOnlyLiveValues replays versions that each overwrite the
// same hot keys with large values and add one small cold key. Only the
// last version's hot values and the cold keys are live, but every logged
// record holds a cold key: if the replayed trees kept their keys and
// values inside the records read from the log, the whole log since the
// snapshot would stay in memory. After the reopen the heap must hold
// about what the database held before it closed.
func TestReplayHoldsOnlyLiveValues(t *testing.T) {
	versions, hot, size := 200, 50, 8<<10
	if testing.Short() {
		versions = 60
	}
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"s"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	value := func(v, i int) []byte { return bytes.Repeat([]byte{byte(v), byte(i)}, size/2) }
	for v := 1; v <= versions; v++ {
		for i := 0; i < hot; i++ {
			if err := db.Set("s", []byte(fmt.Sprintf("hot%03d", i)), value(v, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Set("s", []byte(fmt.Sprintf("cold%05d", v)), []byte{byte(v)}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logged := uint64(versions * hot * size) // what the log holds, about
	before := liveHeap()
	db, err = Open(dir, Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	grown := int64(liveHeap()) - int64(before)
	if !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatal("reopened database has another app hash")
	}
	for i := 0; i < hot; i++ {
		got, err := db.Get("s", []byte(fmt.Sprintf("hot%03d", i)))
		if err != nil || !bytes.Equal(got, value(versions, i)) {
			t.Fatalf("hot key %d after replay: %v", i, err)
		}
	}
	// the live values are hot*size bytes; allow four times that plus the
	// nodes, far below the log's size
	if limit := int64(4*hot*size + versions*4096); grown > limit {
		t.Errorf("the replayed database holds %d bytes of heap, limit %d; the log holds %d", grown, limit, logged)
	}
	t.Logf("heap after replay: %d bytes; live values %d bytes; log %d bytes", grown, hot*size, logged)
}
