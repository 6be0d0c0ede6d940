package wal

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkNoLeak fails the test if goroutines started after the call are still
// running when the test ends. Exiting goroutines may take a moment to be
// reaped after Close has joined them, so it waits a little (without a
// timing assertion: a real leak never goes away).
func checkNoLeak(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines running, %d before the test:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(time.Millisecond)
		}
	})
}

func TestAsyncModes(t *testing.T) {
	checkNoLeak(t)
	for _, policy := range []SyncPolicy{SyncEveryCommit, SyncGrouped, SyncNone} {
		for _, async := range []int{1, 16} {
			rng := newRand(t)
			entries := makeEntries(rng, 300, smallShape)
			fs := newMemFS()
			opts := Options{fs: fs, Sync: policy, AsyncBuffer: async, SegmentSize: 2048, GroupCount: 7}
			l := mustOpen(t, memDir, opts)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // a concurrent flusher
				defer wg.Done()
				for range 20 {
					if err := l.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			mustAppend(t, l, entries...)
			wg.Wait()
			if l.LastVersion() != 300 {
				t.Fatalf("LastVersion %d", l.LastVersion())
			}
			checkReplay(t, l, entries) // waits for the writer
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if policy != SyncNone && !fs.allSynced() {
				t.Fatalf("%v: Flush returned with unsynced data", policy)
			}
			mustClose(t, l)
			if !fs.allSynced() {
				t.Fatalf("%v: Close returned with unsynced data", policy)
			}
			l = mustOpen(t, memDir, opts)
			checkReplay(t, l, entries)
			mustClose(t, l)
		}
	}
}

// TestReplayWhileAppending runs Replay loops and TruncateFront while a
// writer appends asynchronously across many segment rollovers. Run it with
// -race.
func TestReplayWhileAppending(t *testing.T) {
	checkNoLeak(t)
	rng := newRand(t)
	n := 3000
	if testing.Short() {
		n = 800
	}
	seed := rng.Uint64()
	entryOf := func(v int64) Entry { // the same entry for a version, in every goroutine
		r := rand.New(rand.NewPCG(seed, uint64(v)))
		return randEntry(r, v, smallShape)
	}
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: 8, Sync: SyncGrouped, GroupCount: 16, SegmentSize: 4096})

	var done atomic.Bool
	var replaysDone atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for v := int64(1); v <= int64(n); v++ {
			if err := l.Append(entryOf(v)); err != nil {
				t.Errorf("append %d: %v", v, err)
				return
			}
			if v%200 == 0 { // make sure replays overlap the appends
				for seen := replaysDone.Load(); replaysDone.Load() < seen+2 && !t.Failed(); {
					runtime.Gosched()
				}
			}
		}
	}()
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replays := 0
			for !done.Load() || replays < 3 {
				last := l.LastVersion()
				if last == 0 {
					runtime.Gosched()
					continue
				}
				first := l.FirstVersion()
				from := first + (last-first)*int64(r)/3
				next := from
				err := l.Replay(from, last, func(e Entry) error {
					if e.Version != next {
						t.Errorf("replay: version %d, want %d", e.Version, next)
					}
					if d := entryDiff(entryOf(e.Version), e); d != "" {
						t.Errorf("replay: %s", d)
					}
					next++
					return nil
				})
				// TruncateFront may drop from between FirstVersion and Replay.
				if err != nil && !(errors.Is(err, ErrVersionNotFound) && from < l.FirstVersion()) {
					t.Errorf("replay %d..%d: %v", from, last, err)
					return
				}
				if err == nil && next != last+1 {
					t.Errorf("replay %d..%d stopped at %d", from, last, next)
				}
				replays++
				replaysDone.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // drops old segments now and then
		defer wg.Done()
		for !done.Load() {
			if last := l.LastVersion(); last > 200 {
				if err := l.TruncateFront(last - 200); err != nil {
					t.Errorf("truncate front: %v", err)
					return
				}
			}
			runtime.Gosched()
		}
	}()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	mustClose(t, l)
	l = mustOpen(t, memDir, Options{fs: fs})
	defer l.Close()
	if l.LastVersion() != int64(n) || l.FirstVersion() < 1 {
		t.Fatalf("after reopen: %d..%d", l.FirstVersion(), l.LastVersion())
	}
	want := make([]Entry, n)
	for v := l.FirstVersion(); v <= int64(n); v++ {
		want[v-1] = entryOf(v)
	}
	checkReplay(t, l, want)
}

var errInjected = errors.New("injected I/O error")

// failAfter returns a hook that fails the given op on the path's n-th call
// (counting from 1) and every later one.
func failAfter(op string, n int) func(string, string) error {
	var calls atomic.Int64
	return func(o, _ string) error {
		if o == op && calls.Add(1) >= int64(n) {
			return errInjected
		}
		return nil
	}
}

// TestStickyWriterError injects a write or fsync failure and checks that
// it is reported by the next Append, Flush and Close, that the log accepts
// nothing afterwards, and that a reopen recovers the written prefix.
func TestStickyWriterError(t *testing.T) {
	checkNoLeak(t)
	for _, op := range []string{"write", "sync"} {
		for _, async := range []int{0, 4} {
			rng := newRand(t)
			entries := makeEntries(rng, 50, smallShape)
			fs := newMemFS()
			opts := Options{fs: fs, AsyncBuffer: async}
			l := mustOpen(t, memDir, opts)
			// Fail from the 10th call on (the first segment's header
			// takes one write and one sync).
			fs.setHook(failAfter(op, 10))
			var err error
			appended := 0
			for _, e := range entries {
				if err = l.Append(e); err != nil {
					break
				}
				appended++
			}
			if err == nil {
				err = l.Flush()
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("%s async %d: got %v, want the injected error", op, async, err)
			}
			for name, err := range map[string]error{
				"append": l.Append(Entry{Version: int64(appended + 1)}),
				"flush":  l.Flush(),
			} {
				if !errors.Is(err, errInjected) {
					t.Fatalf("%s async %d: %s after failure: %v", op, async, name, err)
				}
			}
			if err := l.Close(); !errors.Is(err, errInjected) {
				t.Fatalf("%s async %d: close: %v", op, async, err)
			}
			fs.setHook(nil)
			l = mustOpen(t, memDir, opts)
			// Synchronous: every acknowledged entry is written, and the
			// failed one may be too (its write may have succeeded before
			// its fsync failed). Asynchronous: nothing was acknowledged by a
			// Flush; whatever is there must be a correct prefix.
			lo, hi := int64(appended), int64(appended+1)
			if async > 0 {
				lo, hi = 0, int64(len(entries))
			}
			if last := l.LastVersion(); last < lo || last > hi {
				t.Fatalf("%s async %d: reopened with LastVersion %d, %d appends succeeded", op, async, last, appended)
			}
			checkReplay(t, l, entries)
			if last := l.LastVersion(); last < int64(len(entries)) {
				mustAppend(t, l, entries[last])
			}
			mustClose(t, l)
		}
	}
}

// blockWrites makes every write on fs wait until release is closed and
// then fail with errInjected; inWrite is closed once the first write waits.
func blockWrites(fs *memFS) (inWrite, release chan struct{}) {
	inWrite, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.setHook(func(op, _ string) error {
		if op != "write" {
			return nil
		}
		once.Do(func() { close(inWrite) })
		<-release
		return errInjected
	})
	return inWrite, release
}

// TestBlockedAppendWakesOnError: an Append blocked on the full queue must
// return the writer's error when the writer fails, not hang.
func TestBlockedAppendWakesOnError(t *testing.T) {
	checkNoLeak(t)
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: 2})
	mustAppend(t, l, Entry{Version: 1})
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	inWrite, release := blockWrites(fs)
	mustAppend(t, l, Entry{Version: 2}) // the writer takes it and blocks in write
	<-inWrite
	mustAppend(t, l, Entry{Version: 3}, Entry{Version: 4}) // fills the queue
	result := make(chan error, 1)
	go func() { result <- l.Append(Entry{Version: 5}) }() // blocks: the queue is full
	select {
	case err := <-result:
		t.Fatalf("append returned %v while the queue was full", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-result:
		if !errors.Is(err, errInjected) {
			t.Fatalf("blocked append returned %v, want the injected error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocked append did not wake after the writer failed")
	}
	if err := l.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("close: %v", err)
	}
}

// TestGroupedTimerSyncs: under SyncGrouped an entry is fsynced within
// GroupInterval even when no further append comes.
func TestGroupedTimerSyncs(t *testing.T) {
	checkNoLeak(t)
	for _, async := range []int{0, 4} {
		fs := newMemFS()
		l := mustOpen(t, memDir, Options{fs: fs, Sync: SyncGrouped, GroupCount: 1000, GroupInterval: 2 * time.Millisecond, AsyncBuffer: async})
		mustAppend(t, l, Entry{Version: 1}, Entry{Version: 2})
		if _, err := collect(l, 1, 2); err != nil { // waits until written
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !fs.allSynced() {
			if time.Now().After(deadline) {
				t.Fatalf("async %d: grouped entries never fsynced without a further append", async)
			}
			time.Sleep(time.Millisecond)
		}
		crashed := fs.crash()
		mustClose(t, l)
		l = mustOpen(t, memDir, Options{fs: crashed})
		if l.LastVersion() != 2 {
			t.Fatalf("async %d: after the timer fsync, a crash kept up to version %d", async, l.LastVersion())
		}
		mustClose(t, l)
	}
}

func TestCloseJoinsGoroutines(t *testing.T) {
	checkNoLeak(t)
	for _, opts := range []Options{
		{AsyncBuffer: 4},
		{Sync: SyncGrouped},
		{Sync: SyncGrouped, AsyncBuffer: 4},
		{Sync: SyncNone, AsyncBuffer: 1},
	} {
		opts.fs = newMemFS()
		l := mustOpen(t, memDir, opts)
		for v := int64(1); v <= 20; v++ {
			mustAppend(t, l, Entry{Version: v})
		}
		mustClose(t, l)
	}
	// A log whose writer failed is joined too.
	fs := newMemFS()
	l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: 4})
	fs.setHook(failAfter("write", 1))
	for v := int64(1); v <= 20; v++ {
		if l.Append(Entry{Version: v}) != nil {
			break
		}
	}
	if err := l.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("close: %v", err)
	}
}

// TestFlushAnsweredAfterFailedClose: a Flush whose marker is queued when
// the log fails (a roll-ahead goroutine that fails while it holds w) and
// Close runs gets the failure as its answer. Close's own marker cannot be
// queued then (the queue is full), and the writer, told to stop, must still
// answer the markers left in the queue.
func TestFlushAnsweredAfterFailedClose(t *testing.T) {
	for iter := range 40 {
		fs := newMemFS()
		l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: 1})
		taken := make(chan int, 1)
		l.batchTaken = func(n int) {
			select {
			case taken <- n: // the first batch's; later ones go unseen
			default:
			}
		}
		l.w.Lock() // as a roll-ahead goroutine does while it rolls
		if err := l.Append(Entry{Version: 1}); err != nil {
			t.Fatal(err)
		}
		// the writer took version 1 alone and goes on to block on w
		if n := <-taken; n != 1 {
			t.Fatalf("iteration %d: the writer's batch has %d requests", iter, n)
		}
		flushDone := make(chan error, 1)
		go func() { flushDone <- l.Flush() }()
		waitUntil(t, "the flush marker", func() bool { return len(l.queue) == 1 })
		boom := errors.New("roll failed")
		l.fail(boom) // what the roll-ahead goroutine does when its roll fails
		closeDone := make(chan error, 1)
		go func() { closeDone <- l.Close() }()
		waitUntil(t, "Close to close stop", func() bool {
			select {
			case <-l.stop:
				return true
			default:
				return false
			}
		})
		l.w.Unlock()
		select {
		case err := <-flushDone:
			if !errors.Is(err, boom) {
				t.Fatalf("iteration %d: Flush returned %v", iter, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("iteration %d: Flush never returned: its marker was left in the queue when the writer exited", iter)
		}
		if err := <-closeDone; !errors.Is(err, boom) {
			t.Fatalf("close: %v", err)
		}
	}
}

// waitUntil polls cond until it holds, failing the test after 5 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
