package wal

import (
	"errors"
	"testing"
)

// TestClosedReadOnlyLogErrors: every modifying call on a closed read-only
// log fails with ErrClosed ("returned by every operation on a closed Log"),
// not ErrReadOnly.
func TestClosedReadOnlyLogErrors(t *testing.T) {
	fs := newMemFS()
	w := mustOpen(t, memDir, Options{fs: fs})
	mustAppend(t, w, Entry{Version: 1}, Entry{Version: 2})
	mustClose(t, w)
	r := mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
	mustClose(t, r)
	for name, err := range map[string]error{
		"append":        r.Append(Entry{Version: 3}),
		"flush":         r.Flush(),
		"truncate back": r.TruncateBack(1),
		"reset":         r.Reset(1),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s on a closed read-only log: %v, want ErrClosed", name, err)
		}
	}
	if err := r.TruncateFront(2); !errors.Is(err, ErrClosed) {
		t.Fatalf("TruncateFront on a closed read-only log: %v, want ErrClosed", err)
	}
}

// TestClosedLogRefusesBadArguments: a closed log answers ErrClosed whatever
// the arguments, as Append does: TruncateBack(-1), Reset(0) and a Replay of
// an empty range checked their arguments first (and answered
// ErrVersionNotFound, ErrInvalidEntry and nil). A read-only log answers
// ErrReadOnly to Reset(0) and TruncateBack(-1). Replay with a nil fn is an
// error, not a panic.
func TestClosedLogRefusesBadArguments(t *testing.T) {
	for _, async := range []int{0, 4} {
		fs := newMemFS()
		l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: async})
		mustAppend(t, l, Entry{Version: 1})
		if err := l.Replay(1, 1, nil); err == nil {
			t.Errorf("async %d: Replay with a nil fn: no error", async)
		}
		mustClose(t, l)
		for name, err := range map[string]error{
			"TruncateBack(-1)": l.TruncateBack(-1),
			"Reset(0)":         l.Reset(0),
			"Replay(2, 1)":     l.Replay(2, 1, func(Entry) error { return nil }),
			"Append(0)":        l.Append(Entry{Version: 0}),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("async %d: %s on a closed log: %v, want ErrClosed", async, name, err)
			}
		}
		r := mustOpen(t, memDir, Options{fs: fs, ReadOnly: true})
		for name, err := range map[string]error{
			"TruncateBack(-1)": r.TruncateBack(-1),
			"Reset(0)":         r.Reset(0),
		} {
			if !errors.Is(err, ErrReadOnly) {
				t.Errorf("async %d: %s on a read-only log: %v, want ErrReadOnly", async, name, err)
			}
		}
		mustClose(t, r)
	}
}
