package testutil

import (
	"errors"
	"testing"
)

func TestStraceFailed(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"imported db at version 12\n/usr/bin/strace: ptrace(PTRACE_LISTEN,pid:23488,sig:0): Input/output error\n", true},
		{"strace: ptrace(PTRACE_LISTEN,pid:1,sig:0): Input/output error", true},
		{"imported db at version 12\n", false},
		{"error: a message that names /usr/bin/strace: inside a line\n", false},
		{"", false},
	} {
		if got := StraceFailed("/usr/bin/strace", []byte(c.out)); got != c.want {
			t.Errorf("StraceFailed(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

func TestRetryStraceFailures(t *testing.T) {
	failed := []byte("/usr/bin/strace: ptrace(PTRACE_LISTEN,pid:1,sig:0): Input/output error\n")
	calls := 0
	out, err := RetryStraceFailures(t, "/usr/bin/strace", "run", func() ([]byte, error) {
		if calls++; calls < 3 {
			return failed, errors.New("exit status 1")
		}
		return []byte("done"), nil
	})
	if calls != 3 || err != nil || string(out) != "done" {
		t.Fatalf("%d calls, then %q, %v; want 3 calls ending in the run that worked", calls, out, err)
	}
	calls = 0
	wantErr := errors.New("exit status 3")
	if _, err := RetryStraceFailures(t, "/usr/bin/strace", "run", func() ([]byte, error) {
		calls++
		return []byte("the tracee's own failure\n"), wantErr
	}); calls != 1 || err != wantErr {
		t.Fatalf("a failure of the tracee: %d calls, %v", calls, err)
	}
}
