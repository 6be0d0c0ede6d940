package multitree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestViewAtBesideStalledPrune: a ViewAt rebuild stalls in a slow read of the
// oldest log segment (a FIFO stands for a slow disk) while a snapshot
// rewrite's prune truncates the log; a ViewAt of another version, which
// reads other files, must not wait for either. With keep 10 the prune
// removes nothing; with keep 1 it would remove the segment the stalled
// rebuild reads, and keeps it instead.
func TestViewAtBesideStalledPrune(t *testing.T) {
	for _, keep := range []int{10, 1} {
		t.Run(fmt.Sprintf("keep%d", keep), func(t *testing.T) { testViewAtBesideStalledPrune(t, keep) })
	}
}

func testViewAtBesideStalledPrune(t *testing.T, keep int) {
	dir := t.TempDir()
	db, err := Open(dir, Options{
		CreateIfMissing:    true,
		InitialStores:      []string{"s"},
		SnapshotInterval:   -1, // snapshots by RewriteSnapshot only
		SnapshotKeepRecent: keep,
		OpenCheck:          OpenCheckNone,
		Sync:               wal.SyncEveryCommit,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit := func(v int) {
		t.Helper()
		if err := db.Set("s", []byte(fmt.Sprintf("k%03d", v)), []byte(fmt.Sprintf("v%03d", v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	pruneIdle := func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return !db.mu.pruning
	}
	for v := 1; v <= 3; v++ {
		commit(v)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil { // snapshot 3, log rolls at 4
		t.Fatal(err)
	}
	for v := 4; v <= 6; v++ {
		commit(v)
	}
	for !pruneIdle() {
		time.Sleep(time.Millisecond)
	}

	// the oldest segment (versions 1..3) becomes a FIFO: a replay that
	// reads it stalls in open(2)
	walDir := filepath.Join(dir, walDirName)
	ents, err := os.ReadDir(walDir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range ents {
		if wal.IsSegmentFile(e.Name()) && !strings.HasSuffix(e.Name(), ".tmp") {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs)
	if len(segs) < 2 {
		t.Fatalf("setup: segments %v", segs)
	}
	first := filepath.Join(walDir, segs[0])
	if err := os.Rename(first, first+".saved"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(first, 0o644); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		// the stalled open returns; the replay then fails on the FIFO
		if f, err := os.OpenFile(first, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}
	defer release()

	slowDone := make(chan error, 1)
	go func() {
		v, err := db.ViewAt(2) // from snapshot 0: reads the FIFO segment
		if v != nil {
			v.Release()
		}
		slowDone <- err
	}()
	// wait until the rebuild is in the segment's read
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "replaySegment") {
		if time.Now().After(deadline) {
			t.Fatal("setup: the rebuild of version 2 did not reach the log")
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := db.RewriteSnapshot(context.Background()); err != nil { // snapshot 6, then the prune
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); !pruneIdle() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}

	// a rebuild from snapshot 3 and the segment after it
	done := make(chan error, 1)
	var got []byte
	go func() {
		v, err := db.ViewAt(5)
		if v != nil {
			got, err = v.Get("s", []byte("k005"))
			v.Release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ViewAt(5): %v", err)
		}
		if string(got) != "v005" {
			t.Fatalf("ViewAt(5) reads k005 = %q", got)
		}
	case <-time.After(5 * time.Second):
		release()
		<-slowDone
		err := <-done
		t.Fatalf("ViewAt(5) did not return within 5s beside a rebuild stalled in the log and a prune (it returned %v once the stall ended)", err)
	}
	if !pruneIdle() {
		t.Error("the prune waits for the stalled rebuild")
	}
	release()
	<-slowDone
}
