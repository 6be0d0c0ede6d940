package wal

import "testing"

// TestTinySegmentsRandomOps: random Append, TruncateBack,
// TruncateFront, RollAt, Reset and reopens (also read-only, and after a
// process crash: the memory file system's current state, unsynced data
// included) with segments so small that every record gets a segment of
// its own (MinSegmentSize and a little more), against a model: Replay must
// return exactly the model's entries, and FirstVersion/LastVersion must
// agree with it.
func TestTinySegmentsRandomOps(t *testing.T) {
	rng := newRand(t)
	optsList := []Options{
		{},
		{AsyncBuffer: 2},
		{Sync: SyncGrouped, GroupCount: 2},
		{Sync: SyncNone},
		{Sync: SyncNone, AsyncBuffer: 1},
	}
	sizes := []int64{MinSegmentSize, MinSegmentSize + 1, 40, 64, 100}
	for iter := range 40 {
		r := newRandomOpsRun(t, iter, func(fs *memFS) Options {
			o := optsList[rng.IntN(len(optsList))]
			o.fs = fs
			o.SegmentSize = sizes[rng.IntN(len(sizes))]
			return o
		})
		m := &r.m
		check := func(l *Log) {
			t.Helper()
			r.check(l)
			if err := l.Verify(); err != nil {
				r.fail("verify: %v", err)
			}
		}
		for range 60 {
			switch op := rng.IntN(100); {
			case op < 45:
				for range 1 + rng.IntN(3) {
					v := r.nextVersion(rng)
					r.append(randEntry(rng, v, smallShape))
				}
			case op < 55:
				v := m.last - rng.Int64N(4)
				if v < 0 {
					v = 0
				}
				r.truncateBack(v)
			case op < 58:
				r.reset(1 + rng.Int64N(m.last+5))
			case op < 68:
				r.truncateFront(m.first + rng.Int64N(m.last-m.first+5))
			case op < 78:
				r.rollAt(m.last + 1 + rng.Int64N(3) - 1)
			case op < 84:
				// read-only open beside the writer, after a Flush
				r.trace = append(r.trace, "Flush; read-only open")
				r.flush()
				r.l.rollAhead.Wait()
				ro, err := Open(memDir, Options{fs: r.fs, ReadOnly: true})
				if err != nil {
					r.fail("read-only open: %v", err)
				}
				if tt, ok := ro.TornTail(); ok {
					r.fail("read-only open beside a flushed writer found a torn tail %+v", tt)
				}
				check(ro)
				ro.Close()
			case op < 90:
				// process crash: everything written survives
				r.trace = append(r.trace, "process crash")
				r.flush()
				r.l.rollAhead.Wait()
				fs2 := r.fs.clone()
				r.l.Close()
				r.fs = fs2
				r.open("reopen after crash")
			default:
				r.reopen()
			}
			check(r.l)
		}
		r.close()
	}
}
