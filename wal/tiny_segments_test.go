package wal

import (
	"fmt"
	"strings"
	"testing"
)

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
		fs := newMemFS()
		var trace []string
		pick := func() Options {
			o := optsList[rng.IntN(len(optsList))]
			o.fs = fs
			o.SegmentSize = sizes[rng.IntN(len(sizes))]
			return o
		}
		opts := pick()
		l := mustOpen(t, memDir, opts)
		m := logModel{entries: map[int64]Entry{}}
		fail := func(format string, args ...any) {
			t.Helper()
			l.Close()
			t.Fatalf("iteration %d: %s\ntrace:\n%s", iter, fmt.Sprintf(format, args...), strings.Join(trace, "\n"))
		}
		check := func(l *Log) {
			t.Helper()
			if err := m.check(l); err != nil {
				fail("%v", err)
			}
			if err := l.Verify(); err != nil {
				fail("verify: %v", err)
			}
		}
		for range 60 {
			switch op := rng.IntN(100); {
			case op < 45:
				for range 1 + rng.IntN(3) {
					v := m.next
					if v == 0 {
						v = 1 + rng.Int64N(5)
					}
					e := randEntry(rng, v, smallShape)
					trace = append(trace, fmt.Sprintf("Append(%d)", v))
					if err := l.Append(e); err != nil {
						fail("append %d: %v", v, err)
					}
					m.appended(e)
				}
			case op < 55:
				v := m.last - rng.Int64N(4)
				if v < 0 {
					v = 0
				}
				trace = append(trace, fmt.Sprintf("TruncateBack(%d)", v))
				if err := l.TruncateBack(v); err != nil {
					fail("TruncateBack(%d): %v", v, err)
				}
				m.truncatedBack(v)
			case op < 58:
				n := 1 + rng.Int64N(m.last+5)
				trace = append(trace, fmt.Sprintf("Reset(%d)", n))
				if err := l.Reset(n); err != nil {
					fail("Reset(%d): %v", n, err)
				}
				m.reset(n)
			case op < 68:
				v := m.first + rng.Int64N(m.last-m.first+5)
				trace = append(trace, fmt.Sprintf("TruncateFront(%d)", v))
				if err := l.TruncateFront(v); err != nil {
					fail("TruncateFront(%d): %v", v, err)
				}
			case op < 78:
				v := m.last + 1 + rng.Int64N(3) - 1
				trace = append(trace, fmt.Sprintf("RollAt(%d)", v))
				l.RollAt(v)
			case op < 84:
				// read-only open beside the writer, after a Flush
				trace = append(trace, "Flush; read-only open")
				if err := l.Flush(); err != nil {
					fail("flush: %v", err)
				}
				l.rollAhead.Wait()
				ro, err := Open(memDir, Options{fs: fs, ReadOnly: true})
				if err != nil {
					fail("read-only open: %v", err)
				}
				if tt, ok := ro.TornTail(); ok {
					fail("read-only open beside a flushed writer found a torn tail %+v", tt)
				}
				check(ro)
				ro.Close()
			case op < 90:
				// process crash: everything written survives
				trace = append(trace, "process crash")
				if err := l.Flush(); err != nil {
					fail("flush: %v", err)
				}
				l.rollAhead.Wait()
				fs2 := fs.clone()
				l.Close()
				fs = fs2
				opts = pick()
				trace = append(trace, fmt.Sprintf("open %+v", Options{Sync: opts.Sync, AsyncBuffer: opts.AsyncBuffer, SegmentSize: opts.SegmentSize}))
				var err error
				if l, err = Open(memDir, opts); err != nil {
					t.Fatalf("iteration %d: reopen after crash: %v\ntrace:\n%s", iter, err, strings.Join(trace, "\n"))
				}
				m.reopened()
			default:
				trace = append(trace, "reopen")
				if err := l.Close(); err != nil {
					fail("close: %v", err)
				}
				opts = pick()
				trace = append(trace, fmt.Sprintf("open %+v", Options{Sync: opts.Sync, AsyncBuffer: opts.AsyncBuffer, SegmentSize: opts.SegmentSize}))
				var err error
				if l, err = Open(memDir, opts); err != nil {
					t.Fatalf("iteration %d: reopen: %v\ntrace:\n%s", iter, err, strings.Join(trace, "\n"))
				}
				m.reopened()
			}
			check(l)
		}
		if err := l.Close(); err != nil {
			fail("close: %v", err)
		}
	}
}
