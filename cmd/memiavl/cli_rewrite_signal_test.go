package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rewriteSignalled runs rewrite-snapshot with args on dir, stops it in the
// middle of its snapshot write (stopOnTmpEnv), sends it sig and lets it
// go on. It returns the exit code and stderr, and false when the write
// finished before the process could be stopped.
func rewriteSignalled(t *testing.T, dir string, sig syscall.Signal, args ...string) (int, string, bool) {
	t.Helper()
	bin := buildBinary(t)
	args = append(append([]string{"rewrite-snapshot", "--progress", "none", "--concurrency", "1"}, args...), dir)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), stopOnTmpEnv+"=1")
	sc := startScanStderr(t, cmd)
	var seen strings.Builder
	stopped := false
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "stopping during the write") {
			stopped = true
			break
		}
	}
	if stopped {
		for i := 0; i < 2000; i++ {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
			if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "T" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		_ = cmd.Process.Signal(sig)
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
	}
	return exitCode(cmd.Wait()), seen.String(), stopped
}

// TestCLIRewriteSignalMidWrite: SIGINT or SIGTERM in the middle of the
// snapshot write of rewrite-snapshot (latest, or --version without
// --rollback) exits 1 saying it was interrupted, leaves the database at the
// same version, app hash and base snapshot, passing verify --strict, and a
// rerun succeeds with no leftovers.
func TestCLIRewriteSignalMidWrite(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses SIGSTOP")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, extra := range [][]string{nil, {"--version", "15"}} {
			dir := t.TempDir()
			hash := makeDB(t, dir, 0.08, 20, 5)
			os.Remove(filepath.Join(dir, "LOCK"))
			before := dumpJSON(t, dir)
			code, errs, stopped := rewriteSignalled(t, dir, sig, extra...)
			if stopped && code == exitOK {
				t.Logf("%v %v: the write finished before the signal", sig, extra)
				continue
			}
			if !stopped {
				t.Logf("%v %v: the write finished before the signal", sig, extra)
				continue
			}
			if code != exitFailure || !strings.Contains(errs, "interrupted") || strings.Contains(errs, "goroutine ") {
				t.Errorf("%v %v: exit %d, want 1 and 'interrupted'\n%s", sig, extra, code, errs)
			}
			if after := dumpJSON(t, dir); after.Version != before.Version || after.AppHash != before.AppHash || after.SnapshotVersion != before.SnapshotVersion {
				t.Errorf("%v %v: after the interrupt %+v, before %+v", sig, extra, after, before)
			}
			if code, out, errs := cli(t, "verify", "--strict", dir); code != 0 {
				t.Errorf("%v %v: verify after the interrupt: exit %d %s %s", sig, extra, code, out, errs)
			}
			if code, out, errs := cli(t, append([]string{"rewrite-snapshot", "--progress", "none"}, append(extra, dir)...)...); code != 0 {
				t.Errorf("%v %v: rerun: exit %d %s %s", sig, extra, code, out, errs)
			}
			if d := dumpJSON(t, dir); d.Version != 20 || d.AppHash != hash {
				t.Errorf("%v %v: after the rerun %+v", sig, extra, d)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*"+tmpSuffix)); len(m) != 0 {
				t.Errorf("%v %v: leftovers after the rerun: %v", sig, extra, m)
			}
		}
	}
}

// TestCLIRewriteRollbackInterruptedSaysRolledBack: an interrupt (Ctrl-C)
// in the middle of the snapshot write of 'rewrite-snapshot --version 15
// --rollback' on a database at version 20 comes after the writer's open
// rolled the database back (versions 16..20 are gone). The error says so,
// as it does when the interrupt lands during the open: an operator who
// pressed Ctrl-C to abort the rollback learns that it stands.
func TestCLIRewriteRollbackInterruptedSaysRolledBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses SIGSTOP")
	}
	for attempt := 0; attempt < 5; attempt++ {
		dir := t.TempDir()
		makeDB(t, dir, 0.2, 20, 5)
		os.Remove(filepath.Join(dir, "LOCK"))
		b15 := dumpOf(t, dir, 15)
		code, errs, stopped := rewriteSignalled(t, dir, syscall.SIGINT, "--version", "15", "--rollback")
		if !stopped || code == exitOK {
			continue // the write finished before the signal
		}
		after := dumpJSON(t, dir)
		if after.Version != 15 || after.AppHash != b15.AppHash {
			t.Fatalf("after the interrupted rollback: version %d %s (want 15 %s, all or nothing)", after.Version, after.AppHash, b15.AppHash)
		}
		if code != exitFailure || !strings.Contains(errs, "rolled") || !strings.Contains(errs, "15") {
			t.Fatalf("rewrite-snapshot --version 15 --rollback interrupted mid-write left the database rolled back to 15, "+
				"but its error does not say so (exit %d):\n%s", code, errs)
		}
		return
	}
	t.Skip("the write finished before the process could be stopped")
}
