package snapshot

import (
	"context"
	"fmt"
	"strings"
)

// Limiter paces the writes of a Writer (SetLimiter): WaitN blocks until n
// more bytes may be written, or fails, for instance when ctx is done. A
// *rate.Limiter of golang.org/x/time/rate is one. WaitN is called with at
// most Burst() bytes at a time; for a Burst below 1, with each write's
// whole length, and the Limiter decides: a *rate.Limiter of finite rate
// then fails every paced write, one of rate.Inf lets every write through.
type Limiter interface {
	WaitN(ctx context.Context, n int) error
	Burst() int
}

// rateDeadlineError is the text of the error with which a rate.Limiter of
// golang.org/x/time/rate refuses a wait that would outlast the context's
// deadline; it wraps no error of the context package.
const rateDeadlineError = "would exceed context deadline"

// noPace is the zero pacer, which does not wait.
var noPace pacer

// pacer waits for a Limiter before the writes of the snapshot's files; the
// zero pacer does not wait.
type pacer struct {
	l   Limiter
	ctx context.Context
}

// wait blocks until n more bytes may be written.
func (p *pacer) wait(n int) error {
	if p.l == nil {
		return nil
	}
	burst := p.l.Burst()
	for n > 0 {
		k := n
		if burst > 0 && k > burst {
			k = burst
		}
		if err := p.l.WaitN(p.ctx, k); err != nil {
			if cerr := p.ctx.Err(); cerr != nil {
				return fmt.Errorf("snapshot: paced write: %w", cerr)
			}
			if _, ok := p.ctx.Deadline(); ok && strings.Contains(err.Error(), rateDeadlineError) {
				// rate.Limiter fails a wait that would outlast ctx's
				// deadline before the deadline passes, with an error
				// of its own that wraps nothing
				return fmt.Errorf("snapshot: paced write: %w: %w", context.DeadlineExceeded, err)
			}
			return fmt.Errorf("snapshot: paced write: %w", err)
		}
		n -= k
	}
	return nil
}

// SetLimiter makes the writer wait for l before each write to the files of
// the snapshot (all but its scratch files, which hold a few bytes per leaf
// and are removed at Finish), so that a snapshot written beside a running
// database leaves the disk and the page cache to its reads. A wait that
// fails (ctx done, say) fails the write that waited, and with it the
// writer. A nil l removes the limiter. Call it before adding nodes.
func (w *Writer) SetLimiter(ctx context.Context, l Limiter) {
	if l == nil {
		w.pace = pacer{}
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	w.pace = pacer{l: l, ctx: ctx}
}
