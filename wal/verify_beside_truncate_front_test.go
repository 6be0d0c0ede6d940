package wal

import (
	"testing"
)

// TestVerifyFirstPastLastRead: Verify checks for an empty log in one
// critical section of mu and pins the first version in a later one
// (replayLocked). Appends and a TruncateFront (which does not wait for
// Verify) between the two can move the first version past the last version
// the first section saw; a replay from the new first version to that last
// one would read to the end of the log without meeting it and report a
// sound log as corrupt. The whole-log replay takes both ends together.
//
// The window between the two sections is a few instructions wide, so the
// test runs Verify's two steps itself, with the appends and the
// TruncateFront between them, as another goroutine may run them, and
// hands the second step the last version the first one saw.
func TestVerifyFirstPastLastRead(t *testing.T) {
	l := mustOpen(t, memDir, Options{fs: newMemFS()})
	defer l.Close()
	mustAppend(t, l, Entry{Version: 1}, Entry{Version: 2})

	// Verify, first step: truncMu shared, then LastVersion under mu
	l.truncMu.RLock()
	last := l.LastVersion()

	// meanwhile on other goroutines (none of these takes truncMu)
	l.RollAt(3)
	mustAppend(t, l, Entry{Version: 3})
	if err := l.TruncateFront(3); err != nil {
		l.truncMu.RUnlock()
		t.Fatal(err)
	}

	// Verify, second step, exactly as Verify calls it
	err := l.replayLocked(0, last, true, func(Entry) error { return nil })
	l.truncMu.RUnlock()
	if err != nil {
		t.Fatalf("Verify of a sound log (last %d read, FirstVersion now %d): %v", last, l.FirstVersion(), err)
	}
	if err := l.Verify(); err != nil {
		t.Fatalf("a later Verify: %v", err)
	}
}
