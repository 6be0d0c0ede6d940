package wal

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestCloseSyncsLoneUnsyncedEntry: Close fsyncs what is unsynced under every
// policy, down to a single entry: under SyncNone and SyncGrouped (whose
// group is neither full nor old enough), synchronous and asynchronous, a
// power loss right after Close loses none of the entries appended, one or
// several.
func TestCloseSyncsLoneUnsyncedEntry(t *testing.T) {
	for _, sync := range []SyncPolicy{SyncNone, SyncGrouped} {
		for _, async := range []int{0, 3} {
			for _, n := range []int{1, 2, 5} {
				t.Run(fmt.Sprintf("%v/async=%d/n=%d", sync, async, n), func(t *testing.T) {
					rng := newRand(t)
					entries := makeEntries(rng, n, smallShape)
					fs := newMemFS()
					l := mustOpen(t, memDir, Options{fs: fs, Sync: sync, AsyncBuffer: async, GroupCount: 100, GroupInterval: time.Hour})
					mustAppend(t, l, entries...)
					mustClose(t, l)
					// power loss after Close
					c := mustOpen(t, memDir, Options{fs: fs.crash()})
					defer mustClose(t, c)
					if got := c.LastVersion(); got != int64(n) {
						t.Fatalf("after Close and a power loss: LastVersion %d, want %d", got, n)
					}
					checkReplay(t, c, entries)
				})
			}
		}
	}
}

// TestSegmentFilledExactly: the writer starts a new segment when the next
// record would take the active one past SegmentSize, not when it fills it
// exactly: two records whose sizes add up to SegmentSize after the header
// share one segment, and the third starts the next one.
func TestSegmentFilledExactly(t *testing.T) {
	const rec = 100
	size := int64(segmentHeaderSize + 2*rec)
	for _, async := range []int{0, 3} {
		t.Run(fmt.Sprintf("async=%d", async), func(t *testing.T) {
			es := []Entry{entryOfRecordSize(t, 1, rec), entryOfRecordSize(t, 2, rec), entryOfRecordSize(t, 3, rec)}
			fs := newMemFS()
			l := mustOpen(t, memDir, Options{fs: fs, SegmentSize: size, AsyncBuffer: async})
			mustAppendEach(t, l, es[:2]...)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := fs.get(memPath(1)); int64(len(got)) != size {
				t.Fatalf("segment 1 is %d bytes, want %d (both records)", len(got), size)
			}
			mustAppendEach(t, l, es[2])
			mustClose(t, l)
			want := fmt.Sprint([]string{segmentName(1), segmentName(3)})
			if got := fmt.Sprint(fs.names(memDir)); got != want {
				t.Fatalf("segments %s, want %s", got, want)
			}
			c := mustOpen(t, memDir, Options{fs: fs})
			defer mustClose(t, c)
			checkReplay(t, c, es)
		})
	}
}

// TestVersionOutOfSequenceInOlderSegment: in a segment that Open does not
// read (not the newest), a record whose checksum passes but whose version
// is not the one after the record before it (here a version repeated,
// while the segment's record count still matches the next segment's base)
// is corruption naming the segment and the record's offset: Verify, a
// Replay across it and a TruncateBack into that segment report it, and no
// entry of the wrong version reaches fn.
func TestVersionOutOfSequenceInOlderSegment(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 5, smallShape)
	fs := newMemFS()
	// segment 1: versions 1, 2, 2 (where 3 belongs); segment 4: 4, 5
	img := appendSegmentHeader(nil, 1, flagStrictAppends)
	for _, i := range []int{0, 1, 1} {
		var err error
		if img, err = appendRecord(img, &entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	fs.put(memPath(1), img)
	bad := recordOffsets(t, img)[2]
	img = appendSegmentHeader(nil, 4, flagStrictAppends)
	for _, i := range []int{3, 4} {
		var err error
		if img, err = appendRecord(img, &entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	fs.put(memPath(4), img)

	l := mustOpen(t, memDir, Options{fs: fs})
	defer l.Close()
	wantCorruption(t, l.Verify(), memPath(1), bad)
	var got []int64
	err := l.Replay(1, 5, func(e Entry) error {
		got = append(got, e.Version)
		return nil
	})
	wantCorruption(t, err, memPath(1), bad)
	if fmt.Sprint(got) != fmt.Sprint([]int64{1, 2}) {
		t.Fatalf("Replay handed fn versions %v before the damage, want [1 2]", got)
	}
	if err := l.TruncateBack(3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("TruncateBack(3) into the damaged segment: %v, want ErrCorrupt", err)
	}
}
