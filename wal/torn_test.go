package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// recordOffsets returns the start offsets of the records in a well-formed
// segment image, followed by the end of the last record.
func recordOffsets(t testing.TB, data []byte) []int64 {
	t.Helper()
	offs := []int64{}
	off := int64(segmentHeaderSize)
	for off < int64(len(data)) {
		offs = append(offs, off)
		if int64(len(data))-off < frameHeaderSize {
			t.Fatalf("malformed test segment at %d", off)
		}
		off += frameHeaderSize + int64(binary.LittleEndian.Uint32(data[off:]))
	}
	return append(offs, off)
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, ok := parseSegmentName(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestTornTailEveryOffset cuts the newest segment at every byte offset
// inside its last record, on the real file system. Each reopen must recover
// exactly the earlier entries, and appending the lost version again must
// work.
func TestTornTailEveryOffset(t *testing.T) {
	for _, tc := range []struct {
		name        string
		segmentSize int64
	}{
		{"one segment", 0},
		{"record per segment", 64}, // the last record is alone in its segment
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := newRand(t)
			const n = 30
			entries := makeEntries(rng, n, smallShape)
			for EncodedSize(entries[n-1]) < 100 { // a last record of some substance
				entries[n-1] = randEntry(rng, n, smallShape)
			}
			dir := filepath.Join(t.TempDir(), "wal")
			opts := Options{SegmentSize: tc.segmentSize, Sync: SyncNone}
			l := mustOpen(t, dir, opts)
			mustAppend(t, l, entries...)
			mustClose(t, l)

			files := segmentFiles(t, dir)
			lastName := files[len(files)-1]
			lastPath := filepath.Join(dir, lastName)
			data, err := os.ReadFile(lastPath)
			if err != nil {
				t.Fatal(err)
			}
			offs := recordOffsets(t, data)
			lastStart := offs[len(offs)-2]
			if offs[len(offs)-1] != int64(len(data)) {
				t.Fatalf("record offsets %v do not end at %d", offs, len(data))
			}
			restore := func(cut int64) {
				t.Helper()
				for _, name := range segmentFiles(t, dir) {
					if !slices.Contains(files, name) {
						if err := os.Remove(filepath.Join(dir, name)); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := os.WriteFile(lastPath, data[:cut], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for cut := lastStart; cut < int64(len(data)); cut++ {
				restore(cut)

				// Read-only: the torn tail is ignored and left alone.
				ro := mustOpen(t, dir, Options{ReadOnly: true})
				if got := ro.LastVersion(); got != n-1 {
					t.Fatalf("cut at %d: read-only LastVersion %d, want %d", cut, got, n-1)
				}
				checkReplay(t, ro, entries)
				tt, torn := ro.TornTail()
				switch {
				case cut == lastStart && torn:
					t.Fatalf("cut at %d: read-only open reports a torn tail %+v at a record boundary", cut, tt)
				case cut > lastStart && (!torn || tt.Path != lastPath || tt.Offset != lastStart || tt.Bytes != cut-lastStart):
					t.Fatalf("cut at %d: torn tail %+v (%v), want %d bytes at %s offset %d", cut, tt, torn, cut-lastStart, lastPath, lastStart)
				}
				mustClose(t, ro)
				if b, err := os.ReadFile(lastPath); err != nil || int64(len(b)) != cut {
					t.Fatalf("cut at %d: read-only open changed the file (%d bytes, %v)", cut, len(b), err)
				}

				l := mustOpen(t, dir, opts)
				if got := l.LastVersion(); got != n-1 {
					t.Fatalf("cut at %d: LastVersion %d, want %d", cut, got, n-1)
				}
				checkReplay(t, l, entries)
				fi, err := os.Stat(lastPath)
				switch {
				case lastStart == segmentHeaderSize:
					if !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("cut at %d: segment left without records was not removed (%v)", cut, err)
					}
				case err != nil || fi.Size() != lastStart:
					t.Fatalf("cut at %d: file not truncated to %d (%v, %v)", cut, lastStart, fi, err)
				}
				mustAppend(t, l, entries[n-1])
				mustClose(t, l)

				ro = mustOpen(t, dir, Options{ReadOnly: true})
				if got := ro.LastVersion(); got != n {
					t.Fatalf("cut at %d: after re-append LastVersion %d, want %d", cut, got, n)
				}
				checkReplay(t, ro, entries)
				if tt, torn := ro.TornTail(); torn {
					t.Fatalf("cut at %d: torn tail %+v after the repair", cut, tt)
				}
				mustClose(t, ro)
			}
		})
	}
}

// TestTornTailZeroFill: a crash can leave the file longer than its data,
// filled with zeros. That is a torn tail too.
func TestTornTailZeroFill(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 10, smallShape)
	for EncodedSize(entries[9]) < 100 {
		entries[9] = randEntry(rng, 10, smallShape)
	}
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries...)
	mustClose(t, l)
	data := fs.get(memPath(1))
	for _, zeros := range []int{1, frameHeaderSize, 4096} {
		fs := newMemFS()
		fs.put(memPath(1), append(slices.Clone(data), make([]byte, zeros)...))
		l := mustOpen(t, memDir, Options{fs: fs})
		if l.LastVersion() != 10 {
			t.Fatalf("%d zeros: LastVersion %d", zeros, l.LastVersion())
		}
		checkReplay(t, l, entries)
		mustClose(t, l)
		if got := fs.get(memPath(1)); !bytes.Equal(got, data) {
			t.Fatalf("%d zeros: file not truncated back to %d bytes (%d)", zeros, len(data), len(got))
		}
	}
	// The zeros may also start inside the last record.
	offs := recordOffsets(t, data)
	last := offs[len(offs)-2]
	img := slices.Clone(data)
	clear(img[last+frameHeaderSize+3:])
	img = append(img, make([]byte, 100)...)
	fs = newMemFS()
	fs.put(memPath(1), img)
	l = mustOpen(t, memDir, Options{fs: fs})
	if l.LastVersion() != 9 {
		t.Fatalf("zeros inside the last record: LastVersion %d", l.LastVersion())
	}
	mustClose(t, l)
}

// TestTornTailUnwrittenPage: a file system that writes unsynced pages back
// out of order can lose the page where a record starts while later pages of
// it, or of records after it, reach the disk. Zeros from a frame header to
// the end of its page are such a page: Open cuts the log there, with all
// that follows (none of it was fsynced), and a read-only Open reads the log
// up to it. Zeros that stop before the page ends, or a damaged header that
// is not zeros, are still corruption.
func TestTornTailUnwrittenPage(t *testing.T) {
	rng := newRand(t)
	pageEnd := func(off int64) int64 { return (off/unwrittenPage + 1) * unwrittenPage }
	var (
		entries []Entry
		data    []byte
		offs    []int64
	)
	// versions 5 and 6 span pages, and each of 5 and 6 starts in the
	// first half of a page, whose rest then holds its value of sevens
	for {
		entries = makeEntries(rng, 6, smallShape)
		for _, i := range []int{4, 5} {
			entries[i].ChangeSets = append(entries[i].ChangeSets, ChangeSet{Name: "big", Pairs: []KVPair{{Key: []byte("k"), Value: bytes.Repeat([]byte{7}, 3*unwrittenPage)}}})
		}
		data, offs = segmentOf(t, entries)
		if offs[4]%unwrittenPage < unwrittenPage/2 && offs[5]%unwrittenPage < unwrittenPage/2 {
			break
		}
	}

	// synchronous appends under SyncEveryCommit (the default options)
	// write a record only once the one before is durable; grouped fsyncs
	// leave several records unsynced at once
	sync, grouped := Options{}, Options{Sync: SyncGrouped}
	for _, c := range []struct {
		name string
		opts Options
		rec  int   // the record whose page is lost
		to   int64 // zeros from its header up to here
		last int64 // LastVersion after a successful open; 0: corruption
	}{
		// the last record's first page lost, its later pages written
		{"last record", sync, 5, pageEnd(offs[5]), 5},
		{"last record, grouped", grouped, 5, pageEnd(offs[5]), 5},
		// 5's first page lost, the rest of 5 and all of 6 written: a
		// crash of a grouped log; damage of a synchronous one, which
		// writes 6 only once 5 is durable
		{"records after it, grouped", grouped, 4, pageEnd(offs[4]), 4},
		{"records after it", sync, 4, pageEnd(offs[4]), 0},
		// a whole page of zeros from a page boundary, into the record
		{"whole page", sync, 5, pageEnd(offs[5]) + unwrittenPage, 5},
		// zeros that stop inside the page are not a lost page
		{"zeros short of the page end", sync, 5, pageEnd(offs[5]) - 1, 0},
		{"zeros short of the page end, grouped", grouped, 5, pageEnd(offs[5]) - 1, 0},
		{"header only", grouped, 4, offs[4] + frameHeaderSize, 0},
	} {
		written := asWrittenBy(data, c.opts)
		img := slices.Clone(written)
		clear(img[offs[c.rec]:c.to])
		if c.last == 0 {
			fs := newMemFS()
			fs.put(memPath(1), slices.Clone(img))
			o := c.opts
			o.fs = fs
			_, err := Open(memDir, o)
			wantCorruption(t, err, memPath(1), offs[c.rec])
			if !bytes.Equal(fs.get(memPath(1)), img) {
				t.Fatalf("%s: a failed open modified the segment", c.name)
			}
			continue
		}
		// read-only: the log up to the lost page, the file untouched
		fs := newMemFS()
		fs.put(memPath(1), slices.Clone(img))
		opts := func(ro bool) Options {
			o := c.opts
			o.fs, o.ReadOnly = fs, ro
			return o
		}
		ro := mustOpen(t, memDir, opts(true))
		if ro.LastVersion() != c.last {
			t.Fatalf("%s: read-only LastVersion %d, want %d", c.name, ro.LastVersion(), c.last)
		}
		checkReplay(t, ro, entries[:c.last])
		mustClose(t, ro)
		if !bytes.Equal(fs.get(memPath(1)), img) {
			t.Fatalf("%s: a read-only open modified the segment", c.name)
		}
		// writable: cut there, reported, and the lost version appends again
		l := mustOpen(t, memDir, opts(false))
		if l.LastVersion() != c.last {
			t.Fatalf("%s: LastVersion %d, want %d", c.name, l.LastVersion(), c.last)
		}
		if tt, ok := l.TornTail(); !ok || tt.Offset != offs[c.rec] || tt.Bytes != int64(len(img))-offs[c.rec] {
			t.Fatalf("%s: torn tail %+v %v, want %d bytes at %d", c.name, tt, ok, int64(len(img))-offs[c.rec], offs[c.rec])
		}
		if got := fs.get(memPath(1)); !bytes.Equal(got, written[:offs[c.rec]]) {
			t.Fatalf("%s: segment not cut back to %d bytes (%d)", c.name, offs[c.rec], len(got))
		}
		mustAppend(t, l, entries[c.last:]...)
		checkReplay(t, l, entries)
		mustClose(t, l)
	}
}

// TestTornTailPageLostAcrossRecords: the lost page holds the tail of one
// record and the header of the next (and maybe more records): both are cut,
// with all after them, unless whole records follow in a log of synchronous
// appends (damage). Zeros that start at the next record's header, after the
// first record's tail, are not the first record's loss: its failing body is
// corruption.
func TestTornTailPageLostAcrossRecords(t *testing.T) {
	rng := newRand(t)
	shape := entryShape{stores: 2, pairs: 3, keyLen: 8, valueLen: 900}
	// pageAfter returns the page holding record k's tail and record k+1's
	// whole header, if there is one and the tail has bytes other than
	// zeros (a page of zeros takes nothing of it)
	pageAfter := func(data []byte, offs []int64, k int) (int64, bool) {
		page := (offs[k+1] / unwrittenPage) * unwrittenPage
		if page <= offs[k]+frameHeaderSize || page == offs[k+1] || offs[k+1]+frameHeaderSize > page+unwrittenPage || page+unwrittenPage > int64(len(data)) {
			return 0, false
		}
		return page, slices.ContainsFunc(data[page:offs[k+1]], func(b byte) bool { return b != 0 })
	}
	// 200 entries, and more while fewer than 10 records cross a page
	// boundary that way
	entries := makeEntries(rng, 200, shape)
	var data []byte
	var offs []int64
	for {
		data, offs = segmentOf(t, entries)
		n := 0
		for k := 0; k+1 < len(entries); k++ {
			if _, ok := pageAfter(data, offs, k); ok {
				n++
			}
		}
		if n >= 10 {
			break
		}
		if len(entries) >= 2000 {
			t.Fatalf("only %d of %d records cross a page boundary into the next one's header", n, len(entries))
		}
		for range 50 {
			entries = append(entries, randEntry(rng, int64(len(entries)+1), shape))
		}
	}
	tried := 0
	for k := 0; k+1 < len(entries); k++ {
		page, ok := pageAfter(data, offs, k)
		if !ok {
			continue
		}
		tried++
		img := slices.Clone(data)
		clear(img[page : page+unwrittenPage])
		for _, c := range []struct {
			name string
			opts Options
			img  []byte
		}{
			// a grouped log: the records after the page were unsynced too
			{"grouped", Options{Sync: SyncGrouped}, img},
			// synchronous appends: nothing after the page was written
			{"synchronous, the file ending with the page", Options{}, img[:page+unwrittenPage]},
		} {
			fs := newMemFS()
			fs.put(memPath(1), asWrittenBy(c.img, c.opts))
			o := c.opts
			o.fs, o.ReadOnly = fs, true
			ro := mustOpen(t, memDir, o)
			if ro.LastVersion() != int64(k) {
				t.Fatalf("%s: page at %d lost across records %d and %d: read-only LastVersion %d, want %d", c.name, page, k+1, k+2, ro.LastVersion(), k)
			}
			checkReplay(t, ro, entries[:k])
			mustClose(t, ro)
			o.ReadOnly = false
			l := mustOpen(t, memDir, o)
			if l.LastVersion() != int64(k) {
				t.Fatalf("%s: page at %d: LastVersion %d, want %d", c.name, page, l.LastVersion(), k)
			}
			if got := fs.get(memPath(1)); !bytes.Equal(got, asWrittenBy(data, c.opts)[:offs[k]]) {
				t.Fatalf("%s: page at %d: segment not cut back to %d bytes (%d)", c.name, page, offs[k], len(got))
			}
			mustClose(t, l)
		}
		// synchronous appends with whole records after the page: damage
		// (the last offset is the end of the file)
		if offs[len(offs)-2] >= page+unwrittenPage {
			fs := newMemFS()
			fs.put(memPath(1), slices.Clone(img))
			_, err := Open(memDir, Options{fs: fs})
			wantCorruption(t, err, memPath(1), offs[k+1])
		}

		// the page written with record k's tail but without what followed
		// (zeros from k+1's header), and k's body damaged: k was whole on
		// disk, so that is not the crash's doing (unless only zeros follow
		// the page: then k is a torn last record)
		if slices.ContainsFunc(data[page+unwrittenPage:], func(b byte) bool { return b != 0 }) {
			img = slices.Clone(data)
			clear(img[offs[k+1] : page+unwrittenPage])
			img[offs[k]+frameHeaderSize+1] ^= 0xff
			fs := newMemFS()
			fs.put(memPath(1), asWrittenBy(img, Options{Sync: SyncGrouped}))
			_, err := Open(memDir, Options{fs: fs, Sync: SyncGrouped})
			wantCorruption(t, err, memPath(1), offs[k])
		}
	}
	if tried < 10 {
		t.Fatalf("only %d records cross a page boundary into the next one's header", tried)
	}
}

// TestDiscardingCutsDamage: damage in the newest segment after the version
// that Options.Discarding names (an unfinished rollback's target) is a
// torn tail, whatever follows it: a power loss inside TruncateBack's cut
// can leave a zeroed page before the records it was dropping. At or
// before that version it is still corruption.
func TestDiscardingCutsDamage(t *testing.T) {
	rng := newRand(t)
	shape := entryShape{stores: 2, pairs: 3, keyLen: 8, valueLen: 900}
	// a zeroed page from the header of version 21 (index 20), whole
	// records after it (the last offset is the end of the file)
	var (
		entries []Entry
		data    []byte
		offs    []int64
	)
	pageEnd := func() int64 { return (offs[20]/unwrittenPage + 1) * unwrittenPage }
	for {
		entries = makeEntries(rng, 30, shape)
		data, offs = segmentOf(t, entries)
		if offs[len(offs)-2] >= pageEnd() {
			break
		}
	}
	img := slices.Clone(data)
	clear(img[offs[20]:pageEnd()])
	for _, c := range []struct {
		discarding, last int64 // last 0: corruption
	}{{0, 0}, {22, 0}, {21, 0}, {20, 20}, {12, 20}} {
		if c.last == 0 {
			_, _, err := openImage(img, 1, Options{Discarding: c.discarding})
			wantCorruption(t, err, memPath(1), offs[20])
			continue
		}
		wantOpenAt(t, img, Options{Discarding: c.discarding}, entries, c.last)
	}
	if _, err := Open(memDir, Options{fs: newMemFS(), Discarding: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("negative Discarding: %v", err)
	}
}

// TestGarbageAfterTailIsCorruption: bytes after the last record that are
// neither a record, zeros, nor a cut-off record are not what a crash
// leaves; Open refuses rather than guess.
func TestGarbageAfterTailIsCorruption(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 5, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries...)
	mustClose(t, l)
	data := fs.get(memPath(1))
	garbage := bytes.Repeat([]byte{0x5a}, 64)
	fs.put(memPath(1), append(slices.Clone(data), garbage...))
	_, err := Open(memDir, Options{fs: fs})
	wantCorruption(t, err, memPath(1), int64(len(data)))
	if !bytes.Equal(fs.get(memPath(1))[:len(data)], data) {
		t.Fatal("failed open modified the segment")
	}
}

// TestRecordBeforeCutTailChecked: when Open cuts the last record off as a
// torn tail (its body fails, only zeros follow), the record before it
// becomes the last and is checked too, as it is when the last record is cut
// short: a damaged one is corruption, not a version to append after (a
// later replay would fail on it).
func TestRecordBeforeCutTailChecked(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 5, smallShape)
	for i := range entries {
		for EncodedSize(entries[i]) < 40 {
			entries[i] = randEntry(rng, int64(i+1), smallShape)
		}
	}
	data, offs := segmentOf(t, entries)
	for _, c := range []struct {
		name string
		cut  func(img []byte) // damages the last record (version 5)
	}{
		{"last record's body fails", func(img []byte) { img[offs[4]+frameHeaderSize+20] ^= 0xff }},
		{"last record's tail zeroed", func(img []byte) { clear(img[offs[4]+frameHeaderSize+20:]) }},
	} {
		// the last record alone: cut, version 4 is the last
		img := slices.Clone(data)
		c.cut(img)
		fs := newMemFS()
		fs.put(memPath(1), img)
		l := mustOpen(t, memDir, Options{fs: fs})
		if l.LastVersion() != 4 {
			t.Fatalf("%s: LastVersion %d", c.name, l.LastVersion())
		}
		checkReplay(t, l, entries[:4])
		mustClose(t, l)

		// and the record before it damaged too: corruption at version 4
		img = slices.Clone(data)
		c.cut(img)
		img[offs[3]+frameHeaderSize+20] ^= 0xff
		fs = newMemFS()
		fs.put(memPath(1), slices.Clone(img))
		_, err := Open(memDir, Options{fs: fs})
		wantCorruption(t, err, memPath(1), offs[3])
		if !bytes.Equal(fs.get(memPath(1)), img) {
			t.Fatalf("%s: a failed open modified the segment", c.name)
		}
	}
}

// TestEmptyNewestSegmentRemoved: a crash right after a segment was created
// leaves it without records; Open removes it (read-only Open ignores it).
func TestEmptyNewestSegmentRemoved(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 6, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries[:5]...)
	mustClose(t, l)
	fs.put(memPath(6), appendSegmentHeader(nil, 6, flagStrictAppends))
	fs.put(memDir+"/"+segmentName(6)+tmpExt, []byte("partial"))

	ro := mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
	if ro.LastVersion() != 5 {
		t.Fatalf("read-only LastVersion %d", ro.LastVersion())
	}
	mustClose(t, ro)
	if len(fs.names(memDir)) != 3 {
		t.Fatalf("read-only open changed the directory: %v", fs.names(memDir))
	}

	l = mustOpen(t, memDir, Options{fs: fs})
	if l.LastVersion() != 5 {
		t.Fatalf("LastVersion %d", l.LastVersion())
	}
	if names := fs.names(memDir); len(names) != 1 || names[0] != segmentName(1) {
		t.Fatalf("files after open: %v", names)
	}
	mustAppend(t, l, entries[5])
	checkReplay(t, l, entries)
	mustClose(t, l)
}

// TestForeignTempFileKept: Open removes the temporary files of segments
// being created, and no other file, even one whose name ends like theirs.
func TestForeignTempFileKept(t *testing.T) {
	dir := t.TempDir()
	ours := filepath.Join(dir, segmentName(1)+tmpExt)
	foreign := filepath.Join(dir, "backup.wal"+tmpExt)
	for _, p := range []string{ours, foreign} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, mustOpen(t, dir, Options{}))
	if _, err := os.Stat(ours); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a segment's temporary file was kept: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("Open removed %s, which is not its file: %v", foreign, err)
	}
}
