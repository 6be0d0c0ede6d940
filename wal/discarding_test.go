package wal

import (
	"bytes"
	"errors"
	"testing"
)

// entryOfRecordSize returns an entry of version v whose framed record
// (frame header and body) is exactly total bytes.
func entryOfRecordSize(t testing.TB, v int64, total int) Entry {
	t.Helper()
	for k := 1; k <= 4; k++ {
		for vl := max(0, total-40); vl <= total; vl++ {
			e := Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: bytes.Repeat([]byte{'k'}, k), Value: bytes.Repeat([]byte{0xAB}, vl)}}}}}
			if frameHeaderSize+EncodedSize(e) == total {
				return e
			}
		}
	}
	t.Fatalf("no entry of record size %d", total)
	return Entry{}
}

// sizedSegment builds the image of a segment starting at base whose records
// have the given framed sizes, and returns it with the record offsets and
// the entries.
func sizedSegment(t testing.TB, base int64, sizes []int) ([]byte, []int64, []Entry) {
	t.Helper()
	img := appendSegmentHeader(nil, base)
	var offs []int64
	var es []Entry
	for i, s := range sizes {
		e := entryOfRecordSize(t, base+int64(i), s)
		offs = append(offs, int64(len(img)))
		var err error
		if img, err = appendRecord(img, &e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return img, offs, es
}

// openImage opens a log whose only segment (base) holds img.
func openImage(img []byte, base int64, o Options) (*Log, *memFS, error) {
	fs := newMemFS()
	fs.put(memPath(base), append([]byte(nil), img...))
	o.fs = fs
	l, err := Open(memDir, o)
	return l, fs, err
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

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
	if !isCorrupt(err) {
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
	if _, _, err := openImage(bad, 1, Options{Discarding: 3}); !isCorrupt(err) {
		t.Fatalf("bad header of D: %v, want corruption", err)
	}
}
