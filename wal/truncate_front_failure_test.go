package wal

import (
	"errors"
	"sync"
	"testing"
)

// failRemovalFS is the operating system's file system whose n-th Remove
// (removeAt) or n-th SyncDir (syncAt), counted from when it is armed,
// fails once.
type failRemovalFS struct {
	osFS
	mu               sync.Mutex
	armed            bool
	removes, syncs   int
	removeAt, syncAt int
}

// failing counts one more call of a kind (removes or syncs) and reports
// whether it is the one to fail (at).
func (f *failRemovalFS) failing(count *int, at int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return false
	}
	*count++
	return *count == at
}

func (f *failRemovalFS) Remove(path string) error {
	if f.failing(&f.removes, f.removeAt) {
		return errInjected
	}
	return f.osFS.Remove(path)
}

func (f *failRemovalFS) SyncDir(dir string) error {
	if f.failing(&f.syncs, f.syncAt) {
		return errInjected
	}
	return f.osFS.SyncDir(dir)
}

// TestTruncateFrontFailurePartWay: a TruncateFront that fails part way
// (a removal, or the directory fsync after one) leaves the log answering
// for the segments still on disk: FirstVersion names the first one,
// replays and Verify read them, a later TruncateFront removes them, and a
// reopen sees the same log.
func TestTruncateFrontFailurePartWay(t *testing.T) {
	for _, tc := range []struct {
		name             string
		removeAt, syncAt int
		wantFirst        int64 // after the failure
	}{
		{"first removal", 1, 0, 1},
		{"second removal", 2, 0, 4},
		{"fsync after the first removal", 0, 1, 4},
		{"fsync after the second removal", 0, 2, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &failRemovalFS{removeAt: tc.removeAt, syncAt: tc.syncAt}
			dir := t.TempDir()
			l := mustOpen(t, dir, Options{fs: fs})
			for v := int64(1); v <= 12; v++ {
				if v > 1 && v%3 == 1 {
					l.RollAt(v) // segments 1..3, 4..6, 7..9, 10..12
				}
				mustAppend(t, l, Entry{Version: v})
			}
			fs.mu.Lock()
			fs.armed = true
			fs.mu.Unlock()
			if err := l.TruncateFront(10); !errors.Is(err, errInjected) {
				t.Fatalf("TruncateFront with a failure: %v", err)
			}
			if got := l.FirstVersion(); got != tc.wantFirst {
				t.Errorf("FirstVersion %d after the failure, want %d", got, tc.wantFirst)
			}
			if n := len(segmentFiles(t, dir)); n != 4-int(tc.wantFirst-1)/3 {
				t.Errorf("%d segment files after the failure, first version %d", n, tc.wantFirst)
			}
			var got []int64
			if err := l.Replay(tc.wantFirst, 12, func(e Entry) error { got = append(got, e.Version); return nil }); err != nil {
				t.Fatalf("Replay(%d, 12) after the failure: %v", tc.wantFirst, err)
			}
			if int64(len(got)) != 13-tc.wantFirst {
				t.Errorf("Replay(%d, 12) read %v", tc.wantFirst, got)
			}
			if err := l.Verify(); err != nil {
				t.Errorf("Verify after the failure: %v", err)
			}
			if err := l.TruncateFront(10); err != nil {
				t.Fatalf("TruncateFront once the failure ended: %v", err)
			}
			if got := l.FirstVersion(); got != 10 {
				t.Errorf("FirstVersion %d after a later TruncateFront, want 10", got)
			}
			if n := len(segmentFiles(t, dir)); n != 1 {
				t.Errorf("%d segment files after a later TruncateFront, want 1", n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			r := mustOpen(t, dir, Options{ReadOnly: true})
			defer r.Close()
			if f, la := r.FirstVersion(), r.LastVersion(); f != 10 || la != 12 {
				t.Errorf("reopened log holds %d..%d, want 10..12", f, la)
			}
		})
	}
}
