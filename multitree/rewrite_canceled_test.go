package multitree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestCanceledOnly pins which errors of a rewrite count as its
// cancellation (not reported) and which as a failure (reported as
// ErrRewrite by the next Commit or Close).
func TestCanceledOnly(t *testing.T) {
	failure := io.ErrUnexpectedEOF
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"canceled", context.Canceled, true},
		{"closed", ErrClosed, true},
		{"canceled in a store's name", fmt.Errorf("store %q: %w", "bank", context.Canceled), true},
		{"closed wrapped twice", fmt.Errorf("rebuild: %w", fmt.Errorf("wait: %w", ErrClosed)), true},
		{"workers all canceled", errors.Join(context.Canceled, fmt.Errorf("store %q: %w", "acc", ErrClosed)), true},
		{"deadline", context.DeadlineExceeded, false},
		{"failure", failure, false},
		{"a worker failed, the other canceled", errors.Join(failure, context.Canceled), false},
		{"the same join in a store's name", fmt.Errorf("store %q: %w", "bank", errors.Join(context.Canceled, failure)), false},
		{"the same join wrapped twice", corruptStore("bank", fmt.Errorf("split: %w", errors.Join(failure, ErrClosed))), false},
		{"damage as the rewrite stopped", fmt.Errorf("%w: %w", ErrCorrupt, context.Canceled), false},
		{"a store's damage beside a cancellation", errors.Join(corruptStore("a", memiavl.ErrCorrupt), context.Canceled), false},
		{"an empty join's like", emptyJoin{}, false},
	} {
		if got := canceledOnly(c.err); got != c.want {
			t.Errorf("%s: canceledOnly(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	// and so the job's failure: nothing for a cancellation, ErrRewrite
	// wrapping the failure otherwise
	j := &rewriteJob{version: 7, res: &rewriteResult{err: fmt.Errorf("store %q: %w", "bank", errors.Join(context.Canceled, failure))}}
	if err := j.failure(); !errors.Is(err, ErrRewrite) || !errors.Is(err, failure) {
		t.Errorf("failure of a job that failed as it was cancelled: %v", err)
	}
	j.res.err = fmt.Errorf("store %q: %w", "bank", errors.Join(context.Canceled, ErrClosed))
	if err := j.failure(); err != nil {
		t.Errorf("failure of a cancelled job: %v, want nil", err)
	}
}

type emptyJoin struct{}

func (emptyJoin) Error() string   { return "nothing" }
func (emptyJoin) Unwrap() []error { return nil }
