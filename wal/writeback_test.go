package wal

import (
	"fmt"
	"sync"
	"testing"
)

// wbFS records the writebacks the log starts on its files.
type wbFS struct {
	fileSystem
	mu    sync.Mutex
	calls []wbCall
	files []*wbFile
}

type wbCall struct {
	file    *wbFile
	off, n  int64
	written int64 // the file's size when the writeback started
}

type wbFile struct {
	file
	fs    *wbFS
	start int64 // where the log starts writing: after the header, or the end of a reopened file
	size  int64 // at close
}

func (f *wbFile) startWriteback(off, n int64) {
	size, _ := f.Size()
	f.fs.mu.Lock()
	f.fs.calls = append(f.fs.calls, wbCall{f, off, n, size})
	f.fs.mu.Unlock()
}

func (f *wbFile) Close() error {
	f.size, _ = f.Size()
	return f.file.Close()
}

func (w *wbFS) Create(path string) (file, error) {
	f, err := w.fileSystem.Create(path)
	if err != nil {
		return nil, err
	}
	return w.track(f, segmentHeaderSize), nil
}

func (w *wbFS) OpenFile(path string, readOnly bool) (file, error) {
	f, err := w.fileSystem.OpenFile(path, readOnly)
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	return w.track(f, size), nil
}

// track wraps f, where the log starts writing at start, and records it.
func (w *wbFS) track(f file, start int64) *wbFile {
	wf := &wbFile{file: f, fs: w, start: start}
	w.mu.Lock()
	w.files = append(w.files, wf)
	w.mu.Unlock()
	return wf
}

// TestWriteback: every writebackChunk bytes written to a segment start the
// writeback of those bytes, the ranges of a segment following each other
// from its header on, including in a segment reopened for appending.
func TestWriteback(t *testing.T) {
	for _, async := range []int{0, 4} {
		t.Run(fmt.Sprintf("async=%d", async), func(t *testing.T) {
			fs := &wbFS{fileSystem: newMemFS()}
			opts := Options{fs: fs, Sync: SyncNone, AsyncBuffer: async, SegmentSize: 3 * writebackChunk}
			l := mustOpen(t, memDir, opts)
			value := make([]byte, 1<<20)
			entry := func(v int64) Entry {
				return Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: value}}}}}
			}
			v := int64(1)
			for ; v <= 40; v++ { // about 40 MiB: two segments and a part
				mustAppend(t, l, entry(v))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, memDir, opts) // appends to the last segment
			for ; v <= 60; v++ {
				mustAppend(t, l, entry(v))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			// per file, ranges of at least writebackChunk bytes, each up
			// to what was written when it started, one after the other
			// from where the log started writing; what is left at close
			// is less than a chunk plus one coalesced write
			next := map[*wbFile]int64{}
			for _, c := range fs.calls {
				want, ok := next[c.file]
				if !ok {
					want = c.file.start
				}
				if c.off != want || c.n < writebackChunk || c.off+c.n != c.written {
					t.Fatalf("writeback of [%d, +%d) with %d bytes written, want it from %d", c.off, c.n, c.written, want)
				}
				next[c.file] = c.off + c.n
			}
			for _, f := range fs.files {
				end, ok := next[f]
				if !ok {
					end = f.start
				}
				if f.size > 0 && f.size-end >= writebackChunk+maxCoalesce+(1<<20) {
					t.Fatalf("a file closed at %d bytes had writeback started up to %d only", f.size, end)
				}
			}
			if len(fs.calls) < 4 {
				t.Fatalf("%d writebacks for 60 MiB", len(fs.calls))
			}
		})
	}
}
