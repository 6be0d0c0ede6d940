package wal

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// rawRecord frames the body of e without the checks of appendRecord, so that
// its version may be one no writer appends.
func rawRecord(e Entry) []byte {
	body := appendBody(nil, &e)
	rec := make([]byte, frameHeaderSize, frameHeaderSize+len(body))
	rec = append(rec, body...)
	putFrameHeader(rec[:frameHeaderSize], rec[frameHeaderSize:])
	return rec
}

// TestRecordAfterLastVersion: a segment whose records are
// math.MaxInt64-1, math.MaxInt64 and then one of version 2^63 (valid
// checksums; no writer appends it, as no version follows math.MaxInt64) is
// damage, reported as corruption, and the segment is kept. (The scan's
// version counter wraps around to math.MinInt64, whose bits the record's
// version matches: were it taken for the next record, the segment's last
// version would come out negative, and Open would remove the segment with
// its two good records as one holding none.)
func TestRecordAfterLastVersion(t *testing.T) {
	dir := t.TempDir()
	base := int64(math.MaxInt64 - 1)
	b := appendSegmentHeader(nil, base, flagStrictAppends)
	b = append(b, rawRecord(Entry{Version: base})...)
	b = append(b, rawRecord(Entry{Version: math.MaxInt64})...)
	b = append(b, rawRecord(Entry{Version: math.MinInt64})...) // body version 2^63
	path := filepath.Join(dir, segmentName(base))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{})
	if err == nil {
		first, last := l.FirstVersion(), l.LastVersion()
		_ = l.Close()
		_, serr := os.Stat(path)
		t.Fatalf("Open accepted the segment: first %d, last %d; segment file: %v; want an error wrapping ErrCorrupt", first, last, serr)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	if _, serr := os.Stat(path); serr != nil {
		t.Fatalf("segment removed: %v", serr)
	}
}
