package multitree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReadOnlyViewCacheDropsPrunedSnapshots: a read-only database beside
// the writer caches a view rebuilt from an older kept snapshot; once the
// writer's prune has removed that snapshot, the read-only database's next
// ViewAt drops the cached view, so that the removed files are unmapped
// (and their disk space freed) without waiting for the cache to evict it
// or for Close, and the pruned version is no longer served.
func TestReadOnlyViewCacheDropsPrunedSnapshots(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			v := db.Version() + 1
			for k := 0; k < 20; k++ {
				if err := db.Set("a", []byte(fmt.Sprintf("key%03d", k)), []byte(fmt.Sprintf("val%d-%d", v, k))); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rewrite := func() {
		t.Helper()
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	commit(5)
	rewrite() // snapshot 5
	commit(5)
	rewrite() // snapshot 10; 5 is kept
	commit(2)

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	vw, err := ro.ViewAt(7) // rebuilt from snapshot 5, and cached
	if err != nil {
		t.Fatal(err)
	}
	if got, err := vw.Get("a", []byte("key000")); err != nil || string(got) != "val7-0" {
		t.Fatalf("version 7 reads %q, %v", got, err)
	}
	vw.Release()
	mapsFive := func() (bool, leakSample) {
		s := leakRead(t, dir, false)
		for _, d := range s.mapDirs {
			if strings.HasPrefix(d, snapshotDirName(5)) {
				return true, s
			}
		}
		return false, s
	}
	if five, s := mapsFive(); !five {
		t.Fatalf("the cached view of version 7 does not map snapshot 5: %v", s)
	}

	commit(3)
	rewrite() // snapshot 15; the prune removes 5
	for i := 0; ; i++ {
		db.mu.Lock()
		busy := db.mu.pruning
		db.mu.Unlock()
		if !busy && pruned(dir, 5) {
			break
		}
		if i == 1000 {
			t.Fatal("snapshot 5 was not pruned")
		}
		time.Sleep(10 * time.Millisecond)
	}

	vw, err = ro.ViewAt(11) // from snapshot 10
	if err != nil {
		t.Fatal(err)
	}
	if got, err := vw.Get("a", []byte("key000")); err != nil || string(got) != "val11-0" {
		t.Fatalf("version 11 reads %q, %v", got, err)
	}
	vw.Release()
	// files are unmapped in the background once their last holder goes
	five, s := mapsFive()
	for i := 0; five && i < 200; i++ {
		time.Sleep(10 * time.Millisecond)
		five, s = mapsFive()
	}
	if five {
		t.Errorf("the writer pruned snapshot 5 and no view of it is held, yet it stays mapped after the next ViewAt: %v", s)
	}
	if vw, err := ro.ViewAt(7); !errors.Is(err, ErrVersion) {
		if err == nil {
			vw.Release()
		}
		t.Errorf("ViewAt(7) after the prune of its snapshot: %v, want ErrVersion", err)
	}
}
