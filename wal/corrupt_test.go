package wal

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// TestCorruptEveryByte changes every byte of every segment of a small log,
// one at a time, and checks that the change is always detected:
//   - in a segment header: Open fails, naming the file and offset 0;
//   - in the last record of the log: Open treats it as a torn tail and cuts
//     it off, and every other entry reads back intact;
//   - in any other record: Open (for a frame header in the newest segment)
//     or else Replay over the record fails, naming the file and the
//     record's offset, and Replay of later segments works.
//
// Nothing panics and no entry ever reads back different from what was
// appended.
func TestCorruptEveryByte(t *testing.T) {
	rng := newRand(t)
	const size = 300
	entries := entriesForSegments(t, rng, 12, smallShape, size, 3)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, SegmentSize: size})
	mustAppendEach(t, l, entries...)
	mustClose(t, l)

	names := fs.names(memDir)
	if len(names) < 3 {
		t.Fatalf("want at least 3 segments, got %v", names)
	}
	images := map[string][]byte{}
	for _, name := range names {
		images[memDir+"/"+name] = fs.get(memDir + "/" + name)
	}
	lastPath := memDir + "/" + names[len(names)-1]
	lastBase, _ := parseSegmentName(names[len(names)-1])

	masks := []byte{0}
	if !testing.Short() {
		masks = append(masks, 0x01, 0x80, 0xff)
	}
	checked := 0
	for _, name := range names {
		path := memDir + "/" + name
		img := images[path]
		offs := recordOffsets(t, img)
		for b := range img {
			// k: index of the record holding byte b, -1 for the header.
			k := -1
			for i := 0; i+1 < len(offs); i++ {
				if int64(b) >= offs[i] && int64(b) < offs[i+1] {
					k = i
				}
			}
			for _, mask := range masks {
				if mask == 0 {
					mask = byte(1 + rng.IntN(255))
				}
				checkCorruption(t, images, path, lastPath, lastBase, img, offs, b, k, mask, entries)
				checked++
			}
		}
	}
	t.Logf("checked %d single-byte changes in %d segments", checked, len(names))
}

func checkCorruption(t *testing.T, images map[string][]byte, path, lastPath string, lastBase int64,
	img []byte, offs []int64, b, k int, mask byte, entries []Entry) {
	t.Helper()
	n := int64(len(entries))
	mutated := slices.Clone(img)
	mutated[b] ^= mask
	fs := newMemFS()
	for p, data := range images {
		fs.put(p, data)
	}
	fs.put(path, mutated)
	where := func() string { return fmt.Sprintf("%s byte %d ^ %#02x", path, b, mask) }

	isLast := path == lastPath
	lastRecord := isLast && k == len(offs)-2

	for _, ro := range []bool{true, false} {
		l, err := Open(memDir, Options{fs: fs, ReadOnly: ro})
		switch {
		case k < 0:
			wantCorruptionAt(t, where(), err, path, 0)
			continue
		case err != nil && isLast && !lastRecord:
			// Open reads the newest segment's frame headers, so it finds
			// damage there; damage in a body is left to Replay.
			wantCorruptionAt(t, where(), err, path, offs[k])
			continue
		case err != nil:
			t.Fatalf("%s (read-only %v): open: %v", where(), ro, err)
		}
		if lastRecord {
			if l.LastVersion() != n-1 {
				t.Fatalf("%s: corrupted last record: LastVersion %d, want %d", where(), l.LastVersion(), n-1)
			}
			// reported, whether cut off (writable) or ignored
			if tt, ok := l.TornTail(); !ok || tt.Path != path || tt.Offset != offs[k] || tt.Bytes != int64(len(mutated))-offs[k] {
				t.Fatalf("%s: TornTail %+v, %v; want %s offset %d", where(), tt, ok, path, offs[k])
			}
			checkReplay(t, l, entries)
		} else {
			// Replay must fail on the damaged record and serve the
			// segments after it.
			if l.LastVersion() != n {
				t.Fatalf("%s: LastVersion %d", where(), l.LastVersion())
			}
			_, err := collect(l, 1, n)
			wantCorruptionAt(t, where(), err, path, offs[k])
			if err := l.Verify(); err == nil {
				t.Fatalf("%s: Verify found nothing", where())
			}
			if !isLast {
				if got, err := collect(l, lastBase, n); err != nil || int64(len(got)) != n-lastBase+1 {
					t.Fatalf("%s: replay of the newest segment: %d entries, %v", where(), len(got), err)
				}
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if ro {
			if got := fs.get(path); !bytes.Equal(got, mutated) {
				t.Fatalf("%s: read-only open modified the file", where())
			}
		} else if lastRecord {
			if offs[k] == segmentHeaderSize {
				if fs.get(path) != nil {
					t.Fatalf("%s: segment left without records was not removed", where())
				}
			} else if got := fs.get(path); !bytes.Equal(got, img[:offs[k]]) {
				t.Fatalf("%s: torn last record not cut off: %d bytes, want %d", where(), len(got), offs[k])
			}
		}
	}
}

func wantCorruptionAt(t *testing.T, where string, err error, file string, offset int64) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want corruption at %s offset %d", where, file, offset)
	}
	wantCorruption(t, err, file, offset)
}

func TestVerify(t *testing.T) {
	rng := newRand(t)
	entries := entriesForSegments(t, rng, 40, smallShape, 512, 3)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, SegmentSize: 512})
	if err := l.Verify(); err != nil {
		t.Fatalf("empty log: %v", err)
	}
	mustAppendEach(t, l, entries...)
	if err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)

	// Damage the second record of the first segment (its only one if a
	// large first record has the segment to itself).
	img := fs.get(memPath(1))
	offs := recordOffsets(t, img) // the records' offsets, then the end
	j := 1
	if len(offs) < 3 {
		j = 0
	}
	img[offs[j]+frameHeaderSize+2] ^= 0x40
	fs.put(memPath(1), img)
	l = mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
	defer l.Close()
	wantCorruption(t, l.Verify(), memPath(1), offs[j])

	// A missing middle segment is a gap in the versions, reported at the
	// end of the segment before it.
	fs = newMemFS()
	l2 := mustOpen(t, memDir, Options{fs: fs, SegmentSize: 512})
	mustAppendEach(t, l2, entries...)
	mustClose(t, l2)
	names := fs.names(memDir)
	if len(names) < 3 {
		t.Fatalf("segments: %v", names)
	}
	if err := fs.Remove(memDir + "/" + names[1]); err != nil {
		t.Fatal(err)
	}
	l2 = mustOpen(t, memDir, Options{fs: fs})
	defer l2.Close()
	wantCorruption(t, l2.Verify(), memDir+"/"+names[0], int64(len(fs.get(memDir+"/"+names[0]))))
}
