package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// goldenEntry exercises every element of the entry encoding.
func goldenEntry() Entry {
	return Entry{
		Version: 0x0102030405060708,
		ChangeSets: []ChangeSet{
			{Name: "bank", Pairs: []KVPair{
				{Key: []byte("alice"), Value: []byte("100")},
				{Key: []byte("bob"), Delete: true},
				{Key: []byte("carol"), Value: []byte{}},
			}},
			{Name: "staking"},
			{Name: "", Pairs: []KVPair{{Key: []byte{}, Value: bytes.Repeat([]byte{0xAB}, 130)}}},
		},
		Upgrades: Upgrades{
			Added:   []string{"ibc"},
			Renamed: []RenamedStore{{OldName: "old", NewName: "new"}},
			Deleted: []string{"gov", "mint"},
		},
	}
}

func goldenSegmentEntries() []Entry {
	return []Entry{
		{Version: 7, ChangeSets: []ChangeSet{{Name: "acc", Pairs: []KVPair{{Key: []byte("k"), Value: []byte("v")}}}}},
		{Version: 8, ChangeSets: []ChangeSet{{Name: "acc", Pairs: []KVPair{{Key: []byte("k"), Delete: true}}}}},
	}
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read golden file (regenerate with -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: encoding changed; a format change needs a new FormatVersion.\ngot  %x\nwant %x", p, got, want)
	}
}

func TestGoldenEntry(t *testing.T) {
	e := goldenEntry()
	got, err := AppendEntry(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != EncodedSize(e) {
		t.Fatalf("EncodedSize %d, encoding is %d bytes", EncodedSize(e), len(got))
	}
	checkGolden(t, "entry_v1.golden", got)
	dec, err := DecodeEntry(got)
	if err != nil {
		t.Fatal(err)
	}
	if d := entryDiff(e, dec); d != "" {
		t.Fatal(d)
	}
	// Spot-check the documented layout.
	if v := binary.LittleEndian.Uint64(got[:8]); v != 0x0102030405060708 {
		t.Fatalf("version field %#x", v)
	}
	if got[8] != 3 || got[9] != 4 || string(got[10:14]) != "bank" || got[14] != 3 || got[15] != opSet {
		t.Fatalf("unexpected layout: % x", got[:16])
	}
}

func TestGoldenSegment(t *testing.T) {
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, goldenSegmentEntries()...)
	mustClose(t, l)
	got := fs.get(memPath(7))
	checkGolden(t, "segment_v2.golden", got)
	if f := binary.LittleEndian.Uint16(got[6:8]); f != flagStrictAppends {
		t.Fatalf("flags %#x, want %#x (synchronous appends under SyncEveryCommit)", f, flagStrictAppends)
	}

	if !bytes.Equal(got[:4], []byte("MWAL")) {
		t.Fatalf("magic bytes % x", got[:4])
	}
	if v := binary.LittleEndian.Uint16(got[4:6]); v != FormatVersion {
		t.Fatalf("format version %d", v)
	}
	// The golden segment reads back.
	fs2 := newMemFS()
	fs2.put(memPath(7), got)
	l2 := mustOpen(t, memDir, Options{fs: fs2, ReadOnly: true})
	defer l2.Close()
	es, err := collect(l2, 7, 8)
	if err != nil || len(es) != 2 {
		t.Fatalf("replay golden segment: %d entries, %v", len(es), err)
	}
	for i, e := range es {
		if d := entryDiff(goldenSegmentEntries()[i], e); d != "" {
			t.Fatal(d)
		}
	}
}

// TestGoldenSegmentV1 reads a segment of format version 1, written before
// the header recorded how the records were appended, and appends to it.
func TestGoldenSegmentV1(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("testdata", "segment_v1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(v1[4:6]); v != formatVersion1 {
		t.Fatalf("segment_v1.golden has format version %d", v)
	}
	for _, o := range []Options{{}, {Sync: SyncGrouped}} {
		fs := newMemFS()
		fs.put(memPath(7), v1)
		o.fs = fs
		l := mustOpen(t, memDir, o)
		es, err := collect(l, 7, 8)
		if err != nil || len(es) != 2 {
			t.Fatalf("%+v: replay of the version 1 segment: %d entries, %v", o, len(es), err)
		}
		for i, e := range es {
			if d := entryDiff(goldenSegmentEntries()[i], e); d != "" {
				t.Fatal(d)
			}
		}
		next := goldenSegmentEntries()[0]
		next.Version = 9
		mustAppend(t, l, next)
		mustClose(t, l)
		// the new record went to a segment of this format version
		if !bytes.Equal(fs.get(memPath(7)), v1) {
			t.Fatalf("%+v: the version 1 segment changed", o)
		}
		if h := fs.get(memPath(9)); len(h) < segmentHeaderSize || binary.LittleEndian.Uint16(h[4:6]) != FormatVersion || binary.LittleEndian.Uint16(h[6:8]) != appendsFlagOf(o) {
			t.Fatalf("%+v: the next segment's header % x", o, h[:min(len(h), segmentHeaderSize)])
		}
	}
}

func TestEntryRoundTripRandom(t *testing.T) {
	rng := newRand(t)
	n := 2000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		sh := entryShape{stores: 4, pairs: 1 + rng.IntN(40), keyLen: 1 + rng.IntN(64), valueLen: rng.IntN(400)}
		e := randEntry(rng, 1+rng.Int64N(1<<62), sh)
		b, err := AppendEntry([]byte("prefix"), e)
		if err != nil {
			t.Fatal(err)
		}
		body := b[len("prefix"):]
		if len(body) != EncodedSize(e) {
			t.Fatalf("entry %d: EncodedSize %d, encoding %d bytes", i, EncodedSize(e), len(body))
		}
		dec, err := DecodeEntry(body)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if d := entryDiff(e, dec); d != "" {
			t.Fatalf("entry %d: %s", i, d)
		}
		// Decoded slices cannot grow into their neighbours.
		for _, cs := range dec.ChangeSets {
			for _, p := range cs.Pairs {
				if cap(p.Key) != len(p.Key) || cap(p.Value) != len(p.Value) {
					t.Fatalf("entry %d: decoded slice capacity not clipped", i)
				}
			}
		}
	}
}

func TestEmptyValueIsNotDelete(t *testing.T) {
	e := Entry{Version: 1, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{
		{Key: []byte("empty"), Value: []byte{}},
		{Key: []byte("nil"), Value: nil}, // a set of nil is a set of the empty value
		{Key: []byte("del"), Delete: true, Value: []byte("ignored")},
	}}}}
	b, err := AppendEntry(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	ps := dec.ChangeSets[0].Pairs
	for i := 0; i < 2; i++ {
		if ps[i].Delete || ps[i].Value == nil || len(ps[i].Value) != 0 {
			t.Fatalf("pair %d: got %+v, want a set of a non-nil empty value", i, ps[i])
		}
	}
	if !ps[2].Delete || ps[2].Value != nil {
		t.Fatalf("delete decoded as %+v", ps[2])
	}
	// Also through a log and a reopen.
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, e)
	mustClose(t, l)
	l = mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
	defer l.Close()
	got, err := collect(l, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps = got[0].ChangeSets[0].Pairs
	if ps[0].Value == nil || ps[0].Delete || !ps[2].Delete || ps[2].Value != nil {
		t.Fatalf("after replay: %+v", ps)
	}
}

func TestDecodeEveryPrefixAndSuffix(t *testing.T) {
	b, err := AppendEntry(nil, goldenEntry())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i++ {
		if _, err := DecodeEntry(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d/%d bytes: got %v, want ErrCorrupt", i, len(b), err)
		}
	}
	if _, err := DecodeEntry(append(b, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: got %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	base := func() []byte {
		b := binary.LittleEndian.AppendUint64(nil, 1)
		return b
	}
	cases := map[string][]byte{
		"version 0":         append(binary.LittleEndian.AppendUint64(nil, 0), 0, 0, 0, 0),
		"version > MaxInt":  append(binary.LittleEndian.AppendUint64(nil, 1<<63), 0, 0, 0, 0),
		"non-minimal count": append(base(), 0x80, 0x00, 0, 0, 0),
		"huge count":        append(base(), 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0),
		"varint overflow":   append(base(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0),
		"unknown op":        append(base(), 1, 1, 's', 1, 0x02, 1, 'k', 0, 0, 0),
		"key past end":      append(base(), 1, 1, 's', 1, opSet, 0x7f, 'k', 0, 0, 0),
		"missing upgrades":  append(base(), 0, 0),
		"short":             {1, 2, 3},
		"nil":               nil,
	}
	for name, b := range cases {
		e, err := DecodeEntry(b)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %+v, %v; want ErrCorrupt", name, e, err)
		}
	}
	if _, err := AppendEntry(nil, Entry{Version: 0}); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("encode version 0: %v", err)
	}
}

func TestSegmentNames(t *testing.T) {
	if got := segmentName(1); got != "00000000000000000001.wal" {
		t.Fatalf("segmentName(1) = %q", got)
	}
	for _, v := range []int64{1, 42, 1 << 40, 1<<63 - 1} {
		if got, ok := parseSegmentName(segmentName(v)); !ok || got != v {
			t.Fatalf("round trip of %d: %d, %v", v, got, ok)
		}
	}
	for _, bad := range []string{"", "1.wal", "00000000000000000000.wal", "0000000000000000000a.wal",
		"99999999999999999999.wal", "00000000000000000001.wal.tmp", "00000000000000000001.log"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Fatalf("parseSegmentName(%q) accepted", bad)
		}
	}
}

func TestSegmentHeader(t *testing.T) {
	h := appendSegmentHeader(nil, 99, flagRelaxedAppends)
	if len(h) != segmentHeaderSize {
		t.Fatalf("header is %d bytes", len(h))
	}
	for _, flags := range []uint16{0, flagStrictAppends, flagRelaxedAppends} {
		if base, got, err := parseSegmentHeader(appendSegmentHeader(nil, 99, flags)); err != nil || base != 99 || got != flags {
			t.Fatalf("parse with flags %#x: %d, %#x, %v", flags, base, got, err)
		}
	}
	// two kinds of appends at once, none in this format version, or any
	// in version 1 are damage; bits this build does not know are a later
	// build's
	for _, c := range []struct {
		v, flags    uint16
		unsupported bool
	}{
		{FormatVersion, flagStrictAppends | flagRelaxedAppends, false}, {FormatVersion, 0, false},
		{formatVersion1, flagStrictAppends, false}, {formatVersion1, flagRelaxedAppends, false},
		{FormatVersion, 0x0004, true}, {FormatVersion, 0x8001, true},
	} {
		b := appendSegmentHeader(nil, 99, c.flags)
		binary.LittleEndian.PutUint16(b[4:6], c.v)
		binary.LittleEndian.PutUint32(b[16:20], crc32c(b[:16]))
		if _, _, err := parseSegmentHeader(b); err == nil || errors.Is(err, ErrUnsupportedFormat) != c.unsupported {
			t.Fatalf("version %d, flags %#x: %v, want unsupported: %v", c.v, c.flags, err, c.unsupported)
		}
	}
	// A future format version is refused as unsupported, not as corrupt.
	future := bytes.Clone(h)
	binary.LittleEndian.PutUint16(future[4:6], FormatVersion+1)
	binary.LittleEndian.PutUint32(future[16:20], crc32c(future[:16]))
	if _, _, err := parseSegmentHeader(future); !errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("future format: %v", err)
	}
	fs := newMemFS()
	fs.put(memPath(99), future)
	if _, err := Open(memDir, Options{fs: fs}); !errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("open future format: %v", err)
	}
}
