package wal

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// logModel is what the log must hold: the entries of versions first..last
// and the version the next Append must carry (0: any).
type logModel struct {
	entries     map[int64]Entry
	first, last int64
	next        int64
}

// appended records the Append of e.
func (m *logModel) appended(e Entry) {
	m.entries[e.Version] = e
	if m.last == 0 {
		m.first = e.Version
	}
	m.last, m.next = e.Version, e.Version+1
}

// truncatedBack records TruncateBack(v).
func (m *logModel) truncatedBack(v int64) {
	switch {
	case v == m.last:
	case v < m.first:
		m.first, m.last, m.next = 0, 0, v+1
	default:
		m.last, m.next = v, v+1
	}
}

// reset records Reset(n).
func (m *logModel) reset(n int64) { m.first, m.last, m.next = 0, 0, n }

// reopened records a reopen: an empty log takes any version next.
func (m *logModel) reopened() {
	if m.last == 0 {
		m.next = 0
	}
}

// check compares l with the model: its last version, a first version
// within the model's (TruncateFront may have moved it up, which the model
// then takes), and the entries Replay returns.
func (m *logModel) check(l *Log) error {
	if got := l.LastVersion(); got != m.last {
		return fmt.Errorf("LastVersion %d, want %d", got, m.last)
	}
	first := l.FirstVersion()
	if m.last == 0 {
		if first != 0 {
			return fmt.Errorf("FirstVersion %d of an empty log", first)
		}
		return nil
	}
	if first < m.first || first > m.last {
		return fmt.Errorf("FirstVersion %d, model %d..%d", first, m.first, m.last)
	}
	got, err := collect(l, first, m.last)
	if err != nil {
		return fmt.Errorf("replay %d..%d: %v", first, m.last, err)
	}
	if int64(len(got)) != m.last-first+1 {
		return fmt.Errorf("replay %d..%d: %d entries", first, m.last, len(got))
	}
	for i, e := range got {
		if d := entryDiff(m.entries[first+int64(i)], e); d != "" {
			return fmt.Errorf("replay: %s", d)
		}
	}
	m.first = first
	return nil
}

// randomOpsRun is one iteration of a random-operations test: the log under
// test, the model it must match, the memory file system it lives on, and
// the trace of the operations so far, which every failure prints.
type randomOpsRun struct {
	t     *testing.T
	iter  int
	fs    *memFS
	pick  func(fs *memFS) Options
	l     *Log
	m     logModel
	trace []string
}

// newRandomOpsRun opens a log on a fresh memory file system with the
// options pick returns for it, beside an empty model.
func newRandomOpsRun(t *testing.T, iter int, pick func(fs *memFS) Options) *randomOpsRun {
	t.Helper()
	r := &randomOpsRun{t: t, iter: iter, fs: newMemFS(), pick: pick, m: logModel{entries: map[int64]Entry{}}}
	r.l = mustOpen(t, memDir, pick(r.fs))
	return r
}

// fail closes the log and fails the test with the message and the trace.
func (r *randomOpsRun) fail(format string, args ...any) {
	r.t.Helper()
	r.l.Close()
	r.t.Fatalf("iteration %d: %s\ntrace:\n%s", r.iter, fmt.Sprintf(format, args...), strings.Join(r.trace, "\n"))
}

// check fails the test unless l matches the model.
func (r *randomOpsRun) check(l *Log) {
	r.t.Helper()
	if err := r.m.check(l); err != nil {
		r.fail("%v", err)
	}
}

// nextVersion returns the version the next Append must carry, or a random
// one of 1..5 where the model takes any.
func (r *randomOpsRun) nextVersion(rng *rand.Rand) int64 {
	v := r.m.next
	if v == 0 {
		v = 1 + rng.Int64N(5)
	}
	return v
}

// append appends e to the log and the model.
func (r *randomOpsRun) append(e Entry) {
	r.t.Helper()
	r.trace = append(r.trace, fmt.Sprintf("Append(%d)", e.Version))
	if err := r.l.Append(e); err != nil {
		r.fail("append %d: %v", e.Version, err)
	}
	r.m.appended(e)
}

// truncateBack calls TruncateBack(v) on the log and the model.
func (r *randomOpsRun) truncateBack(v int64) {
	r.t.Helper()
	r.trace = append(r.trace, fmt.Sprintf("TruncateBack(%d)", v))
	if err := r.l.TruncateBack(v); err != nil {
		r.fail("TruncateBack(%d): %v", v, err)
	}
	r.m.truncatedBack(v)
}

// reset calls Reset(n) on the log and the model.
func (r *randomOpsRun) reset(n int64) {
	r.t.Helper()
	r.trace = append(r.trace, fmt.Sprintf("Reset(%d)", n))
	if err := r.l.Reset(n); err != nil {
		r.fail("Reset(%d): %v", n, err)
	}
	r.m.reset(n)
}

// truncateFront calls TruncateFront(v) on the log; the model takes the new
// first version at its next check.
func (r *randomOpsRun) truncateFront(v int64) {
	r.t.Helper()
	r.trace = append(r.trace, fmt.Sprintf("TruncateFront(%d)", v))
	if err := r.l.TruncateFront(v); err != nil {
		r.fail("TruncateFront(%d): %v", v, err)
	}
}

// rollAt calls RollAt(v) on the log.
func (r *randomOpsRun) rollAt(v int64) {
	r.trace = append(r.trace, fmt.Sprintf("RollAt(%d)", v))
	r.l.RollAt(v)
}

// flush flushes the log.
func (r *randomOpsRun) flush() {
	r.t.Helper()
	if err := r.l.Flush(); err != nil {
		r.fail("flush: %v", err)
	}
}

// close closes the log.
func (r *randomOpsRun) close() {
	r.t.Helper()
	if err := r.l.Close(); err != nil {
		r.fail("close: %v", err)
	}
}

// open opens the log again, on r.fs, with newly picked options; what names
// the open in the failure message.
func (r *randomOpsRun) open(what string) {
	r.t.Helper()
	opts := r.pick(r.fs)
	r.trace = append(r.trace, fmt.Sprintf("open %+v", Options{Sync: opts.Sync, AsyncBuffer: opts.AsyncBuffer, SegmentSize: opts.SegmentSize}))
	var err error
	if r.l, err = Open(memDir, opts); err != nil {
		r.t.Fatalf("iteration %d: %s: %v\ntrace:\n%s", r.iter, what, err, strings.Join(r.trace, "\n"))
	}
	r.m.reopened()
}

// reopen closes the log and opens it again with newly picked options.
func (r *randomOpsRun) reopen() {
	r.t.Helper()
	r.trace = append(r.trace, "reopen")
	r.close()
	r.open("reopen")
}

// TestLogRandomOps runs random sequences of Append, Flush, TruncateBack,
// Reset, TruncateFront, RollAt and reopens (under random options) against a
// model and checks that Replay returns exactly the model's entries.
func TestLogRandomOps(t *testing.T) {
	rng := newRand(t)
	optsList := []Options{
		{},
		{AsyncBuffer: 3},
		{Sync: SyncGrouped, GroupCount: 3},
		{Sync: SyncGrouped, GroupCount: 3, AsyncBuffer: 2},
		{Sync: SyncNone},
		{Sync: SyncNone, AsyncBuffer: 1},
	}
	for iter := range 60 {
		r := newRandomOpsRun(t, iter, func(fs *memFS) Options {
			o := optsList[rng.IntN(len(optsList))]
			o.fs = fs
			o.SegmentSize = int64(200 + rng.IntN(800))
			return o
		})
		m := &r.m
		for range 80 {
			switch op := rng.IntN(100); {
			case op < 50: // append a few
				for range 1 + rng.IntN(4) {
					v := r.nextVersion(rng)
					e := randEntry(rng, v, smallShape)
					if rng.IntN(4) == 0 {
						e = Entry{Version: v} // zero change sets
					}
					r.append(e)
				}
			case op < 55:
				r.trace = append(r.trace, "Flush")
				r.flush()
			case op < 65:
				v := m.last - rng.Int64N(8)
				if v < 0 {
					v = 0
				}
				r.truncateBack(v)
			case op < 68:
				r.reset(1 + rng.Int64N(m.last+10))
			case op < 78:
				r.truncateFront(m.first + rng.Int64N(m.last-m.first+20))
			case op < 90:
				v := m.last + 1
				switch rng.IntN(4) {
				case 0:
					v = m.last - rng.Int64N(5)
				case 1:
					v = m.last + 2 + rng.Int64N(5)
				}
				r.rollAt(v)
			default:
				r.reopen()
			}
			r.check(r.l)
		}
		r.close()
	}
}

// TestLogConcurrentAllModes: appenders, replayers, TruncateFront, RollAt
// and Flush run at once, in every mode and policy, across many segment
// rolls; then Close races with a last round of calls.
func TestLogConcurrentAllModes(t *testing.T) {
	checkNoLeak(t)
	for _, o := range []Options{
		{},
		{Sync: SyncGrouped, GroupCount: 4},
		{Sync: SyncNone},
		{AsyncBuffer: 1},
		{AsyncBuffer: 4, Sync: SyncGrouped, GroupCount: 4},
		{AsyncBuffer: 2, Sync: SyncNone},
	} {
		t.Run(fmt.Sprintf("sync=%v/async=%d", o.Sync, o.AsyncBuffer), func(t *testing.T) {
			const n = 400
			seed := uint64(7)
			entryOf := func(v int64) Entry {
				r := rand.New(rand.NewPCG(seed, uint64(v)))
				return randEntry(r, v, smallShape)
			}
			o.fs = newMemFS()
			o.SegmentSize = 700
			l := mustOpen(t, memDir, o)
			var done atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer done.Store(true)
				for v := int64(1); v <= n; v++ {
					if err := l.Append(entryOf(v)); err != nil {
						t.Errorf("append %d: %v", v, err)
						return
					}
				}
			}()
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !done.Load() {
						last := l.LastVersion()
						if last == 0 {
							runtime.Gosched()
							continue
						}
						from := l.FirstVersion() + int64(r)
						if from > last {
							continue
						}
						next := from
						err := l.Replay(from, last, func(e Entry) error {
							if e.Version != next {
								return fmt.Errorf("version %d, want %d", e.Version, next)
							}
							if d := entryDiff(entryOf(e.Version), e); d != "" {
								return errors.New(d)
							}
							next++
							return nil
						})
						if err != nil && !(errors.Is(err, ErrVersionNotFound) && from < l.FirstVersion()) {
							t.Errorf("replay %d..%d: %v", from, last, err)
							return
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !done.Load(); i++ {
					last := l.LastVersion()
					switch i % 3 {
					case 0:
						if err := l.TruncateFront(last - 50); err != nil {
							t.Errorf("truncate front: %v", err)
							return
						}
					case 1:
						l.RollAt(last + 1)
					case 2:
						if err := l.Flush(); err != nil {
							t.Errorf("flush: %v", err)
							return
						}
					}
					runtime.Gosched()
				}
			}()
			wg.Wait()
			if t.Failed() {
				l.Close()
				t.FailNow()
			}
			mustClose(t, l)
			o2 := o
			l = mustOpen(t, memDir, o2)
			defer l.Close()
			if l.LastVersion() != n {
				t.Fatalf("reopened at %d", l.LastVersion())
			}
			want := make([]Entry, n)
			for v := int64(1); v <= n; v++ {
				want[v-1] = entryOf(v)
			}
			checkReplay(t, l, want)
		})
	}
}

// TestLogCloseWhileAppendsBlock: Close while Appends block on a full queue
// and Flushes wait: every call returns, and what Append acknowledged is in
// the log after a reopen.
func TestLogCloseWhileAppendsBlock(t *testing.T) {
	checkNoLeak(t)
	for _, o := range []Options{{AsyncBuffer: 1}, {AsyncBuffer: 2, Sync: SyncGrouped}, {AsyncBuffer: 1, Sync: SyncNone}} {
		for iter := range 20 {
			fs := newMemFS()
			o.fs = fs
			l := mustOpen(t, memDir, o)
			var next atomic.Int64
			next.Store(1)
			var mu sync.Mutex
			acked := int64(0)
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						v := next.Load()
						err := l.Append(Entry{Version: v})
						if err == nil {
							next.Add(1)
							acked = v
						}
						mu.Unlock()
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							t.Errorf("append %d: %v", v, err)
							return
						}
					}
				}()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						err := l.Flush()
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							t.Errorf("flush: %v", err)
							return
						}
					}
				}()
			}
			for l.LastVersion() < int64(5+iter) {
				runtime.Gosched()
			}
			if err := l.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			wg.Wait()
			o2 := o
			l = mustOpen(t, memDir, o2)
			if l.LastVersion() != acked {
				t.Fatalf("reopened at %d, %d acknowledged", l.LastVersion(), acked)
			}
			mustClose(t, l)
		}
	}
}

// TestLogReadOnlyBesideWriter opens the log read-only, again and again,
// on the real file system while a writer appends across segment rolls in
// each mode: every open must succeed and replay a correct prefix, never
// report corruption. With prune, the writer's TruncateFront removes old
// segments, which a read-only open or its replay may find gone.
func TestLogReadOnlyBesideWriter(t *testing.T) {
	for _, o := range []Options{
		{},
		{Sync: SyncNone},
		{AsyncBuffer: 4, Sync: SyncNone},
	} {
		for _, prune := range []bool{false, true} {
			t.Run(fmt.Sprintf("sync=%v/async=%d/prune=%v", o.Sync, o.AsyncBuffer, prune), func(t *testing.T) {
				dir := t.TempDir()
				seed := uint64(11)
				entryOf := func(v int64) Entry {
					r := rand.New(rand.NewPCG(seed, uint64(v)))
					return randEntry(r, v, entryShape{stores: 2, pairs: 8, keyLen: 8, valueLen: 900})
				}
				o.SegmentSize = 16 << 10
				l := mustOpen(t, dir, o)
				defer l.Close()
				mustAppend(t, l, entryOf(1))
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				var done atomic.Bool
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer done.Store(true)
					for v := int64(2); v <= 1500; v++ {
						if err := l.Append(entryOf(v)); err != nil {
							t.Errorf("append %d: %v", v, err)
							return
						}
						if v%100 == 0 {
							l.RollAt(v + 1)
						}
						if prune && v%50 == 0 {
							if err := l.TruncateFront(v - 200); err != nil {
								t.Errorf("truncate front: %v", err)
								return
							}
						}
					}
				}()
				opens := 0
				for !done.Load() || opens < 3 {
					r, err := Open(dir, Options{ReadOnly: true})
					if prune && errors.Is(err, iofs.ErrNotExist) {
						continue // a segment listed, then removed by TruncateFront
					}
					if err != nil {
						t.Errorf("read-only open %d: %v", opens, err)
						break
					}
					opens++
					if last := r.LastVersion(); last > 0 {
						next := r.FirstVersion()
						err := r.Replay(next, last, func(e Entry) error {
							if d := entryDiff(entryOf(e.Version), e); d != "" {
								return errors.New(d)
							}
							next++
							return nil
						})
						if err != nil && !(prune && errors.Is(err, iofs.ErrNotExist)) {
							t.Errorf("read-only replay: %v", err)
						}
					}
					r.Close()
					if t.Failed() {
						break
					}
				}
				wg.Wait()
			})
		}
	}
}

// blockedIn waits until some goroutine's stack shows fn blocked on a
// mutex (sync.(*Mutex).Lock called from fn).
func blockedIn(t *testing.T, fn string) {
	t.Helper()
	waitUntil(t, fn+" blocked on a mutex", func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if i := strings.Index(g, "sync.(*Mutex).Lock"); i >= 0 && strings.Contains(g[i:], fn+"(") {
				return true
			}
		}
		return false
	})
}

// TestAppendAfterFailedRollAhead: a synchronous Append that waits for
// the writer while a roll started ahead of its record (by RollAt, or by the
// Append before it, whose record filled the segment) fails its fsync. The
// failed fsync cuts the segment back to what was durable and fails the
// log; the waiting Append must then return the sticky error. It must not
// roll on its own, write its record into a new segment after the cut one
// (a gap: versions 1..3 are gone, 4 is there) and return nil.
func TestAppendAfterFailedRollAhead(t *testing.T) {
	checkNoLeak(t)
	for _, tc := range []struct {
		name string
		opts Options
	}{
		// RollAt(4) starts the roll once 3 is written
		{"RollAt/grouped", Options{Sync: SyncGrouped, GroupCount: 1000, GroupInterval: time.Hour}},
		// 3 records of 24 bytes fill the segment: the Append of 3 starts the roll
		{"full/none", Options{Sync: SyncNone, SegmentSize: segmentHeaderSize + 3*24 + 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newMemFS()
			opts := tc.opts
			opts.fs = fs
			l := mustOpen(t, memDir, opts)
			mustAppend(t, l, Entry{Version: 1}, Entry{Version: 2}) // written, not fsynced
			inSync := make(chan struct{})
			release := make(chan struct{})
			var calls atomic.Int64
			fs.setHook(func(op, _ string) error {
				if op == "sync" && calls.Add(1) == 1 {
					close(inSync)
					<-release
					return errInjected // the roll's fsync of the finished segment
				}
				return nil
			})
			if err := l.Append(Entry{Version: 3}); err != nil {
				t.Fatal(err)
			}
			if opts.SegmentSize == 0 {
				l.RollAt(4)
			}
			// the roll, on a goroutine of the log, holds the writer in
			// its fsync (the guard turns a roll that never starts into
			// a failure instead of a hang of the whole package)
			select {
			case <-inSync:
			case <-time.After(time.Minute):
				close(release)
				t.Fatal("no roll started ahead of version 4's record")
			}
			besideFailedRoll(t, l, fs, opts, release, "Append(4)", "appendSync", func() error { return l.Append(Entry{Version: 4}) })
		})
	}
}

// TestLogAsyncFailureLaterCalls: after the background writer fails, a
// Replay waiting for an entry it never writes, Appends blocked on the full
// queue, and later calls of every kind return (the sticky error where the
// log must be reopened), and Close joins everything.
func TestLogAsyncFailureLaterCalls(t *testing.T) {
	checkNoLeak(t)
	for _, o := range []Options{{AsyncBuffer: 1}, {AsyncBuffer: 3, Sync: SyncGrouped}, {AsyncBuffer: 2, Sync: SyncNone}} {
		fs := newMemFS()
		o.fs = fs
		o.SegmentSize = 300
		l := mustOpen(t, memDir, o)
		for v := int64(1); v <= 10; v++ {
			mustAppend(t, l, Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: make([]byte, 40)}}}}})
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		inWrite, release := blockWrites(fs)
		mustAppend(t, l, Entry{Version: 11})
		<-inWrite
		for v := int64(12); v < 12+int64(o.AsyncBuffer); v++ {
			mustAppend(t, l, Entry{Version: v})
		}
		last := l.LastVersion()
		replayDone := make(chan error, 1)
		go func() { _, err := collect(l, 1, last); replayDone <- err }()
		appendDone := make(chan error, 1)
		go func() { appendDone <- l.Append(Entry{Version: last + 1}) }()
		flushDone := make(chan error, 1)
		go func() { flushDone <- l.Flush() }()
		close(release)
		for name, ch := range map[string]chan error{"replay": replayDone, "append": appendDone, "flush": flushDone} {
			if err := <-ch; !errors.Is(err, errInjected) {
				t.Errorf("%v: %s: %v, want the injected error", o.Sync, name, err)
			}
		}
		fs.setHook(nil)
		l.RollAt(l.LastVersion() + 1)
		for name, err := range map[string]error{
			"truncate back": l.TruncateBack(5),
			"reset":         l.Reset(3),
		} {
			if !errors.Is(err, errInjected) {
				t.Errorf("%v: %s after failure: %v", o.Sync, name, err)
			}
		}
		if err := l.TruncateFront(5); err != nil {
			t.Errorf("truncate front after failure: %v", err)
		}
		if _, err := collect(l, l.FirstVersion(), 10); err != nil {
			t.Errorf("replay of written entries after failure: %v", err)
		}
		if err := l.Close(); !errors.Is(err, errInjected) {
			t.Errorf("close: %v", err)
		}
		if err := l.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("second close: %v", err)
		}
		l = mustOpen(t, memDir, o)
		if l.LastVersion() != 10 {
			t.Errorf("reopened at %d, want 10", l.LastVersion())
		}
		mustClose(t, l)
	}
}
