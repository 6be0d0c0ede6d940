package wal

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func boundedMemTotalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// boundedMemLimit is what a probe may allocate for an input of a few KiB.
const boundedMemLimit = 16 << 20

// boundedMemHugeFrame returns a record frame header claiming a body of n
// bytes, with a length check that passes.
func boundedMemHugeFrame(n uint32) []byte {
	var hdr [frameHeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[0:4], n)
	binary.LittleEndian.PutUint32(hdr[4:8], crc32c(hdr[0:4]))
	binary.LittleEndian.PutUint32(hdr[8:12], 0xDEADBEEF)
	return hdr[:]
}

// TestBoundedMemHugeRecordLength: a segment of a few KiB whose record
// frame claims a body of MaxEntrySize (its length check passing) is torn
// or corrupt, never a GiB allocation: Open, Replay and Verify check the
// claimed length against the file before reading the body.
func TestBoundedMemHugeRecordLength(t *testing.T) {
	junk := make([]byte, 3000)
	for i := range junk {
		junk[i] = byte(i*7 + 1) // not zeros: not a page the disk lost
	}
	for _, tc := range []struct {
		name string
		tail bool
	}{{"newest segment", true}, {"older segment", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			seg := appendSegmentHeader(nil, 1, flagRelaxedAppends)
			seg = append(seg, boundedMemHugeFrame(MaxEntrySize)...)
			seg = append(seg, junk...)
			if err := os.WriteFile(filepath.Join(dir, segmentName(1)), seg, 0o644); err != nil {
				t.Fatal(err)
			}
			if !tc.tail {
				next := appendSegmentHeader(nil, 2, flagRelaxedAppends)
				next, err := appendRecord(next, &Entry{Version: 2})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, segmentName(2)), next, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := boundedMemTotalAlloc()
			l, err := Open(dir, Options{})
			var rerr, verr error
			if err == nil {
				rerr = l.Replay(1, 2, func(Entry) error { return nil })
				verr = l.Verify()
				_ = l.Close()
			}
			got := boundedMemTotalAlloc() - before
			t.Logf("segment of %d bytes: open %v; replay %v; verify %v; allocated %d KiB", len(seg), err, rerr, verr, got>>10)
			if !tc.tail && err == nil && (rerr == nil || verr == nil) {
				t.Fatalf("a record past the end of an older segment was not reported")
			}
			if got > boundedMemLimit {
				t.Fatalf("a segment of %d bytes claiming a %d-byte record made the log allocate %d MiB", len(seg), MaxEntrySize, got>>20)
			}
		})
	}
}

// TestBoundedMemDecodeEntryHugeCounts: element counts and lengths far
// beyond the body are refused before anything is allocated for them.
func TestBoundedMemDecodeEntryHugeCounts(t *testing.T) {
	huge := func(b []byte) []byte { return binary.AppendUvarint(b, 1<<62) }
	version := binary.LittleEndian.AppendUint64(nil, 1)
	pad := make([]byte, 64)
	cases := map[string][]byte{
		"change sets":    append(huge(append([]byte{}, version...)), pad...),
		"store name len": append(huge(append(append([]byte{}, version...), 1)), pad...),
		"pairs":          append(huge(append(append([]byte{}, version...), 1, 0)), pad...),
		"key len":        append(huge(append(append([]byte{}, version...), 1, 0, 1, opSet)), pad...),
		"added stores":   append(huge(append(append([]byte{}, version...), 0)), pad...),
		"renamed stores": append(huge(append(append([]byte{}, version...), 0, 0)), pad...),
		"deleted stores": append(huge(append(append([]byte{}, version...), 0, 0, 0)), pad...),
	}
	for name, body := range cases {
		before := boundedMemTotalAlloc()
		_, err := DecodeEntry(body)
		got := boundedMemTotalAlloc() - before
		if err == nil {
			t.Errorf("%s: a count of 2^62 in %d bytes decoded", name, len(body))
		}
		if got > 64<<10 {
			t.Errorf("%s: decoding %d bytes allocated %d KiB", name, len(body), got>>10)
		}
	}
}
