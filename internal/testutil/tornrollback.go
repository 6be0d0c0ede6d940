package testutil

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TearRollback leaves the database in dir (closed, its log written under
// wal.SyncEveryCommit, holding records after target) as a power loss inside
// a rollback to target may: the rollback record names target (the file
// multitree/format.go describes: magic, format, target, CRC32C), and in the
// newest log segment the page after target's record is lost (zeros from
// the next record's frame to the page's end) with whole records after it.
// The layout must allow it: target's record and at least one whole record
// after the lost page in the newest segment.
func TearRollback(t testing.TB, dir string, target int64) {
	t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, 0x4D544252)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint64(b, uint64(target))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(filepath.Join(dir, "rollback"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segments in %s: %v", dir, err)
	}
	sort.Strings(segs)
	path := segs[len(segs)-1]
	seg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := LogRecords(seg)
	if len(offs) == 0 {
		t.Fatalf("%s holds no record", path)
	}
	first := int64(binary.LittleEndian.Uint64(seg[offs[0]+12:]))
	i := int(target - first + 1) // the record after target's
	if target < first || i >= len(offs) {
		t.Fatalf("layout: %s holds versions %d..%d, no record after %d", path, first, first+int64(len(offs))-1, target)
	}
	at := offs[i]
	end := (at/4096 + 1) * 4096
	if offs[len(offs)-1] < end {
		t.Fatalf("layout: no whole record after the page that ends at %d: records at %v", end, offs)
	}
	clear(seg[at:end])
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		t.Fatal(err)
	}
}

// LogRecords returns the offsets of the records of a log segment's bytes
// (wal/format.go): after the segment's 20-byte header, each record is a
// 12-byte frame (body length first) and a body starting with its version.
// It stops at the first frame whose body does not fit.
func LogRecords(seg []byte) []int {
	var offs []int
	for off := 20; off+12+8 <= len(seg); off += 12 + int(binary.LittleEndian.Uint32(seg[off:])) {
		offs = append(offs, off)
	}
	return offs
}
