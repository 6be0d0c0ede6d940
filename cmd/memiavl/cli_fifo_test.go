package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runBinaryTimeout runs the built binary with args and kills it after d;
// timedOut reports that it had to be killed.
func runBinaryTimeout(t *testing.T, d time.Duration, args ...string) (code int, stdout, stderr string, timedOut bool) {
	t.Helper()
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return exitCode(err), out.String(), errb.String(), errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// TestCLIFIFOInDatabase: a database file replaced by a named pipe (FIFO)
// is refused with an error naming it (exit 1), or not read at all, by the
// read-only inspection commands; it is never opened for a read, which
// would block forever with no writer, as for a pipe in place of a
// snapshot's tree file or a log segment.
func TestCLIFIFOInDatabase(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("named pipes")
	}
	base := t.TempDir()
	makeDB(t, base, 0.01, 12, 6)
	os.Remove(filepath.Join(base, "LOCK"))
	buildBinary(t)

	type run struct {
		file string
		args []string
	}
	var runs []run
	for _, f := range []string{"current", "first", "rollback", "rollbacks", "import", filepath.Join(snapshotDirName(6), "metadata")} {
		for _, cmd := range [][]string{{"verify"}, {"dump"}, {"wal", "dump"}} {
			runs = append(runs, run{f, cmd})
		}
	}
	type result struct {
		code     int
		errs     string
		timedOut bool
	}
	results := make([]result, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		dir := filepath.Join(t.TempDir(), "db")
		copyDir(t, base, dir)
		p := filepath.Join(dir, r.file)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int, args []string) {
			defer wg.Done()
			code, _, errs, to := runBinaryTimeout(t, time.Minute, args...)
			results[i] = result{code, errs, to}
		}(i, append(append([]string{}, r.args...), dir))
	}
	wg.Wait()
	var hung []string
	for i, r := range runs {
		res := results[i]
		what := fmt.Sprintf("memiavl %s with %s a named pipe", strings.Join(r.args, " "), r.file)
		switch {
		case res.timedOut:
			hung = append(hung, what)
		case res.code != 0 && res.code != exitFailure:
			t.Errorf("%s: exit %d: %s", what, res.code, res.errs)
		case res.code == exitFailure && !strings.Contains(res.errs, filepath.Base(r.file)):
			t.Errorf("%s: exit 1 without naming the file: %s", what, res.errs)
		}
	}
	if len(hung) > 0 {
		t.Errorf("hung (killed after a minute), want exit 1 naming the file:\n  %s", strings.Join(hung, "\n  "))
	}
}
