package wal

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestReaderWaitingBesideTruncateFront: in asynchronous mode a Replay or
// a Verify waits for the writer to write its last version; a TruncateFront
// meanwhile keeps what it reads, as it does for a reader already reading,
// so the reader returns every version of its range. FirstVersion moves only
// as far as the reader's first version allows.
func TestReaderWaitingBesideTruncateFront(t *testing.T) {
	for _, tc := range []struct {
		name      string
		read      func(l *Log, got *[]int64) error
		wantFirst int64
	}{
		{"replay", func(l *Log, got *[]int64) error {
			return l.Replay(5, 10, func(e Entry) error { *got = append(*got, e.Version); return nil })
		}, 4},
		{"verify", func(l *Log, _ *[]int64) error { return l.Verify() }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustOpen(t, t.TempDir(), Options{AsyncBuffer: 16})
			var armed atomic.Bool
			hold := make(chan struct{})
			entered := make(chan struct{}, 1)
			l.batchTaken = func(int) {
				if armed.CompareAndSwap(true, false) {
					entered <- struct{}{}
					<-hold
				}
			}
			defer l.Close()
			v := int64(1)
			for seg := 0; seg < 3; seg++ { // segments 1..3, 4..6, 7..9
				if seg > 0 {
					l.RollAt(v)
				}
				for i := 0; i < 3; i++ {
					mustAppend(t, l, Entry{Version: v})
					v++
				}
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			// the writer stalls on the batch of 10
			armed.Store(true)
			mustAppend(t, l, Entry{Version: v})
			<-entered

			var got []int64
			done := make(chan error, 1)
			go func() { done <- tc.read(l, &got) }()
			// until the reader waits for the writer, pinned
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				l.mu.Lock()
				n := len(l.mu.pins)
				l.mu.Unlock()
				if n > 0 {
					break
				}
				if time.Now().After(deadline) {
					close(hold)
					t.Fatal("setup: the reader did not start")
				}
			}
			if err := l.TruncateFront(7); err != nil {
				close(hold)
				t.Fatal(err)
			}
			if first := l.FirstVersion(); first != tc.wantFirst {
				t.Errorf("FirstVersion %d beside the waiting reader, want %d", first, tc.wantFirst)
			}
			close(hold)
			if err := <-done; err != nil {
				t.Fatalf("the reader waiting for the writer when TruncateFront ran: %v", err)
			}
			if tc.name == "replay" && (len(got) != 6 || got[0] != 5 || got[5] != 10) {
				t.Errorf("replay of 5..10 read %v", got)
			}
			if err := l.TruncateFront(7); err != nil {
				t.Fatal(err)
			}
			if first := l.FirstVersion(); first != 7 {
				t.Errorf("FirstVersion %d after the reader, want 7", first)
			}
		})
	}
}
