package wal

import (
	"bytes"
	"errors"
	"testing"
)

// TestDiscardingKeepsItsTarget: Options.Discarding = D cuts damage after
// D's record only. Here a page of zeros covers the tail of D's own record
// and D+1's header, with whole records after it, in a log of synchronous
// appends under SyncEveryCommit. Without Discarding, Open reports
// corruption (a whole record follows the lost page); with it, Open must not
// cut D itself for the page it lost: corruption, or D kept.
func TestDiscardingKeepsItsTarget(t *testing.T) {
	const P = 2 * unwrittenPage
	const D = 2
	// v1: 20..4000; v2 (= D): 4000..P+300 (tail in P); v3 header at P+300 in P; v4, v5 after P
	sizes := []int{4000 - segmentHeaderSize, P + 300 - 4000, 5000, 3000, 3000}
	img, offs, _ := sizedSegment(t, 1, sizes)
	if offs[2] != P+300 || offs[3] <= P+unwrittenPage {
		t.Fatalf("layout %v", offs)
	}
	clear(img[P : P+unwrittenPage])

	_, _, err := openImage(img, 1, Options{})
	t.Logf("strict, no Discarding: err %v", err)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("strict open without Discarding: %v, want corruption", err)
	}
	for _, ro := range []bool{true, false} {
		l, fs, err := openImage(img, 1, Options{Discarding: D, ReadOnly: ro})
		if err != nil {
			t.Logf("ro=%v Discarding=%d: err %v (acceptable: D's record is damaged)", ro, D, err)
			continue
		}
		last := l.LastVersion()
		l.Close()
		if last < D {
			t.Errorf("ro=%v: Discarding=%d: Open succeeded with LastVersion %d, dropping the target version %d (segment now %d bytes, was %d); want corruption or LastVersion >= %d",
				ro, D, last, D, len(fs.get(memPath(1))), len(img), D)
		}
	}
}

// TestDiscardingAroundItsTarget: damage right after D's record is cut at
// D+1; the same damage with D+1 as the target is corruption.
func TestDiscardingAroundItsTarget(t *testing.T) {
	sizes := []int{3000, 3000, 3000, 3000, 3000}
	img, offs, _ := sizedSegment(t, 1, sizes)
	// flip a byte in D+1's (v3) header: D=2
	bad := bytes.Clone(img)
	bad[offs[2]+1] ^= 0xFF
	l, _, err := openImage(bad, 1, Options{Discarding: 2})
	if err != nil || l.LastVersion() != 2 {
		t.Fatalf("bad header after D: err %v last %v", err, l)
	}
	l.Close()
	// same damage with Discarding 3 (target v3 itself): corruption
	if _, _, err := openImage(bad, 1, Options{Discarding: 3}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad header of D: %v, want corruption", err)
	}
}
