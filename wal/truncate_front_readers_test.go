package wal

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// stallSyncDirFS is the operating system's file system whose SyncDir,
// once armed, signals entered and blocks until release is closed: a
// directory fsync on a slow disk.
type stallSyncDirFS struct {
	osFS
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (f *stallSyncDirFS) SyncDir(dir string) error {
	f.mu.Lock()
	armed := f.armed
	f.armed = false
	f.mu.Unlock()
	if armed {
		close(f.entered)
		<-f.release
	}
	return f.osFS.SyncDir(dir)
}

// TestReplayBesideTruncateFrontFsync: a Replay (a database's rebuild of an
// older version) of entries TruncateFront does not touch must not wait for
// the truncation's directory fsync (a database's background prune on a
// slow disk).
func TestReplayBesideTruncateFrontFsync(t *testing.T) {
	fs := &stallSyncDirFS{entered: make(chan struct{}), release: make(chan struct{})}
	l := mustOpen(t, t.TempDir(), Options{fs: fs})
	defer l.Close()
	for v := int64(1); v <= 3; v++ {
		mustAppend(t, l, Entry{Version: v})
	}
	l.RollAt(4)
	for v := int64(4); v <= 6; v++ {
		mustAppend(t, l, Entry{Version: v})
	}

	fs.mu.Lock()
	fs.armed = true
	fs.mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			close(fs.release)
		}
	}
	defer release()
	truncDone := make(chan error, 1)
	go func() { truncDone <- l.TruncateFront(4) }() // removes the segment of 1..3, then fsyncs
	select {
	case <-fs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("setup: TruncateFront did not reach its directory fsync")
	}

	done := make(chan error, 1)
	go func() { done <- l.Replay(5, 5, func(Entry) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
	case <-time.After(5 * time.Second):
		release()
		<-truncDone
		<-done
		t.Fatal("Replay(5, 5) did not return within 5s while TruncateFront was in its directory fsync")
	}
	release()
	if err := <-truncDone; err != nil {
		t.Fatal(err)
	}
}

// TestTruncateFrontKeepsPinnedSegments: TruncateFront keeps the segment a
// running Replay reads from and every later one, without waiting for it;
// the replay returns every entry, and a later TruncateFront removes what
// was kept.
func TestTruncateFrontKeepsPinnedSegments(t *testing.T) {
	for _, tc := range []struct {
		from      int64
		wantFirst int64 // FirstVersion after TruncateFront(7) beside the replay
	}{{2, 1}, {5, 4}, {8, 7}} {
		dir := t.TempDir()
		l := mustOpen(t, dir, Options{})
		for v := int64(1); v <= 9; v++ {
			if v == 4 || v == 7 {
				l.RollAt(v)
			}
			mustAppend(t, l, Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte{byte(v)}, Value: []byte("v")}}}}})
		}
		if n := len(segmentFiles(t, dir)); n != 3 {
			t.Fatalf("setup: %d segments", n)
		}
		entered, release := make(chan struct{}), make(chan struct{})
		var got []int64
		done := make(chan error, 1)
		go func() {
			done <- l.Replay(tc.from, 9, func(e Entry) error {
				if len(got) == 0 {
					close(entered)
					<-release
				}
				got = append(got, e.Version)
				return nil
			})
		}()
		<-entered
		trunc := make(chan error, 1)
		go func() { trunc <- l.TruncateFront(7) }()
		select {
		case err := <-trunc:
			if err != nil {
				t.Fatalf("from %d: TruncateFront beside a replay: %v", tc.from, err)
			}
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatalf("from %d: TruncateFront waits for a running replay", tc.from)
		}
		if got := l.FirstVersion(); got != tc.wantFirst {
			t.Errorf("from %d: FirstVersion %d beside the replay, want %d", tc.from, got, tc.wantFirst)
		}
		// a replay starting now sees the log as truncated
		if err := l.Replay(7, 7, func(Entry) error { return nil }); err != nil {
			t.Errorf("from %d: Replay(7, 7): %v", tc.from, err)
		}
		if tc.wantFirst > 1 {
			if err := l.Replay(1, 1, func(Entry) error { return nil }); !errors.Is(err, ErrVersionNotFound) {
				t.Errorf("from %d: Replay(1, 1) of a removed version: %v", tc.from, err)
			}
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("from %d: the pinned replay: %v", tc.from, err)
		}
		if len(got) != int(10-tc.from) || got[0] != tc.from || got[len(got)-1] != 9 {
			t.Errorf("from %d: the pinned replay read versions %v", tc.from, got)
		}
		if err := l.TruncateFront(7); err != nil {
			t.Fatal(err)
		}
		if got := l.FirstVersion(); got != 7 {
			t.Errorf("from %d: FirstVersion %d after the replay, want 7", tc.from, got)
		}
		if n := len(segmentFiles(t, dir)); n != 1 {
			t.Errorf("from %d: %d segment files after the replay's TruncateFront, want 1", tc.from, n)
		}
		if err := l.Verify(); err != nil {
			t.Error(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		r := mustOpen(t, dir, Options{ReadOnly: true})
		if f, la := r.FirstVersion(), r.LastVersion(); f != 7 || la != 9 {
			t.Errorf("from %d: reopened log holds %d..%d", tc.from, f, la)
		}
		r.Close()
		_ = os.RemoveAll(dir)
	}
}
