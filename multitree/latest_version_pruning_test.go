package multitree

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLatestVersionBesidePruningWriter: LatestVersion, called over and
// over while a writer beside it commits with a snapshot every version or
// two, keeps no old snapshot and cuts the log into small segments (so its
// prunes remove log segments all the time), always succeeds (a segment
// that disappears under a read is a prune's: the read is made again) with
// a version between the last one committed before the call and the last
// one begun after it.
func TestLatestVersionBesidePruningWriter(t *testing.T) {
	dur := 6 * time.Second
	if testing.Short() {
		dur = 2500 * time.Millisecond
	}
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2,
		SnapshotKeepRecent: 0, WALSegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitN(t, db, 7, 3)

	var acked, begun atomic.Int64 // versions Commit returned / was called for
	acked.Store(db.Version())
	begun.Store(db.Version())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writerErr error
	var rewriteErrs int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			v := db.WorkingVersion()
			if err := db.ApplyChangeSets(crashBlock(7, v)); err != nil {
				writerErr = err
				return
			}
			begun.Store(v)
			info, err := db.Commit()
			if err != nil {
				if info == nil || !errors.Is(err, ErrRewrite) {
					writerErr = err
					return
				}
				rewriteErrs++
			}
			acked.Store(info.Version)
		}
	}()

	var reads atomic.Int64 // reads of LatestVersion, retries included
	latestVersionReadCurrent = func(string) { reads.Add(1) }
	defer func() { latestVersionReadCurrent = nil }()
	calls, moved := 0, 0
	deadline := time.Now().Add(dur)
	last := int64(0)
	for time.Now().Before(deadline) {
		lo := acked.Load()
		v, err := LatestVersion(dir)
		hi := begun.Load()
		calls++
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("LatestVersion call %d beside the writer (acknowledged %d, begun %d): %v", calls, lo, hi, err)
		}
		if v < lo || v > hi {
			close(stop)
			wg.Wait()
			t.Fatalf("LatestVersion call %d = %d, want within [%d, %d]", calls, v, lo, hi)
		}
		if v != last {
			moved++
			last = v
		}
	}
	close(stop)
	wg.Wait()
	if writerErr != nil {
		t.Fatalf("writer: %v", writerErr)
	}
	if rewriteErrs > 0 {
		t.Errorf("writer: %d commits reported a failed rewrite", rewriteErrs)
	}
	snaps, _ := SnapshotVersions(dir)
	t.Logf("%d LatestVersion calls (%d reads), %d distinct answers, writer at %d, snapshots now %v", calls, reads.Load(), moved, acked.Load(), snaps)
	if acked.Load() < 20 || calls < 20 {
		t.Fatalf("too little happened: %d calls, writer at %d", calls, acked.Load())
	}
}
