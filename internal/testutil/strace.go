package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Strace returns the path of strace, or skips the test where strace is not
// installed or cannot trace (no ptrace in a container, say). Crash-point
// tests run their child processes under it to kill them at a chosen
// system call.
func Strace(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	if out, err := exec.Command(path, "-qq", "-o", "/dev/null", "-e", "inject=getpid:retval=1", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v %s", err, out)
	}
	return path
}

// KillAt returns the strace arguments that run argv and kill it at the nth
// call of the system call call (counted per thread): the call fails with
// EIO and the process gets SIGKILL before the call runs.
func KillAt(strace, call string, n int, argv ...string) []string {
	return append([]string{strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=" + call,
		"-e", fmt.Sprintf("inject=%s:error=EIO:signal=KILL:when=%d", call, n)}, argv...)
}

// SignalAt returns the strace arguments that run argv and send it the
// signal sig (a name such as "INT") once, on entering the first call of the
// system call call on path (such as the mkdirat that creates it), which
// then runs as usual. (The calls are counted per thread: with a call made
// by several threads, each would get the signal; the path picks one.)
func SignalAt(strace, call, path, sig string, argv ...string) []string {
	return append([]string{strace, "-f", "-qq", "-o", "/dev/null", "-P", path, "-e", "trace=" + call,
		"-e", fmt.Sprintf("inject=%s:signal=%s:when=1", call, sig)}, argv...)
}

// KilledBySIGKILL reports whether err, from running a process under
// strace, says it was killed by SIGKILL (strace ends by the same signal as
// its tracee, or exits 128+9).
func KilledBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true
	}
	return ee.ExitCode() == 128+9
}

// FailAt returns the strace arguments that run argv and fail the nth call
// of the system call call (counted per thread) with EIO, without a signal:
// the process goes on and sees the error. strace's trace goes to the file
// trace, where Injected finds whether the fault was injected.
func FailAt(strace, call string, n int, trace string, argv ...string) []string {
	return append([]string{strace, "-f", "-qq", "-o", trace, "-e", "trace=" + call,
		"-e", fmt.Sprintf("inject=%s:error=EIO:when=%d", call, n)}, argv...)
}

// Injected reports whether the strace trace file says a fault was injected.
func Injected(t testing.TB, trace string) bool {
	t.Helper()
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte("(INJECTED)"))
}

// StraceFailed reports whether out, the output of a process run under the
// strace at path strace, holds an error of strace's own: a line that starts
// with its name, such as the "ptrace(PTRACE_LISTEN,...): Input/output error"
// it can meet while its tracee's threads exit. strace then exits with 1,
// whatever the tracee did, so the run tells nothing about the tracee.
func StraceFailed(strace string, out []byte) bool {
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.HasPrefix(line, []byte(strace+": ")) || bytes.HasPrefix(line, []byte(filepath.Base(strace)+": ")) {
			return true
		}
	}
	return false
}

// RetryStraceFailures calls run, which runs a process under the strace at
// path strace from a fresh start (a new directory, say) and returns the
// output that holds strace's diagnostics and the process's error; while
// strace failed on its own (StraceFailed; a run ended by SIGKILL, the
// kill KillAt asks for, is taken as it is), which tells nothing about the
// tracee, it calls run again, at most 3 times in all, and then fails the
// test. what names the run in the messages.
func RetryStraceFailures(t testing.TB, strace, what string, run func() ([]byte, error)) ([]byte, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, err := run()
		if err == nil || KilledBySIGKILL(err) || !StraceFailed(strace, out) {
			return out, err
		}
		if attempt == 3 {
			t.Fatalf("%s: strace failed on its own %d times: %v\n%s", what, attempt, err, out)
		}
		t.Logf("%s: strace failed on its own, running it again: %v\n%s", what, err, out)
	}
}
