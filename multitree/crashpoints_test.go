package multitree

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// The crash points: the file-system calls that change what a database
// directory holds or make it durable. TestCrashPoints kills the committing
// process at the Nth call of one of them, for N = 1, 2, ... until the
// process finishes without meeting it.
var crashPointCalls = []string{"renameat", "unlinkat", "mkdirat", "fsync", "sync_file_range", "pwrite64", "write"}

// crashPointsVersions is how many versions a child of TestCrashPoints
// commits under strace before it closes the database.
const crashPointsVersions = 16

// TestCrashPointsChild is the process TestCrashPoints kills: it opens (or
// creates) a database, commits crashBlock's blocks up to the version
// MEMIAVL_CRASH_UNTIL with a background rewrite every 3 versions, small log
// segments; with MEMIAVL_CRASH_MODE=delay, rewrites held back for two
// commits (so that kills also land in catch-ups), with =async, an
// asynchronous log (a queue of 8 entries, fsyncs grouped). It prints each
// acknowledged version and closes the database.
func TestCrashPointsChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_CRASHPOINT_DIR")
	if dir == "" {
		t.Skip("only run as the crash-point test's child process")
	}
	seed, _ := strconv.ParseInt(os.Getenv("MEMIAVL_CRASH_SEED"), 10, 64)
	until, _ := strconv.ParseInt(os.Getenv("MEMIAVL_CRASH_UNTIL"), 10, 64)
	mode := os.Getenv("MEMIAVL_CRASH_MODE")
	if os.Getenv("MEMIAVL_CRASH_FAILOK") == "1" {
		// I/O errors are injected: the first error the database returns
		// ends the child, after an attempt to close the database
		childFail = func(db *DB, err error) {
			fmt.Println("failed", err)
			if db != nil {
				_ = db.Close()
			}
			os.Exit(3)
		}
	}
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 3,
		SnapshotKeepRecent: 1, WALSegmentSize: 64 << 10}
	if mode == "async" {
		opts.AsyncCommitBuffer, opts.Sync = 8, wal.SyncGrouped
	}
	db, err := Open(dir, opts)
	if err != nil {
		childFail(nil, err)
	}
	if mode == "delay" {
		DelayRewrites(db, 2)
	}
	for db.WorkingVersion() <= until {
		commitAcked(db, seed)
	}
	if err := db.Close(); err != nil {
		childFail(nil, err)
	}
	fmt.Println("closed")
}

// TestCrashPoints kills the child above at chosen crash points rather than
// at random moments: at the Nth call of each of crashPointCalls, injected
// by strace (the call fails and the process gets SIGKILL before the call
// runs; strace counts the calls of each thread). Each kill starts from a new
// directory, empty or holding a database the child committed a few
// versions to without strace, so that kills also land in the open's replay
// and cleanup; every third kill is followed by a second, at a crash point of
// the recovery and the commits after it. The child runs in turn plain, with
// rewrites held back and with an asynchronous log. After the kills, the
// database must open, at the last acknowledged version at least (with the
// asynchronous log, at the version its last close left at least), with the
// right app hash and contents, take further commits and pass Verify once
// closed. Every point is tried at the largest size (MEMIAVL_FULL=1 or
// -multitree.fullcrash), every 2nd without -short, every 7th under -short.
// The test is skipped where strace is not installed.
func TestCrashPoints(t *testing.T) {
	if os.Getenv("MEMIAVL_CRASHPOINT_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	r := testutil.Rand(t)
	seed := r.Int63()
	step := crashSize(1, 2, 7)
	kills := 0
	for i, call := range crashPointCalls {
		first := 1 + (i % step)
		n := first
		for ; ; n += step {
			dir, start := crashPointStart(t, n, seed)
			until := start + crashPointsVersions
			mode := []string{"", "delay", "async"}[n%3]
			acked, killed := runCrashPoint(t, strace, call, n, dir, seed, until, mode)
			if !killed {
				break // no thread of the process made n such calls
			}
			kills++
			if mode == "async" {
				// what the queue held is lost with the process; what
				// the child closed before is not
				acked = 0
			}
			acked = max(acked, start)
			if n%3 == 0 {
				again := crashPointCalls[(i+n)%len(crashPointCalls)]
				a, k := runCrashPoint(t, strace, again, 1+n%5, dir, seed, until+4, "")
				acked = max(acked, a)
				if k {
					kills++
				}
			}
			checkAfterFault(t, dir, seed, acked, 2, fmt.Sprintf("killed at %s #%d", call, n))
		}
		if n == first && step == 1 {
			t.Errorf("the child never called %s: the crash point list is stale", call)
		}
	}
	t.Logf("%d kills at crash points", kills)
}

// crashPointStart returns a new directory for the nth point: empty, or
// holding a database the child committed a few versions to and closed
// (start, the version it closed at; 0 for an empty directory).
func crashPointStart(t *testing.T, n int, seed int64) (dir string, start int64) {
	dir = t.TempDir()
	if start = int64(n*5) % 13; start > 0 {
		runCrashPoint(t, "", "", 0, dir, seed, start, "")
	}
	return dir, start
}

// checkAfterFault reopens dir after the child met a fault (where, for the
// messages) and checks it: at acked at least (or no database at all if
// nothing was acknowledged), with the right app hash and contents, taking
// that many more commits with the right app hashes, and verified once
// closed.
func checkAfterFault(t *testing.T, dir string, seed, acked int64, commits int, where string) {
	t.Helper()
	db, err := Open(dir, Options{})
	if errors.Is(err, ErrNotFound) && acked == 0 {
		return // before the database was created
	}
	if err != nil {
		t.Fatalf("%s (acked %d): reopen: %v", where, acked, err)
	}
	ref := newCrashRef(seed)
	v := checkRecovered(t, db, acked, ref)
	for range commits {
		if err := db.ApplyChangeSets(crashBlock(seed, v+1)); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatalf("%s: commit after the reopen: %v", where, err)
		}
		v++
		ref.advance(t, v)
		if want := ref.appHash(t, v); !bytes.Equal(info.Hash(), want) {
			t.Fatalf("%s: version %d after the reopen: app hash %X, want %X", where, v, info.Hash(), want)
		}
	}
	closeVerified(t, db, dir)
}

// runCrashPoint runs TestCrashPointsChild on dir up to version until and
// returns the last version it acknowledged. With strace set, it runs it
// under strace, killing it at the nth call of call (on any one thread), and
// also reports whether the kill happened (false: the child closed the
// database first). Without strace the child must close the database.
func runCrashPoint(t *testing.T, strace, call string, n int, dir string, seed, until int64, mode string) (acked int64, killed bool) {
	t.Helper()
	args := []string{os.Args[0], "-test.run=^TestCrashPointsChild$", "-test.v"}
	if strace != "" {
		args = testutil.KillAt(strace, call, n, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "MEMIAVL_CRASHPOINT_DIR="+dir, fmt.Sprintf("MEMIAVL_CRASH_SEED=%d", seed),
		fmt.Sprintf("MEMIAVL_CRASH_UNTIL=%d", until), "MEMIAVL_CRASH_MODE="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	acked, failure, closed := readChildOutput(out)
	if failure != "" {
		t.Fatalf("child at %s #%d: %s", call, n, failure)
	}
	if err == nil || strace == "" {
		if err != nil || !closed {
			t.Fatalf("child (crash point %q #%d) did not close the database: %v\n%s%s", call, n, err, out, stderr.Bytes())
		}
		return acked, false
	}
	if closed {
		// killed after Close, at the test framework's own output
		return acked, false
	}
	if testutil.StraceFailed(strace, stderr.Bytes()) {
		// strace failed on its own (see testutil.StraceFailed) and the
		// child ended without closing the database: a crash at a point
		// strace did not choose, which the recovery check covers as well
		// (Output returned, so the child, holding stdout, has exited)
		return acked, true
	}
	if !testutil.KilledBySIGKILL(err) {
		t.Fatalf("child at %s #%d: %v\n%s", call, n, err, stderr.Bytes())
	}
	return acked, true
}

// readChildOutput reads what a committing child printed: the last version
// it acknowledged ("acked <version> ..."), its first "error ..." line, and
// whether it closed the database ("closed").
func readChildOutput(out []byte) (acked int64, failure string, closed bool) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "acked":
			v, _ := strconv.ParseInt(f[1], 10, 64)
			acked = max(acked, v)
		case len(f) > 0 && f[0] == "error" && failure == "":
			failure = sc.Text()
		case len(f) == 1 && f[0] == "closed":
			closed = true
		}
	}
	return acked, failure, closed
}

// runIOErrorPoint runs the child of TestCrashPoints on a new directory for
// the nth point (see crashPointStart), failing the nth call of call with
// EIO, and returns the directory, the version it started at, strace's trace
// file, the child's output and its exit error. A run where strace failed on
// its own, whose exit status hides the child's, is run again on another new
// directory (testutil.RetryStraceFailures).
func runIOErrorPoint(t *testing.T, strace, call string, n int, seed int64, mode string) (dir string, start int64, trace string, out, stderr []byte, err error) {
	t.Helper()
	stderr, err = testutil.RetryStraceFailures(t, strace, fmt.Sprintf("EIO at %s #%d", call, n), func() ([]byte, error) {
		dir, start = crashPointStart(t, n, seed)
		trace = filepath.Join(t.TempDir(), "strace.out")
		args := testutil.FailAt(strace, call, n, trace, os.Args[0], "-test.run=^TestCrashPointsChild$", "-test.v")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "MEMIAVL_CRASHPOINT_DIR="+dir, fmt.Sprintf("MEMIAVL_CRASH_SEED=%d", seed),
			fmt.Sprintf("MEMIAVL_CRASH_UNTIL=%d", start+crashPointsVersions), "MEMIAVL_CRASH_MODE="+mode,
			"MEMIAVL_CRASH_FAILOK=1")
		var errBuf bytes.Buffer
		cmd.Stderr = &errBuf
		out, err = cmd.Output()
		return errBuf.Bytes(), err
	})
	return dir, start, trace, out, stderr, err
}

// ioErrorCalls are the calls TestIOErrorPoints fails. A failure of those in
// ioErrorMustReport always reaches the caller as an error; the others may
// be passed over (a leftover that cannot be removed yet, a file the
// runtime opens), but must not break anything.
var (
	ioErrorCalls      = []string{"fsync", "pwrite64", "renameat", "unlinkat", "mkdirat", "openat"}
	ioErrorMustReport = map[string]bool{"fsync": true, "pwrite64": true, "renameat": true, "mkdirat": true}
)

// TestIOErrorPoints fails the Nth call of each of ioErrorCalls with EIO in
// the child of TestCrashPoints, which goes on running (strace's fault
// injection, without a kill). The database must report the failure as an
// error, never crash the process, and return no error for a version it did
// not make durable: the child stops at the first error, closes the database
// and exits 3. Reopened without faults, the database must be at the last
// acknowledged version at least, with the right app hash and contents, and
// take further commits and pass Verify once closed. A failed fsync, write,
// rename or mkdir must be reported (by the call that needed it, the next
// Commit for a background rewrite's, or Close), and a failed fsync is not
// retried as if it had succeeded: the version it was for is not
// acknowledged. Every point is tried at the largest size, every 2nd
// without -short, every 7th under -short.
func TestIOErrorPoints(t *testing.T) {
	if os.Getenv("MEMIAVL_CRASHPOINT_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	r := testutil.Rand(t)
	seed := r.Int63()
	step := crashSize(1, 2, 7)
	faults, failed := 0, 0
	for i, call := range ioErrorCalls {
		first := 1 + (i % step)
		n := first
		for ; ; n += step {
			mode := []string{"", "delay", "async"}[n%3]
			where := fmt.Sprintf("EIO at %s #%d (%s)", call, n, mode)
			dir, start, trace, out, stderr, err := runIOErrorPoint(t, strace, call, n, seed, mode)
			if !testutil.Injected(t, trace) {
				if err != nil {
					t.Fatalf("%s: no fault injected, yet the child failed: %v\n%s%s", where, err, out, stderr)
				}
				break // no thread of the process made n such calls
			}
			faults++
			var ee *exec.ExitError
			switch {
			case err == nil && ioErrorMustReport[call]:
				tr, _ := os.ReadFile(trace)
				t.Fatalf("%s: the failure was not reported\n%s", where, tr)
			case err == nil:
			case errors.As(err, &ee) && ee.ExitCode() == 3:
				failed++
			default:
				t.Fatalf("%s: the child crashed: %v\n%s%s", where, err, out, stderr)
			}
			if bytes.Contains(stderr, []byte("panic:")) || bytes.Contains(stderr, []byte("fatal error:")) {
				t.Fatalf("%s: the child panicked:\n%s", where, stderr)
			}
			acked := start
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) == 3 && f[0] == "acked" {
					v, _ := strconv.ParseInt(f[1], 10, 64)
					acked = max(acked, v)
				}
			}
			if mode == "async" && err != nil {
				acked = start // a failed asynchronous log loses its queue
			}
			checkAfterFault(t, dir, seed, acked, 1, where)
		}
		if n == first && step == 1 {
			t.Errorf("the child never called %s: the list is stale", call)
		}
	}
	t.Logf("%d faults injected, %d of them reported by the database as an error", faults, failed)
}
