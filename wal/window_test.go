package wal

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestTruncateBackAfterFailedRollAhead: a TruncateBack that waits for the
// writer while a roll started ahead of the next record fails. The roll
// renamed the new, empty segment into place and then failed to make the
// directory durable: the log has failed, and the empty segment is on disk
// without being one of the log's. The waiting TruncateBack must return the
// sticky error. It must not cut the last segment back behind the empty
// one's base and return nil: the reopened log would then find an empty
// newest segment that does not follow the segment before it, and report
// the log as corrupt.
//
// A writable Open starts such a roll when the newest segment holds the
// other kind of appends (here: written under SyncEveryCommit, reopened
// under SyncGrouped), and a database's Open that rolls back calls
// TruncateBack right after it.
func TestTruncateBackAfterFailedRollAhead(t *testing.T) {
	checkNoLeak(t)
	fs := newMemFS()
	strict := Options{fs: fs}
	l := mustOpen(t, memDir, strict)
	mustAppend(t, l, Entry{Version: 1}, Entry{Version: 2}, Entry{Version: 3}, Entry{Version: 4}, Entry{Version: 5})
	mustClose(t, l)

	relaxed := Options{fs: fs, Sync: SyncGrouped, GroupCount: 1000, GroupInterval: time.Hour}
	inSyncDir := make(chan struct{})
	release := make(chan struct{})
	var renamed atomic.Bool
	fs.setHook(func(op, _ string) error {
		switch {
		case op == "rename":
			renamed.Store(true) // the new segment (6) is in place
		case op == "syncdir" && renamed.Load():
			close(inSyncDir)
			<-release
			return errInjected
		}
		return nil
	})
	l = mustOpen(t, memDir, relaxed) // starts the roll to segment 6
	<-inSyncDir                      // the roll holds the writer
	besideFailedRoll(t, l, fs, relaxed, release, "TruncateBack(3)", "rewriteTail", func() error { return l.TruncateBack(3) })
}

// besideFailedRoll runs call (named what) on another goroutine while a
// segment started ahead holds the writer, lets the roll fail (release) once
// call waits for the writer in the function waitsIn, and checks that call
// returned the failure, that Close reports it, and that the log reopens
// with opts and verifies.
func besideFailedRoll(t *testing.T, l *Log, fs *memFS, opts Options, release chan struct{}, what, waitsIn string, call func() error) {
	t.Helper()
	result := make(chan error, 1)
	go func() { result <- call() }()
	blockedIn(t, waitsIn) // past its checks, waiting for the writer
	close(release)
	err := <-result
	l.rollAhead.Wait()
	if cerr := l.Close(); !errors.Is(cerr, errInjected) {
		t.Errorf("close: %v, want the injected error", cerr)
	}
	fs.setHook(nil)
	if err == nil {
		t.Errorf("%s returned nil after the log failed; segments now %v", what, fs.names(memDir))
	}
	r, err := Open(memDir, opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Errorf("reopened log %d..%d: %v", r.FirstVersion(), r.LastVersion(), err)
	}
}
