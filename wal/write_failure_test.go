package wal

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestGroupedWriteFailureKeepsEarlierDurable: under SyncGrouped the
// entries whose Append returned are acknowledged, and the policy bounds
// their exposure: none stays unsynced longer than GroupInterval (a timer
// fsyncs it), and Close fsyncs what is unsynced. A later write that fails
// (ENOSPC: nothing wrong with the pages already written, unlike a failed
// fsync) must not take that away: the earlier entries' pages are intact in
// the page cache and an fsync of them means what it says. Here the write
// of the third entry fails; the first two, acknowledged before it, must be
// durable once GroupInterval has passed and the log is closed.
func TestGroupedWriteFailureKeepsEarlierDurable(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 3, smallShape)
	for _, async := range []int{0, 2} {
		fs := newMemFS()
		opts := Options{fs: fs, Sync: SyncGrouped, AsyncBuffer: async, GroupCount: 100, GroupInterval: 30 * time.Millisecond}
		l := mustOpen(t, memDir, opts)
		// acknowledged: written, not yet fsynced (the group is not full)
		for _, e := range entries[:2] {
			if err := l.Append(e); err != nil {
				t.Fatal(err)
			}
		}
		if async > 0 {
			// written by the background writer, not yet due for an fsync
			// under a long interval: wait for the write only
			for l.WrittenVersion() < 2 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		fail := true
		fs.setHook(func(op, path string) error {
			if op == "write" && fail {
				fail = false
				return syscall.ENOSPC
			}
			return nil
		})
		err := l.Append(entries[2])
		if err == nil {
			err = l.Flush()
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("async %d: append after the failed write: %v", async, err)
		}
		// well past GroupInterval: the timer's fsync is due, and then
		// Close's (the log's error stays: Close returns it)
		time.Sleep(200 * time.Millisecond)
		for _, when := range []string{"before Close", "after Close"} {
			if when == "after Close" {
				if err := l.Close(); !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("async %d: Close: %v, want the failed write's error", async, err)
				}
			}
			r, err := Open(memDir, Options{fs: fs.crash()})
			if err != nil {
				t.Fatalf("async %d: open after a power loss %s: %v", async, when, err)
			}
			if got := r.LastVersion(); got != 2 {
				t.Errorf("async %d: after a power loss %s the log ends at version %d, want 2: the entries acknowledged before the failed write "+
					"were not fsynced", async, when, got)
			}
			_ = r.Close()
		}
	}
}
