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
