package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestConcurrentCloseAmidAllOps: the Log doc says all methods are safe
// for concurrent use. Appenders, replayers, truncations (both ends), Reset,
// RollAt, Flush and Verify run at once, and Close comes in the middle: no
// panic, no hang, every call after Close returns ErrClosed (or, for Replay
// and Verify that were running, completes), and the log reopens and
// verifies.
func TestConcurrentCloseAmidAllOps(t *testing.T) {
	for _, o := range []Options{{}, {AsyncBuffer: 4}, {Sync: SyncGrouped, AsyncBuffer: 2, SegmentSize: 512}, {Sync: SyncNone, SegmentSize: 300}} {
		dir := t.TempDir()
		l := mustOpen(t, dir, o)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		fail := make(chan error, 64)
		ok := func(err error) {
			if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrVersionNotNext) || errors.Is(err, ErrVersionNotFound) {
				return
			}
			select {
			case fail <- err:
			default:
			}
		}
		run := func(f func(r *rand.Rand)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
				for {
					select {
					case <-stop:
						return
					default:
					}
					f(r)
				}
			}()
		}
		for i := 0; i < 2; i++ {
			run(func(r *rand.Rand) { ok(l.Append(zzE(l.LastVersion() + 1))) })
		}
		run(func(r *rand.Rand) {
			f, la := l.FirstVersion(), l.LastVersion()
			if la > 0 {
				ok(l.Replay(f, la, func(Entry) error { return nil }))
			}
		})
		run(func(r *rand.Rand) { ok(l.Verify()); ok(l.Flush()) })
		run(func(r *rand.Rand) {
			la := l.LastVersion()
			switch r.IntN(20) {
			case 0:
				ok(l.TruncateBack(la - int64(r.IntN(3))))
			case 1:
				ok(l.TruncateFront(la - int64(r.IntN(5))))
			case 2:
				if r.IntN(5) == 0 {
					ok(l.Reset(la + 1))
				}
			default:
				l.RollAt(la + int64(r.IntN(3)))
			}
			time.Sleep(time.Millisecond)
		})
		time.Sleep(150 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("%+v: Close: %v", o, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%+v: Close hangs", o)
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%+v: a call hangs after Close", o)
		}
		select {
		case err := <-fail:
			t.Fatalf("%+v: unexpected error: %v", o, err)
		default:
		}
		if err := l.Append(zzE(l.LastVersion() + 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("%+v: Append after Close: %v", o, err)
		}
		l2 := mustOpen(t, dir, o)
		if err := l2.Verify(); err != nil {
			t.Fatalf("%+v: Verify after reopen: %v", o, err)
		}
		mustClose(t, l2)
	}
}

func zzE(v int64) Entry {
	return Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: []byte(fmt.Sprint(v))}}}}}
}
