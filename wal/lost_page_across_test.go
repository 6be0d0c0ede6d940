package wal

import (
	"bytes"
	"slices"
	"testing"
)

// TestLostPageAcrossBeforePartialRecord: in a log of synchronous appends
// (the default policy), a page the file system did not write back holds
// the tail of record k and the frame header of record k+1, and the file
// goes on past that page with the rest of k+1's body, which is not a whole
// record. Both records are cut, as a torn tail: the page starts inside k's
// body, whose checksum fails, so k was never durable either (lostPageAcross).
// Only zeros after the page is the other case TestTornTailPageLostAcrossRecords
// covers; here the bytes after the page keep the scan from seeing zeros to
// the end, and without the page check k's failing body would be reported as
// corruption.
func TestLostPageAcrossBeforePartialRecord(t *testing.T) {
	rng := newRand(t)
	// records of up to about 36 KiB: many of them cross page boundaries
	shape := entryShape{stores: 3, pairs: 4, keyLen: 8, valueLen: 3000}
	entries := makeEntries(rng, 200, shape)
	data, offs := segmentOf(t, entries)
	tried := 0
	for k := 0; k+2 < len(offs); k++ {
		// the page holding k+1's whole frame header, starting inside k's
		// body after bytes other than zeros, with k+1's body going on
		// past it
		page := offs[k+1] / unwrittenPage * unwrittenPage
		if page <= offs[k]+frameHeaderSize || page == offs[k+1] ||
			offs[k+1]+frameHeaderSize > page+unwrittenPage || offs[k+2] <= page+unwrittenPage ||
			!slices.ContainsFunc(data[page:offs[k+1]], func(b byte) bool { return b != 0 }) ||
			!slices.ContainsFunc(data[page+unwrittenPage:offs[k+2]], func(b byte) bool { return b != 0 }) {
			continue
		}
		tried++
		img := slices.Clone(data[:offs[k+2]]) // the file ends with k+1's body
		clear(img[page : page+unwrittenPage])
		opts := Options{}
		fs := newMemFS()
		fs.put(memPath(1), asWrittenBy(img, opts))

		ro := opts
		ro.fs, ro.ReadOnly = fs, true
		l := mustOpen(t, memDir, ro)
		if l.LastVersion() != int64(k) {
			t.Fatalf("page at %d lost across records %d and %d, %d bytes of the file after it: read-only LastVersion %d, want %d",
				page, k+1, k+2, int64(len(img))-page-unwrittenPage, l.LastVersion(), k)
		}
		checkReplay(t, l, entries[:k])
		mustClose(t, l)
		if got := fs.get(memPath(1)); !bytes.Equal(got, asWrittenBy(img, opts)) {
			t.Fatalf("page at %d: the read-only open changed the segment", page)
		}

		rw := opts
		rw.fs = fs
		l = mustOpen(t, memDir, rw)
		if l.LastVersion() != int64(k) {
			t.Fatalf("page at %d: LastVersion %d, want %d", page, l.LastVersion(), k)
		}
		// a segment cut back to its header holds nothing: it may go
		if got := fs.get(memPath(1)); !bytes.Equal(got, asWrittenBy(data, opts)[:offs[k]]) && (k > 0 || len(got) > 0) {
			t.Fatalf("page at %d: segment not cut back to %d bytes (%d)", page, offs[k], len(got))
		}
		// the log goes on from the cut
		mustAppend(t, l, entries[k:]...)
		checkReplay(t, l, entries)
		mustClose(t, l)
	}
	if tried < 5 {
		t.Fatalf("only %d records cross a page boundary that way", tried)
	}
}
