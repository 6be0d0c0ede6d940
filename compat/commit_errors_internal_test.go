package compat

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestRewriteFailuresOnly: Commit survives failures of background rewrites
// and prunes (multitree.ErrRewrite), alone or joined, and stops the node on
// anything else, also when the database reports it joined with one.
func TestRewriteFailuresOnly(t *testing.T) {
	write := errors.New("injected write failure")
	rewrite := fmt.Errorf("%w: snapshot at version 3: %w", multitree.ErrRewrite, write)
	prune := fmt.Errorf("%w: pruning: %w", multitree.ErrRewrite, errors.New("unlink failed"))
	damage := fmt.Errorf("check of the snapshot opened: %w", multitree.ErrCorrupt)
	for _, c := range []struct {
		err  error
		want bool
	}{
		{rewrite, true},
		{errors.Join(prune, rewrite), true},
		{errors.Join(nil, rewrite), true},
		{damage, false},
		{errors.Join(nil, damage), false},
		{errors.Join(rewrite, damage), false},
		{errors.Join(errors.Join(prune), damage), false},
		{write, false},
	} {
		if got := rewriteFailuresOnly(c.err); got != c.want {
			t.Errorf("rewriteFailuresOnly(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
