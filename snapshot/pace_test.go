package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// countingLimiter counts the bytes it lets through and can fail once a
// budget is spent.
type countingLimiter struct {
	mu     sync.Mutex
	burst  int
	total  int
	calls  int
	maxN   int
	budget int   // fail a wait that would pass it; 0 means no budget
	err    error // the failure
}

func (l *countingLimiter) Burst() int { return l.burst }

func (l *countingLimiter) WaitN(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.budget > 0 && l.total+n > l.budget {
		return l.err
	}
	l.total += n
	l.calls++
	l.maxN = max(l.maxN, n)
	return nil
}

// writePaced writes the same tree as writeTree with seed 1 at version 9,
// its writes paced by l (none if nil), and returns the writer's error; on
// error the writer is aborted.
func writePaced(ctx context.Context, dir string, keys, values [][]byte, l Limiter) error {
	w, err := NewWriter(dir, 9)
	if err != nil {
		return err
	}
	defer w.Abort()
	if l != nil {
		w.SetLimiter(ctx, l)
	}
	g := &treeGen{
		r:           rand.New(rand.NewSource(1)),
		kv:          func(i int) ([]byte, []byte) { return keys[i], values[i] },
		treeVersion: 9,
		random:      true,
		sink:        w,
	}
	if _, err := g.run(len(keys)); err != nil {
		return err
	}
	return w.Finish()
}

// TestWriterLimiter checks that a limiter sees every byte of the
// snapshot's files but meta, in waits no larger than its burst, and that
// pacing changes none of the bytes, whether the lookup table is built whole
// or in windows.
func TestWriterLimiter(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(3)), 3000)
	for _, whole := range []bool{true, false} {
		t.Run(map[bool]string{true: "whole", false: "windows"}[whole], func(t *testing.T) {
			if !whole {
				defer func(m, w uint64) { lookupWholeMax, lookupWindow = m, w }(lookupWholeMax, lookupWindow)
				lookupWholeMax, lookupWindow = 1024, 64
			}
			parent := t.TempDir()
			plain, paced := filepath.Join(parent, "plain"), filepath.Join(parent, "paced")
			if err := writePaced(context.Background(), plain, keys, values, nil); err != nil {
				t.Fatal(err)
			}
			l := &countingLimiter{burst: 4096}
			if err := writePaced(context.Background(), paced, keys, values, l); err != nil {
				t.Fatal(err)
			}
			want, got := readDir(t, plain), readDir(t, paced)
			data := 0
			for name, b := range want {
				if !bytes.Equal(got[name], b) {
					t.Errorf("%s differs when paced", name)
				}
				if name != FileMeta {
					data += len(b)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d files paced, %d not", len(got), len(want))
			}
			if l.total != data {
				t.Errorf("the limiter let %d bytes through, the files hold %d", l.total, data)
			}
			if l.maxN > l.burst || l.calls < data/l.burst {
				t.Errorf("%d waits of at most %d bytes, burst %d", l.calls, l.maxN, l.burst)
			}
		})
	}
}

// TestWriterLimiterBurstBelowOne: a Limiter whose Burst is below 1 is
// asked for each write whole, and decides: one that allows it paces every
// byte of the files (in waits longer than any burst), a rate.Limiter of
// finite rate and burst 0 fails the writer, one of rate.Inf does not.
func TestWriterLimiterBurstBelowOne(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(5)), 3000)
	parent := t.TempDir()
	l := &countingLimiter{burst: 0}
	if err := writePaced(context.Background(), filepath.Join(parent, "zero"), keys, values, l); err != nil {
		t.Fatalf("a burst-0 limiter that allows every wait: %v", err)
	}
	data := 0
	for name, b := range readDir(t, filepath.Join(parent, "zero")) {
		if name != FileMeta {
			data += len(b)
		}
	}
	if l.total != data || l.maxN <= 1 {
		t.Errorf("a burst-0 limiter let %d bytes through in waits of up to %d bytes; the files hold %d", l.total, l.maxN, data)
	}
	if err := writePaced(context.Background(), filepath.Join(parent, "finite"), keys, values, rate.NewLimiter(1<<30, 0)); err == nil {
		t.Error("a rate.Limiter of finite rate and burst 0 did not fail the write")
	}
	if err := writePaced(context.Background(), filepath.Join(parent, "inf"), keys, values, rate.NewLimiter(rate.Inf, 0)); err != nil {
		t.Errorf("a rate.Limiter of rate.Inf and burst 0: %v", err)
	}
}

// TestWriterLimiterFails checks that a failed wait fails the writer with
// the limiter's error and leaves nothing behind, wherever it happens.
func TestWriterLimiterFails(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(4)), 3000)
	parent := t.TempDir()
	if err := writePaced(context.Background(), filepath.Join(parent, "plain"), keys, values, nil); err != nil {
		t.Fatal(err)
	}
	data := 0
	for name, b := range readDir(t, filepath.Join(parent, "plain")) {
		if name != FileMeta {
			data += len(b)
		}
	}
	errStop := errors.New("stop")
	// fail at the first wait, in the middle, and at the lookup table,
	// which is written last
	for _, budget := range []int{1, data / 2, data - 1} {
		dir := filepath.Join(parent, "paced")
		l := &countingLimiter{burst: 1 << 20, budget: budget, err: errStop}
		if err := writePaced(context.Background(), dir, keys, values, l); !errors.Is(err, errStop) {
			t.Fatalf("budget %d of %d: %v", budget, data, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("budget %d: the snapshot directory: %v", budget, err)
		}
		if left := tmpEntries(t, parent); len(left) != 0 {
			t.Fatalf("budget %d: left %v", budget, left)
		}
	}
}

// TestWriterRateLimiter paces a write with a rate.Limiter, whose waits must
// not exceed its burst (the writer splits them), and cancels one.
func TestWriterRateLimiter(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(5)), 3000)
	parent := t.TempDir()
	if err := writePaced(context.Background(), filepath.Join(parent, "plain"), keys, values, nil); err != nil {
		t.Fatal(err)
	}
	fast := rate.NewLimiter(rate.Limit(1<<30), 4096)
	if err := writePaced(context.Background(), filepath.Join(parent, "fast"), keys, values, fast); err != nil {
		t.Fatal(err)
	}
	want, got := readDir(t, filepath.Join(parent, "plain")), readDir(t, filepath.Join(parent, "fast"))
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs when paced", name)
		}
	}

	// 64 KiB a second: the write would take many seconds
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	slow := rate.NewLimiter(rate.Limit(64<<10), 4096)
	err := writePaced(ctx, filepath.Join(parent, "slow"), keys, values, slow)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled paced write: %v", err)
	}
	if left := tmpEntries(t, parent); len(left) != 0 {
		t.Fatalf("left %v", left)
	}

	// a deadline the paced write cannot meet: rate.Limiter refuses the
	// wait early, which reads as the deadline's error
	// (at 1 KiB/s the second 4 KiB wait needs 4 s)
	dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
	defer dcancel()
	err = writePaced(dctx, filepath.Join(parent, "deadline"), keys, values, rate.NewLimiter(rate.Limit(1<<10), 4096))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paced write past its deadline: %v", err)
	}
}

// brokenLimiter fails every wait with an error of its own.
type brokenLimiter struct{}

var errLimiterBroken = errors.New("limiter broken")

func (brokenLimiter) WaitN(ctx context.Context, n int) error { return errLimiterBroken }
func (brokenLimiter) Burst() int                             { return 1 << 20 }

// TestPaceErrorNotDeadline: a wait that fails for a reason of the
// limiter's own, under a context whose deadline is an hour away, is not
// reported as context.DeadlineExceeded: neither a limiter's own error nor
// that of a rate.Limiter of burst 0 (which fails every wait, as the
// Limiter doc says).
func TestPaceErrorNotDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	keys, values := sortedKVs(rand.New(rand.NewSource(3)), 3000)
	for name, l := range map[string]Limiter{
		"broken":       brokenLimiter{},
		"rate burst 0": rate.NewLimiter(1<<20, 0),
	} {
		dir := filepath.Join(t.TempDir(), "snap")
		err := writePaced(ctx, dir, keys, values, l)
		if err == nil {
			t.Fatalf("%s: write succeeded", name)
		}
		t.Logf("%s: %v", name, err)
		if name == "broken" && !errors.Is(err, errLimiterBroken) {
			t.Errorf("%s: error %q does not wrap the limiter's", name, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %q claims the deadline passed; it is an hour away (ctx.Err() = %v)", name, err, ctx.Err())
		}
	}
}
