package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// stallFirstLimiter holds its first wait until that wait's context is done
// and lets every other wait through at once.
type stallFirstLimiter struct {
	calls   atomic.Int64
	entered chan struct{}
}

func (l *stallFirstLimiter) WaitN(ctx context.Context, n int) error {
	if l.calls.Add(1) == 1 {
		close(l.entered)
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (l *stallFirstLimiter) Burst() int { return 1 << 30 }

// TestSplitWriteLeftFailureEndsPacedRight: when the left half of a split
// write fails, the write cancels the right half and waits for it. A right
// half waiting for the limiter must see that cancellation: the write then
// fails with the left half's error instead of waiting for the limiter's
// pace (here, for ever).
func TestSplitWriteLeftFailureEndsPacedRight(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	for i := 0; i < n; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("key-%06d", i)), []byte(fmt.Sprintf("value-%026d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr = reopen(t, tr, src)
	// the last key: the root and its right spine in memory, the rest
	// copied in bulk from src
	if _, err := tr.Set([]byte(fmt.Sprintf("key-%06d", n-1)), []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	// leaf 0's version: the left half's bulk copy fails on its first leaf
	testutil.DamageByte(t, filepath.Join(src, snapshot.FileLeaves), 32)
	defer memiavl.SetSplitMin(2)()

	lim := &stallFirstLimiter{entered: make(chan struct{})}
	runner := func(task func()) {
		go task()
		select { // the right half waits for the limiter before the left starts
		case <-lim.entered:
		case <-time.After(30 * time.Second):
			t.Error("the right half did not wait for the limiter")
		}
	}
	parent := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- tr.Copy().WriteSnapshot(context.Background(), filepath.Join(parent, "split"),
			memiavl.WithLimiter(lim), memiavl.WithSplitRunner(runner))
	}()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the split write did not return within 30s of its left half's failure: its right half still waits for the limiter")
	}
	if !errors.Is(err, memiavl.ErrCorrupt) {
		t.Fatalf("split write: %v, want ErrCorrupt", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left behind: %s", entries[0].Name())
	}
}
