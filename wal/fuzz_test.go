package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// fuzzEntrySeeds are encodings the decoder fuzz target starts from.
func fuzzEntrySeeds() [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var seeds [][]byte
	add := func(e Entry) {
		b, err := AppendEntry(nil, e)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, b)
	}
	add(goldenEntry())
	add(Entry{Version: 1})
	add(Entry{Version: 2, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Delete: true}, {Key: []byte("e"), Value: []byte{}}}}}})
	for i := range 4 {
		add(randEntry(rng, int64(i+3), smallShape))
	}
	full, _ := AppendEntry(nil, goldenEntry())
	seeds = append(seeds, full[:len(full)/2], append([]byte(nil), 1, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 0, 0, 0))
	return seeds
}

// FuzzDecodeEntry: DecodeEntry never panics, and whatever it accepts
// re-encodes to exactly the same bytes (the encoding is canonical).
func FuzzDecodeEntry(f *testing.F) {
	for _, s := range fuzzEntrySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEntry(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		for _, cs := range e.ChangeSets {
			for _, p := range cs.Pairs {
				if p.Delete == (p.Value != nil) {
					t.Fatalf("pair %+v: deletes must have nil values, sets non-nil ones", p)
				}
			}
		}
		if EncodedSize(e) != len(data) {
			t.Fatalf("EncodedSize %d, input %d bytes", EncodedSize(e), len(data))
		}
		b, err := AppendEntry(nil, e)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs:\nin  %x\nout %x", data, b)
		}
	})
}

// fuzzSegmentSeeds are segment bodies (the bytes after the header of a
// segment whose first version is 1).
func fuzzSegmentSeeds() [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	fs := newMemFS()
	l, err := Open(memDir, Options{fs: fs})
	if err != nil {
		panic(err)
	}
	for v := int64(1); v <= 4; v++ {
		if err := l.Append(randEntry(rng, v, smallShape)); err != nil {
			panic(err)
		}
	}
	l.Close()
	body := fs.get(memPath(1))[segmentHeaderSize:]
	return [][]byte{
		body,
		body[:len(body)-3],
		append(append([]byte(nil), body...), make([]byte, 40)...),
		body[:frameHeaderSize+5],
		{},
	}
}

// FuzzOpenSegment: whatever follows a valid segment header (of each kind
// of appends), Open and Replay
// never panic; they either fail with ErrCorrupt or serve consecutive
// versions, read-only and writable Open agree, and a repaired log takes the
// next version.
func FuzzOpenSegment(f *testing.F) {
	for _, s := range fuzzSegmentSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// the header of each kind of appends: format version 1 (not
		// recorded), synchronous under SyncEveryCommit, and relaxed
		for _, flags := range []uint16{0, flagStrictAppends, flagRelaxedAppends} {
			fuzzOpenSegment(t, append(appendSegmentHeader(nil, 1, flags), data...))
		}
	})
}

// fuzzOpenSegment checks FuzzOpenSegment's promises for one segment image.
func fuzzOpenSegment(t *testing.T, img []byte) {
	fs := newMemFS()
	fs.put(memPath(1), img)
	ro, err := Open(memDir, Options{fs: fs, ReadOnly: true})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only open: error does not wrap ErrCorrupt: %v", err)
		}
		if _, err := Open(memDir, Options{fs: fs}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("writable open after failed read-only open: %v", err)
		}
		return
	}
	last := ro.LastVersion()
	if last > 0 {
		next := int64(1)
		err := ro.Replay(1, last, func(e Entry) error {
			if e.Version != next {
				t.Fatalf("replay: version %d, want %d", e.Version, next)
			}
			next++
			return nil
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("replay: %v", err)
		}
	}
	ro.Close()
	if !bytes.Equal(fs.get(memPath(1)), img) {
		t.Fatal("read-only open modified the segment")
	}
	l, err := Open(memDir, Options{fs: fs})
	if err != nil {
		t.Fatalf("writable open failed where read-only succeeded: %v", err)
	}
	if l.LastVersion() != last {
		t.Fatalf("writable LastVersion %d, read-only %d", l.LastVersion(), last)
	}
	if err := l.Append(Entry{Version: last + 1}); err != nil {
		t.Fatalf("append after repair: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(memDir, Options{fs: fs})
	if err != nil || l.LastVersion() != last+1 {
		t.Fatalf("reopen after repair and append: %v, LastVersion %d", err, l.LastVersion())
	}
	l.Close()
}

// TestWriteFuzzCorpus writes the seed corpora under testdata/fuzz with
// -update. They are checked in so that plain `go test` runs them.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the fuzz seed corpora")
	}
	for name, seeds := range map[string][][]byte{
		"FuzzDecodeEntry": fuzzEntrySeeds(),
		"FuzzOpenSegment": fuzzSegmentSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
