package multitree

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

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
	want := closeWithHash(t, db)
	logged := uint64(versions * hot * size) // what the log holds, about
	before := testutil.LiveHeap()
	db, err = Open(dir, Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	grown := int64(testutil.LiveHeap()) - int64(before)
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

// TestReplayStoresInParallel replays versions that change several stores,
// which the replay applies in parallel, and one logged version whose change
// sets name two stores the database does not have: the reopened database
// has the hashes of the one that committed them, and the open that meets
// the bad version fails naming the first unknown store in the entry's
// order, whatever store finished first.
func TestReplayStoresInParallel(t *testing.T) {
	stores := []string{"a", "b", "c", "d"}
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 30; v++ {
		for s, name := range stores {
			for i := 0; i < 100*(s+1); i++ {
				k := []byte(fmt.Sprintf("%s-%d", name, (v*7+i)%500))
				if (v+i)%5 == 0 {
					if err := db.Delete(name, k); err != nil {
						t.Fatal(err)
					}
				} else if err := db.Set(name, k, []byte(fmt.Sprint(v, i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	want := closeWithHash(t, db)
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatal("the replayed database has another app hash")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	l, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pairs := func(n int) []wal.KVPair {
		ps := make([]wal.KVPair, n)
		for i := range ps {
			ps[i] = wal.KVPair{Key: []byte(fmt.Sprint("k", i)), Value: []byte{1}}
		}
		return ps
	}
	// the large valid store first, so that the unknown ones are taken by
	// the other worker; "y" comes before "x" in the entry, but after it
	// in the largest-first order the tasks run in
	err = l.Append(wal.Entry{Version: 31, ChangeSets: []wal.ChangeSet{
		{Name: "d", Pairs: pairs(2000)}, {Name: "y", Pairs: pairs(100)}, {Name: "a", Pairs: pairs(100)}, {Name: "x", Pairs: pairs(150)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrUnknownStore) || !strings.Contains(err.Error(), `"y"`) || !strings.Contains(err.Error(), "version 31") {
			t.Fatalf("open with a logged change set of unknown stores y and x: %v", err)
		}
	}
}

// closeWithHash closes db and returns its last committed app hash.
func closeWithHash(t *testing.T, db *DB) []byte {
	t.Helper()
	h := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}
