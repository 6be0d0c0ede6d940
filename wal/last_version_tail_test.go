package wal

import (
	"errors"
	"math"
	"testing"
)

// TestLastRecordMaxInt64: a log whose last record is math.MaxInt64
// opens, replays, refuses an append after it, and truncates.
func TestLastRecordMaxInt64(t *testing.T) {
	base := int64(math.MaxInt64 - 3)
	img, _, es := sizedSegment(t, base, []int{200, 200, 200, 200})
	for _, tail := range []struct {
		name  string
		extra []byte
	}{{"clean", nil}, {"zeros", make([]byte, 100)}, {"partial header", []byte{1, 2, 3}}} {
		t.Run(tail.name, func(t *testing.T) {
			im := append(append([]byte(nil), img...), tail.extra...)
			l, fs, err := openImage(im, base, Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if l.FirstVersion() != base || l.LastVersion() != math.MaxInt64 {
				t.Fatalf("first %d last %d", l.FirstVersion(), l.LastVersion())
			}
			if len(tail.extra) > 0 {
				if _, ok := l.TornTail(); !ok {
					t.Errorf("no torn tail reported")
				}
			}
			n := 0
			if err := l.Replay(base, math.MaxInt64, func(e Entry) error {
				if e.Version != es[n].Version {
					t.Errorf("replayed %d, want %d", e.Version, es[n].Version)
				}
				n++
				return nil
			}); err != nil || n != 4 {
				t.Fatalf("replay: %d entries, %v", n, err)
			}
			if err := l.Verify(); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if err := l.Append(Entry{Version: math.MinInt64}); err == nil {
				t.Fatalf("append after MaxInt64 accepted")
			}
			if err := l.TruncateFront(math.MaxInt64); err != nil {
				t.Fatalf("truncate front: %v", err)
			}
			if err := l.TruncateBack(math.MaxInt64); err != nil {
				t.Fatalf("truncate back to max: %v", err)
			}
			if err := l.TruncateBack(math.MaxInt64 - 1); err != nil {
				t.Fatalf("truncate back: %v", err)
			}
			if l.LastVersion() != math.MaxInt64-1 {
				t.Fatalf("last after truncate back %d", l.LastVersion())
			}
			if err := l.Append(es[3]); err != nil {
				t.Fatalf("append MaxInt64 again: %v", err)
			}
			mustClose(t, l)
			l = mustOpen(t, memDir, Options{fs: fs})
			if l.LastVersion() != math.MaxInt64 {
				t.Fatalf("reopen last %d", l.LastVersion())
			}
			if err := l.Reset(math.MaxInt64); err != nil {
				t.Fatalf("reset: %v", err)
			}
			if l.LastVersion() != 0 {
				t.Fatalf("after reset last %d", l.LastVersion())
			}
			if err := l.Append(es[3]); err != nil {
				t.Fatalf("append after reset: %v", err)
			}
			mustClose(t, l)
			l = mustOpen(t, memDir, Options{fs: fs})
			if l.FirstVersion() != math.MaxInt64 || l.LastVersion() != math.MaxInt64 {
				t.Fatalf("reopen after reset: %d..%d", l.FirstVersion(), l.LastVersion())
			}
			mustClose(t, l)
		})
	}
}

// TestLostPageBeforeLastVersion: in a log of synchronous appends,
// a record whose frame header lies in a page of zeros (one not written
// back) followed by whole records is damage (TestTornTailUnwrittenPage,
// "records after it"), not a torn tail: the records after it were
// durable. So it is near math.MaxInt64 too, where the bound on the
// versions that verifiedRecordFrom looks for (next plus the records that
// fit) is capped instead of wrapping around (were no record found, Open
// would cut the durable records MaxInt64-1 and MaxInt64 away as a torn
// tail).
func TestLostPageBeforeLastVersion(t *testing.T) {
	for _, base := range []int64{1, math.MaxInt64 - 3} {
		img, offs, _ := sizedSegment(t, base, []int{3 * unwrittenPage, 3 * unwrittenPage, 3 * unwrittenPage, 3 * unwrittenPage})
		img = asWrittenBy(img, Options{})
		pageEnd := (offs[2]/unwrittenPage + 1) * unwrittenPage
		if pageEnd-offs[2] < frameHeaderSize {
			t.Fatalf("layout: header crosses the page")
		}
		clear(img[offs[2]:pageEnd])
		l, _, err := openImage(img, base, Options{ReadOnly: true})
		if err == nil {
			last := l.LastVersion()
			mustClose(t, l)
			t.Errorf("base %d: open accepted the lost page as a torn tail, last version %d (of %d): want corruption", base, last, base+3)
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("base %d: %v, want ErrCorrupt", base, err)
		}
	}
}
