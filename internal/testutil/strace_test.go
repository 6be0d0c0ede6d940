package testutil

import "testing"

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
