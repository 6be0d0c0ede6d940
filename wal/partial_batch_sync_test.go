package wal

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func bigEntry(v int64) Entry {
	return Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: bytes.Repeat([]byte{byte(v)}, 3<<20)}}}}}
}

// TestPartialBatchWriteFailureKeepsWrittenDurable: the background writer
// splits a batch larger than maxCoalesce into several write calls. When a
// later call fails, the records of the earlier ones are written
// (WrittenVersion reports them) and must still be fsynced, by the
// SyncGrouped timer ("no entry written more than GroupInterval ago") or by
// Close ("fsyncs what is unsynced (under every policy)", "after a failed
// write too"), so that a power loss after Close keeps them.
func TestPartialBatchWriteFailureKeepsWrittenDurable(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncGrouped, SyncNone, SyncEveryCommit} {
		t.Run(policy.String(), func(t *testing.T) { partialBatchFailure(t, policy) })
	}
}

func partialBatchFailure(t *testing.T, policy SyncPolicy) {
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: 4, Sync: policy, GroupInterval: 2 * time.Millisecond})
	mustAppend(t, l, Entry{Version: 1})
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	taken := make(chan int, 8)
	l.batchTaken = func(n int) { taken <- n }
	l.w.Lock() // hold the writer so that versions 2 and 3 are taken in one batch
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	if n := <-taken; n != 1 {
		t.Fatalf("first batch has %d requests", n)
	}
	mustAppend(t, l, bigEntry(2), bigEntry(3))
	var writes atomic.Int32
	fs.setHook(func(op, p string) error {
		if op == "write" && writes.Add(1) == 2 {
			return errInjected // the second write call of the batch: version 3's run
		}
		return nil
	})
	l.w.Unlock()
	if err := <-flushed; err != nil {
		t.Fatalf("flush: %v", err)
	}
	if n := <-taken; n != 2 {
		t.Fatalf("second batch has %d requests, want 2", n)
	}
	if err := l.Flush(); !errors.Is(err, errInjected) {
		t.Fatalf("flush after the failed write: %v", err)
	}
	if w := l.WrittenVersion(); w != 2 {
		t.Fatalf("WrittenVersion %d, want 2 (version 2's run was written)", w)
	}
	time.Sleep(50 * time.Millisecond) // many GroupIntervals
	if err := l.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("close: %v", err)
	}
	// power loss after Close
	r, err := Open(memDir, Options{fs: fs.crash(), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.LastVersion(); got != 2 {
		t.Fatalf("%v: after a power loss following Close the log ends at %d; version 2, written 50ms before Close and before the failed write, was not fsynced (by the group timer or by Close)", policy, got)
	}
}
