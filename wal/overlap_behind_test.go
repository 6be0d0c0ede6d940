package wal

import (
	"errors"
	"testing"
)

// TestOverlapEndingBehindOlderSegment: an older segment holds 1..10 and the
// newest starts at 5 but ends at 8, before the older one's end (its records
// pass their checksums; the versions go back across the boundary). Verify
// promises to check version continuity across segments, and a Replay must
// not serve versions 5..8 from one segment or the other depending on where
// it starts: both must report ErrCorrupt naming the older segment.
func TestOverlapEndingBehindOlderSegment(t *testing.T) {
	fs, _ := segmentImages(t, 8, 1, 5) // 1..4, then 5..8
	whole, _ := segmentImages(t, 10, 1)
	fs.put(memPath(1), whole.get(memPath(1))) // 1..10, other contents
	for _, ro := range []bool{true, false} {
		l := mustOpen(t, memDir, Options{fs: fs, ReadOnly: ro})
		if first, last := l.FirstVersion(), l.LastVersion(); first != 1 || last != 8 {
			t.Fatalf("log holds %d..%d, want 1..8", first, last)
		}
		if err := l.Verify(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: Verify of overlapping segments: %v, want ErrCorrupt", ro, err)
		}
		if _, err := collect(l, 1, 8); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: Replay 1..8 across the overlap: %v, want ErrCorrupt", ro, err)
		}
		mustClose(t, l)
	}
}
