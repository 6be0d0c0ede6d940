package wal

import (
	"errors"
	"slices"
	"testing"
)

// TestTwoEmptyNewestSegmentsLostRecords: the package doc says Open
// drops an empty newest segment "once it has found the segment before it
// ending with the record just before the empty one's base (that segment
// was fsynced before the empty one was created: ending earlier, it lost
// durable records, and Open reports the damage, keeping the empty
// segment)". TestEmptyNewestSegmentAfterLostRecords covers a segment
// before it that lost its last record; here it lost all of them (it is
// back to its bare header, as a file system that loses a file's size
// leaves it). The empty segment of 10 proves that 6..9 were durable: Open
// (writable or read-only) fails with ErrCorrupt and removes nothing,
// rather than resuming the log at 5.
func TestTwoEmptyNewestSegmentsLostRecords(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 12, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries[:5]...)
	l.RollAt(6)
	l.rollAhead.Wait()
	mustAppend(t, l, entries[5:9]...)
	l.RollAt(10)
	l.rollAhead.Wait()
	crashed := fs.clone() // a crash with the empty segment of 10 in place
	mustClose(t, l)
	want := []string{segmentName(1), segmentName(6), segmentName(10)}
	if got := crashed.names(memDir); !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	// segment 6 loses every record (6..9), keeping its header
	crashed.put(memPath(6), crashed.get(memPath(6))[:segmentHeaderSize])

	for _, ro := range []bool{false, true} {
		crashed := crashed.clone()
		l, err := Open(memDir, Options{fs: crashed, ReadOnly: ro})
		if err == nil {
			last := l.LastVersion()
			appendErr := l.Append(Entry{Version: last + 1})
			l.Close()
			t.Fatalf("read-only %v: Open succeeded with LastVersion %d although the empty segment %s shows 6..9 were durable; segments now %v; Append(%d): %v",
				ro, last, segmentName(10), crashed.names(memDir), last+1, appendErr)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: Open: %v, want an error wrapping ErrCorrupt", ro, err)
		}
		if got := crashed.names(memDir); !slices.Equal(got, want) {
			t.Fatalf("segments after a failed open (read-only %v): %v, want %v", ro, got, want)
		}
	}
}

// segmentImages builds, on a memory file system, a log of versions 1..n
// in segments of the given bases (each segment holds the versions up to
// the next base) and returns the file system and the entries.
func segmentImages(t *testing.T, n int, bases ...int64) (*memFS, []Entry) {
	t.Helper()
	rng := newRand(t)
	entries := makeEntries(rng, n, smallShape)
	fs := newMemFS()
	for i, base := range bases {
		end := int64(n)
		if i+1 < len(bases) {
			end = bases[i+1] - 1
		}
		img := appendSegmentHeader(nil, base, flagStrictAppends)
		for v := base; v <= end; v++ {
			var err error
			if img, err = appendRecord(img, &entries[v-1]); err != nil {
				t.Fatal(err)
			}
		}
		fs.put(memPath(base), img)
	}
	return fs, entries
}

// TestHostileSegmentSets: damage to the set of segments that Open
// does not look for (it reads only the newest) is reported by Verify and by
// a Replay across it as ErrCorrupt naming the segment; a zero-length or
// header-less segment fails Open, naming it, and nothing is removed.
func TestHostileSegmentSets(t *testing.T) {
	// a gap: 1..5, then 9..12 (6..8 missing)
	fs, entries := segmentImages(t, 12, 1, 6, 9)
	fs.Remove(memPath(6))
	l := mustOpen(t, memDir, Options{fs: fs})
	if err := l.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("gap: Verify: %v", err)
	} else {
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.File != memPath(1) {
			t.Fatalf("gap: Verify names %v", err)
		}
	}
	if _, err := collect(l, 3, 10); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("gap: Replay across it: %v", err)
	}
	if got, err := collect(l, 9, 12); err != nil || len(got) != 4 || entryDiff(entries[8], got[0]) != "" {
		t.Fatalf("gap: Replay after it: %d entries, %v", len(got), err)
	}
	if err := l.TruncateFront(9); err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(); err != nil {
		t.Fatalf("gap dropped by TruncateFront: Verify: %v", err)
	}
	mustAppend(t, l, randEntry(newRand(t), 13, smallShape))
	mustClose(t, l)

	// an overlap: 1..10 and a newer segment 5..12
	fs, _ = segmentImages(t, 12, 1, 5)
	whole, _ := segmentImages(t, 10, 1)
	fs.put(memPath(1), whole.get(memPath(1)))
	l = mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
	if err := l.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("overlap: Verify: %v", err)
	}
	mustClose(t, l)

	// a zero-length or short segment, newest or older
	for _, cut := range []int{0, 1, segmentHeaderSize - 1} {
		for _, victim := range []int64{1, 6, 9} {
			fs, _ := segmentImages(t, 12, 1, 6, 9)
			fs.put(memPath(victim), fs.get(memPath(victim))[:cut])
			before := fs.names(memDir)
			for _, ro := range []bool{true, false} {
				_, err := Open(memDir, Options{fs: fs, ReadOnly: ro})
				wantCorruption(t, err, memPath(victim), 0)
				if got := fs.names(memDir); !slices.Equal(got, before) {
					t.Fatalf("failed open changed the segments: %v, want %v", got, before)
				}
			}
		}
	}
}
