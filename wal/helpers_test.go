package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var (
	update   = flag.Bool("update", false, "rewrite the golden files and the fuzz seed corpora under testdata/")
	seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: derived from the clock)")
)

// newRand returns a seeded generator and prints the seed if the test fails.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random seed: %d (rerun with -seed=%d)", seed, seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

type entryShape struct {
	stores   int // max change sets
	pairs    int // max pairs per change set
	keyLen   int
	valueLen int
}

var smallShape = entryShape{stores: 3, pairs: 4, keyLen: 8, valueLen: 24}

// randEntry returns a random entry: sets (some of empty values), deletes
// (nil values) and now and then store upgrades.
func randEntry(rng *rand.Rand, version int64, sh entryShape) Entry {
	e := Entry{Version: version}
	for i := range rng.IntN(sh.stores + 1) {
		cs := ChangeSet{Name: fmt.Sprintf("store%d", i)}
		for range rng.IntN(sh.pairs + 1) {
			p := KVPair{Key: randBytes(rng, 1+rng.IntN(sh.keyLen))}
			switch rng.IntN(5) {
			case 0:
				p.Delete = true
			case 1:
				p.Value = []byte{}
			default:
				p.Value = randBytes(rng, rng.IntN(sh.valueLen+1))
			}
			cs.Pairs = append(cs.Pairs, p)
		}
		e.ChangeSets = append(e.ChangeSets, cs)
	}
	if rng.IntN(10) == 0 {
		e.Upgrades.Added = []string{fmt.Sprintf("new%d", version)}
		e.Upgrades.Renamed = []RenamedStore{{OldName: "a", NewName: fmt.Sprintf("b%d", version)}}
		e.Upgrades.Deleted = []string{"gone"}
	}
	return e
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// entryDiff describes how got differs from want, or returns "" when they
// are equal as the format promises: same pairs in order, deletes with a nil
// Value, sets with a non-nil Value of equal bytes.
func entryDiff(want, got Entry) string {
	if want.Version != got.Version {
		return fmt.Sprintf("version %d, want %d", got.Version, want.Version)
	}
	if len(want.ChangeSets) != len(got.ChangeSets) {
		return fmt.Sprintf("v%d: %d change sets, want %d", want.Version, len(got.ChangeSets), len(want.ChangeSets))
	}
	for i, wcs := range want.ChangeSets {
		gcs := got.ChangeSets[i]
		if wcs.Name != gcs.Name || len(wcs.Pairs) != len(gcs.Pairs) {
			return fmt.Sprintf("v%d: change set %d is %q with %d pairs, want %q with %d", want.Version, i, gcs.Name, len(gcs.Pairs), wcs.Name, len(wcs.Pairs))
		}
		for j, wp := range wcs.Pairs {
			gp := gcs.Pairs[j]
			switch {
			case wp.Delete != gp.Delete || !bytes.Equal(wp.Key, gp.Key):
				return fmt.Sprintf("v%d: pair %d/%d differs", want.Version, i, j)
			case gp.Delete && gp.Value != nil:
				return fmt.Sprintf("v%d: pair %d/%d is a delete with a non-nil value", want.Version, i, j)
			case !gp.Delete && gp.Value == nil:
				return fmt.Sprintf("v%d: pair %d/%d is a set with a nil value", want.Version, i, j)
			case !gp.Delete && !bytes.Equal(wp.Value, gp.Value):
				return fmt.Sprintf("v%d: pair %d/%d value differs", want.Version, i, j)
			}
		}
	}
	if fmt.Sprint(want.Upgrades) != fmt.Sprint(got.Upgrades) {
		return fmt.Sprintf("v%d: upgrades %+v, want %+v", want.Version, got.Upgrades, want.Upgrades)
	}
	return ""
}

// collect replays from..to and returns the entries.
func collect(l *Log, from, to int64) ([]Entry, error) {
	var out []Entry
	err := l.Replay(from, to, func(e Entry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// checkReplay replays the whole log and compares it with want[first-1:last].
// want[i] is the entry of version i+1.
func checkReplay(t testing.TB, l *Log, want []Entry) {
	t.Helper()
	first, last := l.FirstVersion(), l.LastVersion()
	if last == 0 {
		if first != 0 {
			t.Fatalf("empty log has FirstVersion %d", first)
		}
		return
	}
	got, err := collect(l, first, last)
	if err != nil {
		t.Fatalf("replay %d..%d: %v", first, last, err)
	}
	if int64(len(got)) != last-first+1 {
		t.Fatalf("replay %d..%d returned %d entries", first, last, len(got))
	}
	for i, e := range got {
		if d := entryDiff(want[first-1+int64(i)], e); d != "" {
			t.Fatalf("replay: %s", d)
		}
	}
}

// makeEntries returns n random entries of versions 1..n.
func makeEntries(rng *rand.Rand, n int, sh entryShape) []Entry {
	out := make([]Entry, n)
	for i := range out {
		out[i] = randEntry(rng, int64(i+1), sh)
	}
	return out
}

// entriesForSegments returns n random entries, and more if a log of the
// given segment size needs them to fill at least segs segments (appended in
// one session with mustAppendEach, as the tests must append them), so that
// a test that needs several segments has them whatever the seed.
func entriesForSegments(t testing.TB, rng *rand.Rand, n int, sh entryShape, size int64, segs int) []Entry {
	t.Helper()
	entries := makeEntries(rng, n, sh)
	for {
		fs := newMemFS()
		l := mustOpen(t, memDir, Options{fs: fs, SegmentSize: size})
		mustAppendEach(t, l, entries...)
		mustClose(t, l)
		got := len(fs.names(memDir))
		if got >= segs {
			return entries
		}
		if len(entries) >= 10*n+100 {
			t.Fatalf("%d entries fill only %d segments of %d bytes", len(entries), got, size)
		}
		entries = append(entries, randEntry(rng, int64(len(entries)+1), sh))
	}
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

// mustAppend appends es and waits for a segment the last Append started
// ahead of the next record (see startRollAheadLocked), so that the tests
// see one segment layout, not whichever the goroutine's timing gave.
func mustAppend(t testing.TB, l *Log, es ...Entry) {
	t.Helper()
	for _, e := range es {
		if err := l.Append(e); err != nil {
			t.Fatalf("append version %d: %v", e.Version, err)
		}
	}
	l.rollAhead.Wait()
}

// mustAppendEach appends es one at a time, each after the segment started
// ahead of it (if any) is ready, so that the segments a log of the same
// size ends with depend on the entries only.
func mustAppendEach(t testing.TB, l *Log, es ...Entry) {
	t.Helper()
	for _, e := range es {
		mustAppend(t, l, e)
	}
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// wantCorruption checks that err is a CorruptionError for file at offset.
func wantCorruption(t testing.TB, err error, file string, offset int64) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got error %v, want a corruption error of %s at offset %d", err, file, offset)
	}
	if ce.File != file || ce.Offset != offset {
		t.Fatalf("corruption reported in %s at offset %d, want %s at offset %d (%v)", ce.File, ce.Offset, file, offset, err)
	}
}

// segmentOf appends entries to a new log on a memory file system and
// returns its only segment's bytes and recordOffsets of them.
func segmentOf(t testing.TB, entries []Entry) ([]byte, []int64) {
	t.Helper()
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries...)
	mustClose(t, l)
	data := fs.get(memPath(1))
	return data, recordOffsets(t, data)
}

// entryOfRecordSize returns an entry of version v whose framed record
// (frame header and body) is exactly total bytes.
func entryOfRecordSize(t testing.TB, v int64, total int) Entry {
	t.Helper()
	for k := 1; k <= 4; k++ {
		for vl := max(0, total-40); vl <= total; vl++ {
			e := Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: bytes.Repeat([]byte{'k'}, k), Value: bytes.Repeat([]byte{0xAB}, vl)}}}}}
			if frameHeaderSize+EncodedSize(e) == total {
				return e
			}
		}
	}
	t.Fatalf("no entry of record size %d", total)
	return Entry{}
}

// sizedSegment builds the image of a segment starting at base whose records
// have the given framed sizes, and returns it with the record offsets and
// the entries.
func sizedSegment(t testing.TB, base int64, sizes []int) ([]byte, []int64, []Entry) {
	t.Helper()
	img := appendSegmentHeader(nil, base, flagStrictAppends)
	var offs []int64
	var es []Entry
	for i, s := range sizes {
		e := entryOfRecordSize(t, base+int64(i), s)
		offs = append(offs, int64(len(img)))
		var err error
		if img, err = appendRecord(img, &e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return img, offs, es
}

// openImage opens a log whose only segment (base) holds img.
func openImage(img []byte, base int64, o Options) (*Log, *memFS, error) {
	fs := newMemFS()
	fs.put(memPath(base), append([]byte(nil), img...))
	o.fs = fs
	l, err := Open(memDir, o)
	return l, fs, err
}

// appendsFlagOf returns the segment header flag a writer with o writes.
func appendsFlagOf(o Options) uint16 {
	return (&Log{opts: o}).appendsFlag()
}

// asWrittenBy returns a copy of the segment image img whose header carries
// the flags of a writer with o, as if that writer had appended its records.
func asWrittenBy(img []byte, o Options) []byte {
	img = bytes.Clone(img)
	binary.LittleEndian.PutUint16(img[4:6], FormatVersion)
	binary.LittleEndian.PutUint16(img[6:8], appendsFlagOf(o))
	binary.LittleEndian.PutUint32(img[16:20], crc32c(img[:16]))
	return img
}
