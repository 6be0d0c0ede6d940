package wal

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// FuzzOlderSegmentKept: a log of two segments, the older one valid and
// complete (versions 1..4, fsynced before the newer one was made), the
// newer one a header of each kind of appends with base 5 (or the base the
// input picks) followed by arbitrary bytes. Whatever the newer segment
// holds, no open may lose or change the older segment's versions: it
// fails with ErrCorrupt, or serves at least versions 1..4 exactly as
// appended, and the writable and read-only opens agree.
func FuzzOlderSegmentKept(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	entries := makeEntries(rng, 8, smallShape)
	older := appendSegmentHeader(nil, 1, flagRelaxedAppends)
	for _, e := range entries[:4] {
		var err error
		if older, err = appendRecord(older, &e); err != nil {
			f.Fatal(err)
		}
	}
	var tail []byte
	for _, e := range entries[4:] {
		var err error
		if tail, err = appendRecord(tail, &e); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(uint8(0), tail)
	f.Add(uint8(0), tail[:len(tail)-3])
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), tail[:frameHeaderSize+3])
	f.Add(uint8(2), append(make([]byte, 40), tail...))
	f.Fuzz(func(t *testing.T, base uint8, data []byte) {
		b := int64(5)
		if base%4 != 0 {
			b = int64(base % 8) // 1..7: overlapping or gapped
			if b == 0 {
				b = 5
			}
		}
		for _, flags := range []uint16{0, flagStrictAppends, flagRelaxedAppends} {
			fs := newMemFS()
			fs.put(memPath(1), older)
			img := append(appendSegmentHeader(nil, b, flags), data...)
			if b != 1 {
				fs.put(memPath(b), img)
			}
			var lasts [2]int64
			var errs [2]error
			for i, ro := range []bool{true, false} {
				l, err := Open(memDir, Options{fs: fs, ReadOnly: ro})
				errs[i] = err
				if err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("flags %d base %d read-only %v: error does not wrap ErrCorrupt: %v", flags, b, ro, err)
					}
					continue
				}
				lasts[i] = l.LastVersion()
				if l.FirstVersion() != 1 || l.LastVersion() < 4 {
					t.Fatalf("flags %d base %d read-only %v: serves versions %d..%d, the older segment holds 1..4", flags, b, ro, l.FirstVersion(), l.LastVersion())
				}
				got, err := collect(l, 1, 4)
				if err != nil || len(got) != 4 {
					t.Fatalf("flags %d base %d read-only %v: replay of the older segment: %d entries, %v", flags, b, ro, len(got), err)
				}
				for j, e := range got {
					if d := entryDiff(entries[j], e); d != "" {
						t.Fatalf("flags %d base %d read-only %v: %s", flags, b, ro, d)
					}
				}
				if _, err := collect(l, 1, l.LastVersion()); err != nil && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("replay: %v", err)
				}
				l.Close()
			}
			if (errs[0] == nil) != (errs[1] == nil) || (errs[0] == nil && lasts[0] != lasts[1]) {
				t.Fatalf("flags %d base %d: read-only open %d %v, writable %d %v", flags, b, lasts[0], errs[0], lasts[1], errs[1])
			}
		}
	})
}
