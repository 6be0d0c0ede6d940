package wal

import (
	"fmt"
	"testing"
	"time"
)

// TestCrashLossBounds checks, per policy and mode, what a machine crash
// right after the last Append (or Flush, or Close) returned can lose,
// against the bounds in the package documentation. The memFS crash keeps
// only fsynced data under durable names.
func TestCrashLossBounds(t *testing.T) {
	const (
		groupCount = 5
		async      = 4
		asyncLoss  = 2*async + 1
	)
	for _, policy := range []SyncPolicy{SyncEveryCommit, SyncGrouped, SyncNone} {
		for _, buf := range []int{0, async} {
			for _, then := range []string{"nothing", "flush", "close"} {
				name := fmt.Sprintf("%v/async=%d/%s", policy, buf, then)
				rng := newRand(t)
				k := 1 + rng.IntN(60)
				entries := makeEntries(rng, k, smallShape)
				fs := newMemFS()
				l := mustOpen(t, memDir, Options{fs: fs, Sync: policy, AsyncBuffer: buf,
					GroupCount: groupCount, GroupInterval: time.Hour, SegmentSize: 1 << 20})
				mustAppend(t, l, entries...)
				switch then {
				case "flush":
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
				case "close":
					mustClose(t, l)
				}
				crashed := fs.crash()
				if then != "close" {
					mustClose(t, l)
				}

				r := mustOpen(t, memDir, Options{fs: crashed})
				got := int(r.LastVersion())
				checkReplay(t, r, entries) // whatever survived is a correct prefix
				mustAppend(t, r, Entry{Version: int64(got + 1)})
				mustClose(t, r)

				var min int
				switch {
				case then == "close", then == "flush" && policy != SyncNone:
					min = k
				case policy == SyncEveryCommit && buf == 0:
					min = k
				case policy == SyncEveryCommit:
					min = k - asyncLoss
				case policy == SyncGrouped && buf == 0:
					min = k - (groupCount - 1)
				case policy == SyncGrouped:
					min = k - (groupCount - 1) - asyncLoss
				}
				if got < min || got > k {
					t.Fatalf("%s: %d of %d entries survived the crash, want at least %d (seed in log)", name, got, k, min)
				}
				// Synchronous grouped commits are exact: only the last
				// partial group is unsynced.
				if policy == SyncGrouped && buf == 0 && then == "nothing" && got != k-k%groupCount {
					t.Fatalf("%s: %d of %d entries survived, want %d", name, got, k, k-k%groupCount)
				}
			}
		}
	}
}

// TestSyncNoneKeepsFinishedSegments: under SyncNone a crash can lose the
// newest segment's entries, but every older segment was fsynced when the
// next one was started.
func TestSyncNoneKeepsFinishedSegments(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 200, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, Sync: SyncNone, SegmentSize: 1024})
	mustAppend(t, l, entries...)
	newest := l.mu.segments[len(l.mu.segments)-1].base
	crashed := fs.crash()
	mustClose(t, l)
	r := mustOpen(t, memDir, Options{fs: crashed})
	defer r.Close()
	if got := r.LastVersion(); got < newest-1 {
		t.Fatalf("crash kept up to version %d, but versions up to %d were in finished segments", got, newest-1)
	}
	checkReplay(t, r, entries)
}

// TestCrashAtEveryOperation runs a workload of appends, rollovers (one of
// them ahead of its record, RollAt), TruncateFront and TruncateBack, and simulates a machine crash at every
// mutating file-system operation in turn (a write at the crash point is
// torn in half). Each time the log must reopen without error, hold at least
// every acknowledged entry, and hold only a prefix of one of the two
// histories (before or after the rollback).
func TestCrashAtEveryOperation(t *testing.T) {
	for _, buf := range []int{0, 3} {
		rng := newRand(t)
		old := makeEntries(rng, 25, smallShape)
		newer := append(append([]Entry(nil), old[:20]...), makeEntries(rng, 23, smallShape)[20:]...)
		opts := Options{SegmentSize: 400, AsyncBuffer: buf}

		// workload runs until the first error and returns the acknowledged
		// last version and whether the rollback was acknowledged.
		workload := func(fs *memFS) (acked int64, rolledBack bool) {
			o := opts
			o.fs = fs
			l, err := Open(memDir, o)
			if err != nil {
				return 0, false
			}
			defer l.Close()
			appendAll := func(es []Entry) bool {
				for i, e := range es {
					if l.Append(e) != nil {
						return false
					}
					if buf == 0 {
						acked = e.Version
					} else if i%3 == 2 || i == len(es)-1 {
						if l.Flush() != nil {
							return false
						}
						acked = e.Version
					}
				}
				return true
			}
			if !appendAll(old[:10]) {
				return acked, false
			}
			l.RollAt(11) // rolls ahead when 10 is written (synchronous appends)
			if !appendAll(old[10:15]) || l.TruncateFront(8) != nil || !appendAll(old[15:25]) {
				return acked, false
			}
			// A rollback that has not returned may have taken effect.
			acked = min(acked, 20)
			if l.TruncateBack(20) != nil {
				return acked, false
			}
			acked, rolledBack = 20, true
			appendAll(newer[20:23])
			return acked, rolledBack
		}

		dry := newMemFS()
		workload(dry)
		total := dry.ops
		for k := 1; k <= total; k++ {
			fs := newMemFS()
			fs.crashAt = k
			acked, rolledBack := workload(fs)
			crashed := fs.crash()
			o := opts
			o.fs = crashed
			l, err := Open(memDir, o)
			if err != nil {
				t.Fatalf("async %d, crash at op %d of %d: reopen: %v", buf, k, total, err)
			}
			first, last := l.FirstVersion(), l.LastVersion()
			if last < acked {
				t.Fatalf("async %d, crash at op %d of %d: LastVersion %d, but %d was acknowledged", buf, k, total, last, acked)
			}
			got, err := collect(l, first, last)
			if last > 0 && err != nil {
				t.Fatalf("async %d, crash at op %d: replay %d..%d: %v", buf, k, first, last, err)
			}
			okNew := holdsRange(got, first, last, newer)
			if !okNew && (rolledBack || !holdsRange(got, first, last, old)) {
				t.Fatalf("async %d, crash at op %d: recovered %d..%d matches no history (rolled back: %v)", buf, k, first, last, rolledBack)
			}
			// The recovered log takes the next version.
			hist := old
			if okNew {
				hist = newer
			}
			if last < int64(len(hist)) {
				mustAppend(t, l, hist[last])
			}
			mustClose(t, l)
		}
		t.Logf("async %d: crashed at each of %d operations", buf, total)
	}
}

// holdsRange reports whether got, the entries first..last of a recovered
// log, are those versions of history hist.
func holdsRange(got []Entry, first, last int64, hist []Entry) bool {
	if last > int64(len(hist)) {
		return false
	}
	for i, e := range got {
		if entryDiff(hist[first-1+int64(i)], e) != "" {
			return false
		}
	}
	return true
}
