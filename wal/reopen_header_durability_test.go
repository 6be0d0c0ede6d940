package wal

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOpenMakesKilledWritersRecordsDurable: a writer killed with
// unsynced records leaves them in the page cache, where a writable Open
// reads them and reports them through LastVersion. Open must make them
// durable before it returns (load's fsync of the active segment): a power
// loss right after that Open must not take back a version it reported.
func TestOpenMakesKilledWritersRecordsDurable(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 6, smallShape)
	fs := newMemFS()
	// SyncNone and synchronous appends: no fsync on the append path and no
	// background goroutine; the log is abandoned, not closed (a kill)
	l := mustOpen(t, memDir, Options{fs: fs, Sync: SyncNone})
	mustAppend(t, l, entries...)
	l.rollAhead.Wait()

	r := mustOpen(t, memDir, Options{fs: fs, Sync: SyncNone})
	reported := r.LastVersion()
	if reported != int64(len(entries)) {
		t.Fatalf("reopen after the kill: LastVersion %d, want %d", reported, len(entries))
	}
	// power loss now, before anything else is written
	crashed := fs.crash()
	c := mustOpen(t, memDir, Options{fs: crashed})
	defer mustClose(t, c)
	if got := c.LastVersion(); got < reported {
		t.Fatalf("after a power loss following the reopen: LastVersion %d, but the reopen reported %d (Open did not make what it read durable)", got, reported)
	}
	checkReplay(t, c, entries)
}

// TestTruncateFrontRemovalsDurableInOrder: TruncateFront removes
// segments oldest first, each removal made durable before the next. Under
// one directory fsync the removals could survive a power loss in any
// subset, leaving a hole in the log (an older segment back, a middle one
// gone). Every crash image taken right after TruncateFront returns must
// replay as one contiguous run of versions.
func TestTruncateFrontRemovalsDurableInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	entries := makeEntries(rng, 12, smallShape)
	fs := newPLFS()
	l, err := Open(memDir, Options{fs: fs})
	if err != nil {
		t.Fatal(err)
	}
	// segments 1, 4, 7, 10
	for _, at := range []int64{4, 7, 10} {
		mustAppend(t, l, entries[at-4:at-1]...)
		l.RollAt(at)
		l.rollAhead.Wait()
	}
	mustAppend(t, l, entries[9:]...)
	l.mu.Lock()
	nsegs := len(l.mu.segments)
	l.mu.Unlock()
	if nsegs != 4 {
		t.Fatalf("%d segments, want 4", nsegs)
	}
	if err := l.TruncateFront(10); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	st := fs.snapshotLocked("after TruncateFront")
	fs.mu.Unlock()
	mustClose(t, l)

	for _, img := range st.images(rng, 64) {
		o, err := Open(memDir, Options{fs: imageFS(img), ReadOnly: true})
		if err != nil {
			t.Fatalf("image %s: Open: %v", img.desc, err)
		}
		first, last := o.FirstVersion(), o.LastVersion()
		if last != 12 {
			t.Fatalf("image %s: LastVersion %d, want 12", img.desc, last)
		}
		got, err := collect(o, first, last)
		if err != nil {
			t.Fatalf("image %s: the log is not one contiguous run after TruncateFront: Replay %d..%d: %v", img.desc, first, last, err)
		}
		for i, e := range got {
			if d := entryDiff(entries[int(first)-1+i], e); d != "" {
				t.Fatalf("image %s: entry %d: %s", img.desc, e.Version, d)
			}
		}
		if err := o.Verify(); err != nil {
			t.Fatalf("image %s: Verify: %v", img.desc, err)
		}
		o.Close()
	}
}

// TestSegmentHeaderBaseMustMatchName: the header's base version must
// equal the number in the segment's file name. A header-only segment whose
// header names another base is damage (a renamed or overwritten file), not
// an empty segment to drop: Open fails with ErrCorrupt naming it, at
// offset 0, and removes nothing.
func TestSegmentHeaderBaseMustMatchName(t *testing.T) {
	for _, ro := range []bool{false, true} {
		fs, _ := segmentImages(t, 5, 1)
		// an empty newest segment named for 6 whose header says 7
		hdr := appendSegmentHeader(nil, 7, flagStrictAppends)
		fs.put(memPath(6), hdr)
		before := fs.names(memDir)
		_, err := Open(memDir, Options{fs: fs, ReadOnly: ro})
		wantCorruption(t, err, memPath(6), 0)
		if got := fs.names(memDir); !slices.Equal(got, before) {
			t.Fatalf("read-only %v: failed open changed the segments: %v, want %v", ro, got, before)
		}

		// an older segment named for 1 whose header says 2, its
		// records the ones of 1..5
		fs, _ = segmentImages(t, 8, 1, 6)
		img := fs.get(memPath(1))
		binary.LittleEndian.PutUint64(img[8:16], 2)
		binary.LittleEndian.PutUint32(img[16:20], crc32c(img[:16]))
		fs.put(memPath(1), img)
		_, err = Open(memDir, Options{fs: fs, ReadOnly: ro})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: Open with a mismatched header base in an older segment: %v, want ErrCorrupt", ro, err)
		}
		wantCorruption(t, err, memPath(1), 0)
	}
}
