package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestAppendReplayReopen(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 200, smallShape)
	dir := filepath.Join(t.TempDir(), "wal")
	l := mustOpen(t, dir, Options{Sync: SyncNone})
	if l.FirstVersion() != 0 || l.LastVersion() != 0 {
		t.Fatalf("empty log: %d..%d", l.FirstVersion(), l.LastVersion())
	}
	mustAppend(t, l, entries...)
	if l.FirstVersion() != 1 || l.LastVersion() != 200 {
		t.Fatalf("after appends: %d..%d", l.FirstVersion(), l.LastVersion())
	}
	checkReplay(t, l, entries)
	for range 50 {
		from := 1 + rng.Int64N(200)
		to := from + rng.Int64N(201-from)
		got, err := collect(l, from, to)
		if err != nil || int64(len(got)) != to-from+1 {
			t.Fatalf("replay %d..%d: %d entries, %v", from, to, len(got), err)
		}
		for i, e := range got {
			if d := entryDiff(entries[from-1+int64(i)], e); d != "" {
				t.Fatal(d)
			}
		}
	}
	mustClose(t, l)

	l = mustOpen(t, dir, Options{})
	defer l.Close()
	if l.FirstVersion() != 1 || l.LastVersion() != 200 {
		t.Fatalf("after reopen: %d..%d", l.FirstVersion(), l.LastVersion())
	}
	checkReplay(t, l, entries)
}

func TestReplayErrors(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 10, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	if _, err := collect(l, 1, 1); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("replay of an empty log: %v", err)
	}
	mustAppend(t, l, entries...)
	for _, r := range [][2]int64{{0, 5}, {5, 11}, {11, 11}, {-3, -1}} {
		if _, err := collect(l, r[0], r[1]); !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("replay %d..%d: %v, want ErrVersionNotFound", r[0], r[1], err)
		}
	}
	if got, err := collect(l, 6, 5); err != nil || len(got) != 0 {
		t.Fatalf("empty range: %d entries, %v", len(got), err)
	}
	stop := errors.New("stop")
	calls := 0
	err := l.Replay(1, 10, func(Entry) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Fatalf("callback error: %v after %d calls", err, calls)
	}
	mustClose(t, l)
	if _, err := collect(l, 1, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("replay after close: %v", err)
	}
	for name, err := range map[string]error{
		"append":         l.Append(entries[0]),
		"flush":          l.Flush(),
		"close":          l.Close(),
		"truncate front": l.TruncateFront(1),
		"truncate back":  l.TruncateBack(1),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after close: %v", name, err)
		}
	}
}

func TestVersionContinuity(t *testing.T) {
	for _, async := range []int{0, 4} {
		fs := newMemFS()
		opts := Options{fs: fs, AsyncBuffer: async}
		l := mustOpen(t, memDir, opts)
		e := func(v int64) Entry { return Entry{Version: v} }
		if err := l.Append(e(0)); !errors.Is(err, ErrInvalidEntry) {
			t.Fatalf("version 0: %v", err)
		}
		if err := l.Append(e(-1)); !errors.Is(err, ErrInvalidEntry) {
			t.Fatalf("version -1: %v", err)
		}
		mustAppend(t, l, e(5)) // an empty log takes any first version
		for _, v := range []int64{5, 4, 7, 1} {
			if err := l.Append(e(v)); !errors.Is(err, ErrVersionNotNext) {
				t.Fatalf("async %d: append %d after 5: %v", async, v, err)
			}
		}
		mustAppend(t, l, e(6))
		if l.FirstVersion() != 5 || l.LastVersion() != 6 {
			t.Fatalf("range %d..%d", l.FirstVersion(), l.LastVersion())
		}
		mustClose(t, l)

		l = mustOpen(t, memDir, opts)
		if err := l.Append(e(8)); !errors.Is(err, ErrVersionNotNext) {
			t.Fatalf("append 8 after reopen at 6: %v", err)
		}
		mustAppend(t, l, e(7))
		got, err := collect(l, 5, 7)
		if err != nil || len(got) != 3 || got[0].Version != 5 || got[2].Version != 7 {
			t.Fatalf("replay: %v, %v", got, err)
		}
		mustClose(t, l)
	}
}

func TestSegmentRollover(t *testing.T) {
	rng := newRand(t)
	sh := entryShape{stores: 2, pairs: 4, keyLen: 16, valueLen: 64}
	entries := makeEntries(rng, 300, sh)
	// One entry far larger than a segment gets a segment of its own.
	big := randEntry(rng, 150, entryShape{stores: 1, pairs: 1, keyLen: 8, valueLen: 1})
	big.ChangeSets = []ChangeSet{{Name: "big", Pairs: []KVPair{{Key: []byte("k"), Value: make([]byte, 5000)}}}}
	entries[149] = big

	const segSize = 1024
	dir := filepath.Join(t.TempDir(), "wal")
	l := mustOpen(t, dir, Options{SegmentSize: segSize, Sync: SyncNone})
	mustAppend(t, l, entries...)
	checkReplay(t, l, entries)
	mustClose(t, l)

	files := segmentFiles(t, dir)
	if len(files) < 10 {
		t.Fatalf("only %d segments", len(files))
	}
	next := int64(1)
	for _, name := range files {
		base, _ := parseSegmentName(name)
		if base != next {
			t.Fatalf("segment %s: want first version %d", name, next)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		recs := len(recordOffsets(t, data)) - 1
		if recs == 0 {
			t.Fatalf("segment %s holds no record", name)
		}
		if len(data) > segSize && recs != 1 {
			t.Fatalf("segment %s is %d bytes with %d records", name, len(data), recs)
		}
		if base == 150 && recs != 1 {
			t.Fatalf("the large entry shares segment %s", name)
		}
		next += int64(recs)
	}
	if next != 301 {
		t.Fatalf("segments hold versions up to %d", next-1)
	}
	l = mustOpen(t, dir, Options{SegmentSize: segSize, ReadOnly: true})
	checkReplay(t, l, entries)
	mustClose(t, l)
}

func TestTruncateFront(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 100, smallShape)
	fs := newMemFS()
	opts := Options{fs: fs, SegmentSize: 512}
	l := mustOpen(t, memDir, opts)
	mustAppend(t, l, entries...)
	segs := l.mu.segments
	if len(segs) < 5 {
		t.Fatalf("only %d segments", len(segs))
	}
	bases := make([]int64, len(segs))
	for i, s := range segs {
		bases[i] = s.base
	}

	// Inside the third segment, or the first after it holding two records
	// or more (a large record can have one to itself): the segments before
	// it go, it stays.
	k := 2
	for ; k < len(bases); k++ {
		end := int64(101)
		if k+1 < len(bases) {
			end = bases[k+1]
		}
		if end-bases[k] >= 2 {
			break
		}
	}
	if k == len(bases) {
		t.Fatalf("no segment after the second holds two records: bases %v", bases)
	}
	v := bases[k] + 1
	if err := l.TruncateFront(v); err != nil {
		t.Fatal(err)
	}
	if l.FirstVersion() != bases[k] || l.LastVersion() != 100 {
		t.Fatalf("after TruncateFront(%d): %d..%d, want %d..100", v, l.FirstVersion(), l.LastVersion(), bases[k])
	}
	if _, err := collect(l, bases[k]-1, 100); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("replay of a dropped version: %v", err)
	}
	checkReplay(t, l, entries)
	if names := fs.names(memDir); len(names) != len(bases)-k || names[0] != segmentName(bases[k]) {
		t.Fatalf("files: %v", names)
	}
	// Older than what is left: no-op.
	if err := l.TruncateFront(1); err != nil || l.FirstVersion() != bases[k] {
		t.Fatalf("no-op TruncateFront: %v, first %d", err, l.FirstVersion())
	}
	// Past the end: everything but the segment holding the last entry
	// goes (the newest, unless the last Append started the next one ahead
	// of its record)
	lastBase := bases[len(bases)-1]
	if lastBase > 100 {
		lastBase = bases[len(bases)-2]
	}
	if err := l.TruncateFront(1000); err != nil {
		t.Fatal(err)
	}
	if l.FirstVersion() != lastBase || l.LastVersion() != 100 {
		t.Fatalf("after TruncateFront(1000): %d..%d, want %d..100", l.FirstVersion(), l.LastVersion(), lastBase)
	}
	checkReplay(t, l, entries)
	more := randEntry(rng, 101, smallShape)
	mustAppend(t, l, more)
	mustClose(t, l)

	l = mustOpen(t, memDir, opts)
	defer l.Close()
	if l.FirstVersion() != lastBase || l.LastVersion() != 101 {
		t.Fatalf("after reopen: %d..%d", l.FirstVersion(), l.LastVersion())
	}
	checkReplay(t, l, append(entries, more))
}

// TestRollAt: the record RollAt names starts a segment, so that
// TruncateFront at that version leaves no older entry; synchronous and
// asynchronous appends, a version skipped by a gap-free log's batch, and
// requests that need no roll.
func TestRollAt(t *testing.T) {
	for _, async := range []int{0, 8} {
		t.Run(fmt.Sprintf("async=%d", async), func(t *testing.T) {
			rng := newRand(t)
			entries := makeEntries(rng, 60, smallShape)
			fs := newMemFS()
			opts := Options{fs: fs, AsyncBuffer: async}
			l := mustOpen(t, memDir, opts)
			l.RollAt(1) // the first record starts the first segment anyway
			mustAppend(t, l, entries[:20]...)
			l.RollAt(21)
			mustAppend(t, l, entries[20:40]...)
			// written (with async, still queued otherwise): the request
			// below then applies to version 41, which the next replaces
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			l.RollAt(35) // before the next record: replaced by the next request
			l.RollAt(45)
			mustAppend(t, l, entries[40:]...)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if names := fs.names(memDir); !slices.Equal(names, []string{segmentName(1), segmentName(21), segmentName(45)}) {
				t.Fatalf("segments %v, want bases 1, 21, 45", names)
			}
			if err := l.TruncateFront(21); err != nil {
				t.Fatal(err)
			}
			if l.FirstVersion() != 21 || l.LastVersion() != 60 {
				t.Fatalf("after TruncateFront(21): %d..%d, want 21..60", l.FirstVersion(), l.LastVersion())
			}
			checkReplay(t, l, entries)
			mustClose(t, l)
			l = mustOpen(t, memDir, opts)
			defer l.Close()
			checkReplay(t, l, entries)
		})
	}
}

func TestTruncateBack(t *testing.T) {
	for _, async := range []int{0, 8} {
		rng := newRand(t)
		entries := makeEntries(rng, 100, smallShape)
		fs := newMemFS()
		opts := Options{fs: fs, SegmentSize: 512, AsyncBuffer: async}
		l := mustOpen(t, memDir, opts)
		mustAppend(t, l, entries...)
		// the background writer rolls segments: wait for it, then read
		// the segment list under its lock
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		var bases []int64
		l.mu.Lock()
		for _, s := range l.mu.segments {
			bases = append(bases, s.base)
		}
		l.mu.Unlock()
		if len(bases) < 5 {
			t.Fatalf("only %d segments", len(bases))
		}
		if err := l.TruncateBack(101); !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("TruncateBack past the end: %v", err)
		}
		if err := l.TruncateBack(100); err != nil || l.LastVersion() != 100 {
			t.Fatalf("no-op TruncateBack: %v, last %d", err, l.LastVersion())
		}

		// Each step: roll back, check, append different entries, reopen.
		steps := []int64{
			98,                      // inside the newest segment, or at its start
			bases[len(bases)-2] - 1, // the end of a segment: the ones after it go
			bases[1] + 2,            // inside an older segment
			0,                       // everything
		}
		for _, v := range steps {
			if err := l.TruncateBack(v); err != nil {
				t.Fatalf("TruncateBack(%d): %v", v, err)
			}
			if l.LastVersion() != v {
				t.Fatalf("TruncateBack(%d): LastVersion %d", v, l.LastVersion())
			}
			if err := l.Append(Entry{Version: v + 2}); !errors.Is(err, ErrVersionNotNext) {
				t.Fatalf("after TruncateBack(%d), append %d: %v", v, v+2, err)
			}
			checkReplay(t, l, entries)
			// New history from v+1 on.
			entries = entries[:v]
			for i := v; i < v+3; i++ {
				entries = append(entries, randEntry(rng, i+1, smallShape))
				mustAppend(t, l, entries[i])
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			checkReplay(t, l, entries)
			mustClose(t, l)
			l = mustOpen(t, memDir, opts)
			if l.LastVersion() != v+3 {
				t.Fatalf("reopen after TruncateBack(%d): LastVersion %d", v, l.LastVersion())
			}
			checkReplay(t, l, entries)
		}
		mustClose(t, l)
	}
}

func TestReadOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if _, err := Open(dir, Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing directory succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open created the directory: %v", err)
	}
	rng := newRand(t)
	entries := makeEntries(rng, 20, smallShape)

	w := mustOpen(t, dir, Options{}) // SyncEveryCommit, synchronous
	defer w.Close()
	for i, e := range entries {
		mustAppend(t, w, e)
		// What Append returned is on disk: another Log sees it.
		r := mustOpen(t, dir, Options{ReadOnly: true})
		if r.LastVersion() != int64(i+1) {
			t.Fatalf("read-only LastVersion %d after appending %d", r.LastVersion(), i+1)
		}
		got, err := collect(r, int64(i+1), int64(i+1))
		if err != nil || entryDiff(e, got[0]) != "" {
			t.Fatalf("read-only replay of %d: %v", i+1, err)
		}
		for name, err := range map[string]error{
			"append":         r.Append(Entry{Version: int64(i + 2)}),
			"truncate front": r.TruncateFront(1),
			"truncate back":  r.TruncateBack(1),
		} {
			if !errors.Is(err, ErrReadOnly) {
				t.Fatalf("read-only %s: %v", name, err)
			}
		}
		mustClose(t, r)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{SegmentSize: -1},
		{SegmentSize: segmentHeaderSize},
		{Sync: SyncPolicy(7)},
		{GroupInterval: -1},
		{GroupCount: -1},
		{AsyncBuffer: -1},
		{AsyncBuffer: MaxAsyncBuffer + 1},
		{AsyncBuffer: 1 << 50}, // no queue of that length can be made
	} {
		dir := filepath.Join(t.TempDir(), "log")
		if _, err := Open(dir, o); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("%+v: %v", o, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%+v: a refused open left %s behind (%v)", o, dir, err)
		}
	}
	l, err := Open(t.TempDir(), Options{AsyncBuffer: MaxAsyncBuffer})
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	if got := SyncGrouped.String(); got != "grouped" {
		t.Fatalf("String: %q", got)
	}
}

// TestAppendBufferRetention checks the documented contract: a synchronous
// Append retains nothing of the entry; an asynchronous one retains its slices
// only until the entry is written (Flush), never after.
func TestAppendBufferRetention(t *testing.T) {
	for _, async := range []int{0, 4} {
		fs := newMemFS()
		l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: async})
		key, val := []byte("key"), []byte("value")
		e := Entry{Version: 1, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: key, Value: val}}}}}
		mustAppend(t, l, e)
		if async > 0 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		copy(key, "XXX")
		copy(val, "XXXXX")
		got, err := collect(l, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		p := got[0].ChangeSets[0].Pairs[0]
		if string(p.Key) != "key" || string(p.Value) != "value" {
			t.Fatalf("async %d: the log kept the caller's buffers: %q=%q", async, p.Key, p.Value)
		}
		mustClose(t, l)
	}
}

// TestAsyncBurstNotKept checks that the memory an asynchronous log keeps
// after a burst of large entries is bounded by one reused buffer, however
// many entries the queue held: the writer takes the queued entries as one
// batch while it writes and fsyncs the first.
func TestAsyncBurstNotKept(t *testing.T) {
	const valueSize, n = 4 << 20, 20
	l := mustOpen(t, t.TempDir(), Options{AsyncBuffer: 16, Sync: SyncEveryCommit})
	defer mustClose(t, l)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for v := int64(1); v <= n; v++ {
		value := make([]byte, valueSize)
		value[0] = byte(v)
		mustAppend(t, l, Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: value}}}}})
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	after := heap()
	if after > before && after-before > maxKeptBuffer+maxCoalesce+(2<<20) {
		t.Fatalf("the log keeps %d MiB after %d entries of %d MiB were written; at most one buffer of %d MiB may stay",
			(after-before)>>20, n, valueSize>>20, maxKeptBuffer>>20)
	}
	got, err := collect(l, n, n)
	if err != nil {
		t.Fatal(err)
	}
	if v := got[0].ChangeSets[0].Pairs[0].Value; len(v) != valueSize || v[0] != n {
		t.Fatalf("version %d replays a value of %d bytes starting %d", n, len(v), v[0])
	}
}

func TestUnrelatedFilesIgnored(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"LOCK", "notes.txt", "1.wal", "00000000000000000000.wal"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := mustOpen(t, dir, Options{})
	mustAppend(t, l, Entry{Version: 3})
	mustClose(t, l)
	files := segmentFiles(t, dir)
	if len(files) != 1 || !strings.HasPrefix(files[0], "00000000000000000003") {
		t.Fatalf("segments: %v", files)
	}
}

func TestReset(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentSize: 200})
	for v := int64(1); v <= 10; v++ {
		mustAppend(t, l, Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: make([]byte, 50)}}}}})
	}
	if err := l.Reset(0); err == nil {
		t.Fatal("Reset(0) accepted")
	}
	if err := l.Reset(21); err != nil {
		t.Fatal(err)
	}
	if l.FirstVersion() != 0 || l.LastVersion() != 0 {
		t.Fatalf("after Reset: %d..%d", l.FirstVersion(), l.LastVersion())
	}
	if err := l.Append(Entry{Version: 11}); err == nil {
		t.Fatal("append of a version other than the reset one accepted")
	}
	mustAppend(t, l, Entry{Version: 21})
	mustAppend(t, l, Entry{Version: 22})
	mustClose(t, l)
	l = mustOpen(t, dir, Options{})
	defer mustClose(t, l)
	if l.FirstVersion() != 21 || l.LastVersion() != 22 {
		t.Fatalf("after reopen: %d..%d", l.FirstVersion(), l.LastVersion())
	}
}

// TestRollAhead: RollAt of the version after the last written one starts
// the new segment before its record comes, and the record goes into it.
// A segment started ahead and still empty does not count as the newest for
// TruncateFront, goes with a TruncateBack, and is removed by Close (a crash
// may leave it: the next writable Open drops it); a roll that fails fails
// the next Append.
func TestRollAhead(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 14, smallShape)
	fs := newMemFS()
	opts := Options{fs: fs}
	segs := func(want ...int64) {
		t.Helper()
		var names []string
		for _, b := range want {
			names = append(names, segmentName(b))
		}
		if got := fs.names(memDir); !slices.Equal(got, names) {
			t.Fatalf("segments %v, want %v", got, names)
		}
	}
	l := mustOpen(t, memDir, opts)
	mustAppend(t, l, entries[:5]...)
	l.RollAt(6)
	l.rollAhead.Wait()
	segs(1, 6) // before the record of 6
	if err := l.TruncateFront(6); err != nil {
		t.Fatal(err)
	}
	segs(1, 6) // 5 is in the first one, and the second holds nothing yet
	if l.FirstVersion() != 1 || l.LastVersion() != 5 {
		t.Fatalf("after TruncateFront(6): %d..%d, want 1..5", l.FirstVersion(), l.LastVersion())
	}
	mustClose(t, l)
	segs(1) // Close removes the empty segment

	l = mustOpen(t, memDir, opts)
	l.RollAt(6)
	l.rollAhead.Wait()
	segs(1, 6)
	mustAppend(t, l, entries[5:8]...)
	segs(1, 6)
	checkReplay(t, l, entries[:8])
	l.RollAt(9)
	l.rollAhead.Wait()
	segs(1, 6, 9)
	if err := l.TruncateBack(7); err != nil {
		t.Fatal(err)
	}
	segs(1, 6)
	mustAppend(t, l, entries[7:10]...) // the request for 9 stands
	segs(1, 6, 9)
	checkReplay(t, l, entries[:10])
	l.RollAt(11)
	l.rollAhead.Wait()
	segs(1, 6, 9, 11)
	crashed := fs.clone() // a process crash with the empty segment in place
	mustClose(t, l)
	l = mustOpen(t, memDir, Options{fs: crashed})
	if got := crashed.names(memDir); !slices.Equal(got, []string{segmentName(1), segmentName(6), segmentName(9)}) {
		t.Fatalf("segments after a reopen: %v, want the empty one dropped", got)
	}
	checkReplay(t, l, entries[:10])
	mustClose(t, l)

	l = mustOpen(t, memDir, opts)
	boom := errors.New("create failed")
	fs.setHook(func(op, path string) error {
		if op == "create" {
			return boom
		}
		return nil
	})
	l.RollAt(11)
	l.rollAhead.Wait()
	if err := l.Append(entries[10]); !errors.Is(err, boom) {
		t.Fatalf("Append after a failed roll: %v", err)
	}
	fs.setHook(nil)
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close after a failed roll: %v", err)
	}
	l = mustOpen(t, memDir, opts)
	defer l.Close()
	mustAppend(t, l, entries[10:]...)
	checkReplay(t, l, entries)
}

// TestEmptyNewestSegmentAfterLostRecords: a segment started ahead is
// created only once the one before it is fsynced up to the record before
// its base. When that one ends earlier, records it held were lost after
// they were durable: Open reports the damage, read-only or not, instead
// of dropping the empty segment and ending the log early, and a writable
// Open leaves the empty segment in place for the next one to see.
func TestEmptyNewestSegmentAfterLostRecords(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 12, smallShape)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, l, entries[:5]...)
	l.RollAt(6)
	l.rollAhead.Wait()
	mustAppend(t, l, entries[5:9]...)
	l.RollAt(10)
	l.rollAhead.Wait()
	crashed := fs.clone() // a crash with the empty segment of 10 in place
	mustClose(t, l)
	want := []string{segmentName(1), segmentName(6), segmentName(10)}
	if got := crashed.names(memDir); !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}

	data := crashed.get(memPath(6))
	f, err := crashed.OpenFile(memPath(6), true)
	if err != nil {
		t.Fatal(err)
	}
	end, err := recordEnd(f, segment{base: 6, path: memPath(6), size: int64(len(data))}, 8)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	crashed.put(memPath(6), data[:end]) // the record of 9 lost

	for _, ro := range []bool{true, false, false} {
		_, err := Open(memDir, Options{fs: crashed, ReadOnly: ro})
		wantCorruption(t, err, memPath(6), end)
		if got := crashed.names(memDir); !slices.Equal(got, want) {
			t.Fatalf("segments after a failed open (read-only %v): %v, want %v", ro, got, want)
		}
	}
}

// TestRollAheadFullSegment: with synchronous appends, a record after which
// one as large would not fit starts the next segment at once. Segments
// stay within SegmentSize (or hold one record), a closed log ends with a
// record, and the log replays whole before and after a reopen.
func TestRollAheadFullSegment(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 80, smallShape)
	fs := newMemFS()
	opts := Options{fs: fs, SegmentSize: 600}
	l := mustOpen(t, memDir, opts)
	ahead := 0 // segments seen started before their first record
	for i, e := range entries {
		if i >= len(entries)/2 && rng.IntN(2) == 0 {
			// the next Append may come before the roll, or after
			if err := l.Append(e); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mustAppend(t, l, e) // waits for the roll
		l.w.Lock()
		if l.w.ahead {
			ahead++
		}
		l.w.Unlock()
	}
	if ahead == 0 {
		t.Fatal("no segment was started ahead of its record")
	}
	checkReplay(t, l, entries)
	l.mu.Lock()
	segments := slices.Clone(l.mu.segments)
	l.mu.Unlock()
	if len(segments) < 5 {
		t.Fatalf("only %d segments", len(segments))
	}
	for _, s := range segments {
		if n := len(recordOffsets(t, fs.get(s.path))) - 1; s.size > opts.SegmentSize && n > 1 {
			t.Fatalf("segment %s: %d bytes with %d records", s.path, s.size, n)
		}
	}
	mustClose(t, l)
	names := fs.names(memDir)
	if last := fs.get(filepath.Join(memDir, names[len(names)-1])); int64(len(last)) <= segmentHeaderSize {
		t.Fatalf("the closed log ends with an empty segment %s", names[len(names)-1])
	}
	l = mustOpen(t, memDir, opts)
	defer l.Close()
	checkReplay(t, l, entries)
}
