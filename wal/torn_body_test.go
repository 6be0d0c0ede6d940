package wal

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// TestTornTailPageLostInBody zeroes a whole page inside the body of a record
// of the newest segment that has whole records after it, as a file system
// that writes unsynced pages back out of order can leave after a power
// loss. A log whose appends are not strict (here SyncGrouped, and
// SyncEveryCommit with an asynchronous queue) had synced none of them, so
// Open cuts the log at that record; with synchronous appends under
// SyncEveryCommit the records after it prove it was durable, and Open
// reports corruption.
func TestTornTailPageLostInBody(t *testing.T) {
	rng := newRand(t)
	// random entries, each with a value of two pages: every body holds at
	// least one whole page
	shape := entryShape{stores: 2, pairs: 3, keyLen: 8, valueLen: 3000}
	entries := makeEntries(rng, 12, shape)
	for i := range entries {
		entries[i].ChangeSets = append(entries[i].ChangeSets, ChangeSet{Name: "big", Pairs: []KVPair{{Key: []byte("k"), Value: randBytes(rng, 2*unwrittenPage)}}})
	}
	data, offs := segmentOf(t, entries)
	tried := 0
	for k := 0; k+2 < len(entries); k++ {
		bodyStart := offs[k] + frameHeaderSize
		for p := (bodyStart + unwrittenPage - 1) / unwrittenPage * unwrittenPage; p+unwrittenPage <= offs[k+1]; p += unwrittenPage {
			if !slices.ContainsFunc(data[p:p+unwrittenPage], func(b byte) bool { return b != 0 }) {
				continue
			}
			tried++
			img := slices.Clone(data)
			clear(img[p : p+unwrittenPage])
			for _, o := range []Options{{Sync: SyncGrouped}, {Sync: SyncNone}, {AsyncBuffer: 2}} {
				checkCutAt(t, img, o, entries, offs, k, p)
			}
			wantDamage(t, img, Options{}, offs[k])
		}
	}
	if tried < len(entries)-2 {
		t.Fatalf("only %d pages tried", tried)
	}
}

// checkCutAt opens img, a segment whose record k (of entries, at offs[k])
// has the page at p zeroed, read-only and writable with o, and checks that
// the log ends before record k.
func checkCutAt(t *testing.T, img []byte, o Options, entries []Entry, offs []int64, k int, p int64) {
	t.Helper()
	img = asWrittenBy(img, o)
	ro := o
	ro.ReadOnly = true
	l, _, err := openImage(img, 1, ro)
	if err != nil {
		t.Fatalf("%+v: page at %d in record %d: read-only open: %v", o, p, k+1, err)
	}
	if l.LastVersion() != int64(k) {
		t.Fatalf("%+v: page at %d in record %d: read-only LastVersion %d, want %d", o, p, k+1, l.LastVersion(), k)
	}
	checkReplay(t, l, entries[:k])
	mustClose(t, l)
	l, fs, err := openImage(img, 1, o)
	if err != nil {
		t.Fatalf("%+v: page at %d in record %d: open: %v", o, p, k+1, err)
	}
	if l.LastVersion() != int64(k) {
		t.Fatalf("%+v: page at %d in record %d: LastVersion %d, want %d", o, p, k+1, l.LastVersion(), k)
	}
	torn, ok := l.TornTail()
	if !ok || torn.Offset != offs[k] {
		t.Fatalf("%+v: page at %d in record %d: torn tail %+v (%v), want at %d", o, p, k+1, torn, ok, offs[k])
	}
	mustClose(t, l)
	if got := fs.get(memPath(1)); !bytes.Equal(got, img[:offs[k]]) && !(k == 0 && got == nil) { // an empty newest segment is removed
		t.Fatalf("%+v: page at %d in record %d: segment not cut back to %d bytes (%d)", o, p, k+1, offs[k], len(got))
	}
}

// wantDamage opens img with o and replays it: the open, or else the replay
// (Open reads no record body in the middle of a segment of synchronous
// appends under SyncEveryCommit), must report corruption at off.
func wantDamage(t *testing.T, img []byte, o Options, off int64) {
	t.Helper()
	img = asWrittenBy(img, o)
	l, _, err := openImage(img, 1, o)
	if err == nil {
		_, err = collect(l, l.FirstVersion(), l.LastVersion())
		mustClose(t, l)
	}
	wantCorruption(t, err, memPath(1), off)
}

// TestTornTailPageLostAtRecordStart: the lost page starts anywhere from a
// record's frame header to its body's start, so that the header parses or
// not (its checksum covers only the length), or the version the scan reads
// from the body is zero.
func TestTornTailPageLostAtRecordStart(t *testing.T) {
	for into := 0; into <= frameHeaderSize; into++ {
		// record 2's frame header starts into bytes before a page boundary
		sizes := []int{unwrittenPage - segmentHeaderSize - into, 3 * unwrittenPage, 700, 900}
		img, offs, entries := sizedSegment(t, 1, sizes)
		offs = append(offs, int64(len(img)))
		if offs[1]+int64(into) != unwrittenPage {
			t.Fatalf("record 2 starts at %d", offs[1])
		}
		for _, p := range []int64{unwrittenPage, 2 * unwrittenPage} {
			damaged := slices.Clone(img)
			clear(damaged[p : p+unwrittenPage])
			if into > 0 || p > unwrittenPage {
				checkCutAt(t, damaged, Options{Sync: SyncGrouped}, entries, offs, 1, p)
			} else {
				// the whole frame header is zeros
				ro, _, err := openImage(asWrittenBy(damaged, Options{Sync: SyncGrouped}), 1, Options{Sync: SyncGrouped, ReadOnly: true})
				if err != nil || ro.LastVersion() != 1 {
					t.Fatalf("page at %d, the header at %d: %v", p, offs[1], err)
				}
				mustClose(t, ro)
			}
			wantDamage(t, damaged, Options{}, offs[1])
		}
	}
}

// TestZeroPageInSoundBody: a record whose value holds whole pages of zeros
// is not a lost page: its checksum passes, and nothing is cut.
func TestZeroPageInSoundBody(t *testing.T) {
	var entries []Entry
	for v := int64(1); v <= 4; v++ {
		entries = append(entries, Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte{'k', byte(v)}, Value: make([]byte, 3*unwrittenPage)}}}}})
	}
	data, _ := segmentOf(t, entries)
	for _, o := range []Options{{Sync: SyncGrouped}, {}} {
		l, _, err := openImage(data, 1, o)
		if err != nil {
			t.Fatal(err)
		}
		if l.LastVersion() != 4 {
			t.Fatalf("%+v: LastVersion %d, want 4", o, l.LastVersion())
		}
		if _, ok := l.TornTail(); ok {
			t.Fatalf("%+v: a torn tail in a sound log", o)
		}
		checkReplay(t, l, entries)
		mustClose(t, l)
	}
}

// TestDiscardingCutsBodyDamage: with synchronous appends under
// SyncEveryCommit, a lost page inside the body of a record after the
// unfinished rollback's target (Options.Discarding) is cut with the records
// after it, which the rollback was dropping; before the target it is
// corruption.
func TestDiscardingCutsBodyDamage(t *testing.T) {
	sizes := make([]int, 10)
	for i := range sizes {
		sizes[i] = 2*unwrittenPage + 300*i
	}
	img, offs, entries := sizedSegment(t, 1, sizes)
	// a page inside record 6's body (version 6, index 5)
	p := (offs[5] + frameHeaderSize + unwrittenPage - 1) / unwrittenPage * unwrittenPage
	if p+unwrittenPage > offs[6] {
		t.Fatalf("no whole page in record 6 (%d-%d)", offs[5], offs[6])
	}
	clear(img[p : p+unwrittenPage])
	for _, c := range []struct{ discarding, last int64 }{{0, 0}, {6, 0}, {5, 5}, {2, 5}} {
		if c.last == 0 {
			wantDamage(t, img, Options{Discarding: c.discarding}, offs[5])
			continue
		}
		wantOpenAt(t, img, Options{Discarding: c.discarding}, entries, c.last)
	}
}

// wantOpenAt opens img, a segment starting at version 1, with o and checks
// that the log holds entries up to version last.
func wantOpenAt(t *testing.T, img []byte, o Options, entries []Entry, last int64) {
	t.Helper()
	l, _, err := openImage(img, 1, o)
	if err != nil {
		t.Fatalf("discarding %d: %v", o.Discarding, err)
	}
	if l.LastVersion() != last {
		t.Fatalf("discarding %d: LastVersion %d, want %d", o.Discarding, l.LastVersion(), last)
	}
	checkReplay(t, l, entries[:last])
	mustClose(t, l)
}

// TestAppendsFlagDecides: an open judges damage in the newest segment by
// how its records were appended, which the segment's header records,
// whatever the open's own options: a lost page with whole records after it
// is cut in a segment of a grouped writer, also by an open with the
// default (strict) options, and is damage in one of synchronous appends
// under SyncEveryCommit, also for an open under SyncGrouped. A segment of
// format version 1, which does not record it, is read by every open as a
// relaxed writer's (the build that wrote it may have run under any
// policy), so that every open reaches the same version.
func TestAppendsFlagDecides(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 6, smallShape)
	for i := range entries {
		entries[i].ChangeSets = append(entries[i].ChangeSets, ChangeSet{Name: "big", Pairs: []KVPair{{Key: []byte("k"), Value: randBytes(rng, 2*unwrittenPage)}}})
	}
	data, offs := segmentOf(t, entries)
	// a page inside record 3's body
	p := (offs[2]/unwrittenPage + 1) * unwrittenPage
	clear(data[p : p+unwrittenPage])
	grouped := Options{Sync: SyncGrouped}
	v1 := slices.Clone(data)
	binary.LittleEndian.PutUint16(v1[4:6], formatVersion1)
	binary.LittleEndian.PutUint16(v1[6:8], 0)
	binary.LittleEndian.PutUint32(v1[16:20], crc32c(v1[:16]))
	for _, c := range []struct {
		name string
		img  []byte
		opts Options
		cut  bool
	}{
		{"grouped writer, default open", asWrittenBy(data, grouped), Options{}, true},
		{"grouped writer, grouped open", asWrittenBy(data, grouped), grouped, true},
		{"strict writer, grouped open", asWrittenBy(data, Options{}), grouped, false},
		{"strict writer, default open", asWrittenBy(data, Options{}), Options{}, false},
		{"version 1, grouped open", v1, grouped, true},
		{"version 1, default open", v1, Options{}, true},
	} {
		for _, ro := range []bool{true, false} {
			o := c.opts
			o.ReadOnly = ro
			cut := c.cut
			l, _, err := openImage(c.img, 1, o)
			if err == nil && !cut {
				_, err = collect(l, l.FirstVersion(), l.LastVersion())
				mustClose(t, l)
			}
			switch {
			case !cut:
				wantCorruption(t, err, memPath(1), offs[2])
			case err != nil:
				t.Fatalf("%s, read-only %v: %v", c.name, ro, err)
			default:
				if l.LastVersion() != 2 {
					t.Fatalf("%s, read-only %v: LastVersion %d, want 2", c.name, ro, l.LastVersion())
				}
				checkReplay(t, l, entries[:2])
				mustClose(t, l)
			}
		}
	}
}

// TestAppendsFlagRolls: a writer appends only to a segment of its own kind
// of appends: after an open under another policy, its first record starts
// a new segment, whose header says how it appends.
func TestAppendsFlagRolls(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 8, smallShape)
	fs := newMemFS()
	flagOf := func(base int64) uint16 { return binary.LittleEndian.Uint16(fs.get(memPath(base))[6:8]) }
	steps := []struct {
		opts  Options
		from  int // entries[from:to] appended
		to    int
		bases []int64
	}{
		{Options{}, 0, 2, []int64{1}},
		{Options{}, 2, 3, []int64{1}}, // same kind: the same segment
		{Options{Sync: SyncGrouped}, 3, 5, []int64{1, 4}},
		{Options{AsyncBuffer: 3}, 5, 6, []int64{1, 4}}, // relaxed too
		{Options{}, 6, 8, []int64{1, 4, 7}},
	}
	for _, st := range steps {
		o := st.opts
		o.fs = fs
		l := mustOpen(t, memDir, o)
		mustAppend(t, l, entries[st.from:st.to]...)
		mustClose(t, l)
		var bases []int64
		for _, n := range fs.names(memDir) {
			b, _ := parseSegmentName(n)
			bases = append(bases, b)
		}
		if !slices.Equal(bases, st.bases) {
			t.Fatalf("after %+v: segments %v, want %v", st.opts, bases, st.bases)
		}
		if f := flagOf(bases[len(bases)-1]); f != appendsFlagOf(st.opts) {
			t.Fatalf("after %+v: the newest segment's flags %#x, want %#x", st.opts, f, appendsFlagOf(st.opts))
		}
	}
	l := mustOpen(t, memDir, Options{fs: fs})
	checkReplay(t, l, entries)
	mustClose(t, l)
}

// TestAppendsFlagRollsAhead: a writable open that finds the newest segment
// of the other kind of appends starts the next segment ahead of the first
// record (so that commit does not pay its fsyncs); a close without a
// record removes it again.
func TestAppendsFlagRollsAhead(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 4, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries[:2]...)
	mustClose(t, l)
	grouped := Options{fs: fs, Sync: SyncGrouped}
	l = mustOpen(t, memDir, grouped)
	l.rollAhead.Wait()
	if got := fs.names(memDir); !slices.Equal(got, []string{segmentName(1), segmentName(3)}) {
		t.Fatalf("after an open of the other kind: segments %v, want one started ahead at 3", got)
	}
	if h := fs.get(memPath(3)); len(h) != segmentHeaderSize || binary.LittleEndian.Uint16(h[6:8]) != flagRelaxedAppends {
		t.Fatalf("the segment started ahead: % x", h)
	}
	mustClose(t, l)
	if got := fs.names(memDir); !slices.Equal(got, []string{segmentName(1)}) {
		t.Fatalf("after a close without records: segments %v", got)
	}
	l = mustOpen(t, memDir, grouped)
	mustAppend(t, l, entries[2:]...)
	mustClose(t, l)
	l = mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
	checkReplay(t, l, entries)
	mustClose(t, l)
	if got := fs.names(memDir); !slices.Equal(got, []string{segmentName(1), segmentName(3)}) {
		t.Fatalf("segments %v", got)
	}
	// an open of the same kind starts nothing
	l = mustOpen(t, memDir, grouped)
	l.rollAhead.Wait()
	if got := fs.names(memDir); !slices.Equal(got, []string{segmentName(1), segmentName(3)}) {
		t.Fatalf("after an open of the same kind: segments %v", got)
	}
	mustClose(t, l)
}
