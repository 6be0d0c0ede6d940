package multitree

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestWriteFailureChild is the process of TestWriteFailure. It limits the
// size of the files it may write (RLIMIT_FSIZE: a write past the limit
// fails with EFBIG, like a write to a full disk fails with ENOSPC), opens
// the database and commits MEMIAVL_WRITEFAIL_VERSIONS versions, printing
// each acknowledged one. After the first failure it goes on calling the
// database a few times, which must return errors or succeed, never panic,
// then closes it.
func TestWriteFailureChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_WRITEFAIL_DIR")
	if dir == "" {
		t.Skip("only run as the write failure test's child process")
	}
	seed, _ := strconv.ParseInt(os.Getenv("MEMIAVL_WRITEFAIL_SEED"), 10, 64)
	versions, _ := strconv.ParseInt(os.Getenv("MEMIAVL_WRITEFAIL_VERSIONS"), 10, 64)
	// the soft limit only, restored on return: the test binary writes its
	// coverage data (go test -cover) after the test
	var was unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &was); err != nil {
		fmt.Println("setup", err)
		return
	}
	// (the field's integer type differs between systems)
	lim := was
	if _, err := fmt.Sscan(os.Getenv("MEMIAVL_WRITEFAIL_LIMIT"), &lim.Cur); err != nil {
		fmt.Println("setup", err)
		return
	}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setup", err)
		return
	}
	defer unix.Setrlimit(unix.RLIMIT_FSIZE, &was)
	segment, _ := strconv.ParseInt(os.Getenv("MEMIAVL_WRITEFAIL_SEGMENT"), 10, 64)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 5,
		SnapshotKeepRecent: 1, WALSegmentSize: segment})
	if err != nil {
		fmt.Println("failed open:", err)
		return
	}
	if n, _ := strconv.Atoi(os.Getenv("MEMIAVL_WRITEFAIL_MAXLOGGED")); n > 0 {
		SetMaxLoggedEntry(db, n)
	}
	// kind names what a failure must be: the first one to write the log
	// (or the snapshot of a version too large for it), then ErrBroken for
	// every change and commit, or a failed background rewrite reported
	// with a version that did commit
	kind := func(err error) string {
		switch {
		case errors.Is(err, ErrBroken):
			return "broken"
		case errors.Is(err, ErrRewrite):
			return "rewrite"
		case strings.Contains(err.Error(), "logging version"):
			return "log"
		case strings.Contains(err.Error(), "by a snapshot"):
			return "snapcommit"
		}
		return "other"
	}
	failures := 0
	for i := int64(0); i < versions && failures < 5; i++ {
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			fmt.Println("failed", kind(err), "apply:", err)
			failures++
			continue
		}
		info, err := db.Commit()
		if info != nil {
			// a failed background rewrite is reported with the version
			// it committed
			fmt.Printf("acked %d\n", info.Version)
		}
		if err != nil {
			fmt.Println("failed", kind(err), "commit:", err)
			failures++
		}
	}
	if err := db.Close(); err != nil {
		fmt.Println("failed close:", err)
	}
	fmt.Println("done")
}

// TestWriteFailure runs the database out of file space: a child process
// commits under a file size limit until writes fail, rounds after round on
// the same directory with a growing limit. Every child must get errors,
// not a panic, and every reopen (without the limit) must succeed, land on
// at least the last acknowledged version and hold the right state.
func TestWriteFailure(t *testing.T) {
	if os.Getenv("MEMIAVL_WRITEFAIL_DIR") != "" {
		t.Skip("child")
	}
	r := testutil.Rand(t)
	seed := r.Int63()
	dir := t.TempDir()
	rounds := 12
	if testing.Short() && !*fullRun {
		rounds = 4
	}
	ref := newCrashRef(seed)
	lastAcked := int64(0)
	failed := 0
	kinds := map[string]int{}
	limit := uint64(0)
	for round := 0; round < rounds; round++ {
		// even rounds: a limit that grows, as space freed on a full
		// disk, and log segments that reach it; odd rounds: small log
		// segments under a small limit, which only the snapshot files
		// pass, so that rewrites fail while commits go on. The first
		// limit is tiny, so that creating the database may fail.
		if round == 0 {
			limit = uint64(r.Intn(4 << 10))
		} else {
			limit += uint64(r.Intn(256 << 10))
		}
		segment, roundLimit := 0, limit
		// half the rounds commit the larger blocks by a snapshot
		maxLogged := r.Intn(2) * 36 << 10
		if round%2 == 1 {
			segment, roundLimit = 32<<10, uint64(64<<10+r.Intn(128<<10))
		} else if round == rounds-2 && kinds["log"] == 0 {
			// the last round of growing limits, and the log has not
			// reached one yet: a limit its segment already passes, and
			// every block logged (a block committed by a snapshot could
			// meet the limit first)
			roundLimit = uint64(16<<10 + r.Intn(32<<10))
			maxLogged = 0
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailureChild$")
		cmd.Env = append(os.Environ(), "MEMIAVL_WRITEFAIL_DIR="+dir,
			fmt.Sprintf("MEMIAVL_WRITEFAIL_SEED=%d", seed),
			fmt.Sprintf("MEMIAVL_WRITEFAIL_LIMIT=%d", roundLimit),
			fmt.Sprintf("MEMIAVL_WRITEFAIL_VERSIONS=%d", 40+r.Intn(40)),
			fmt.Sprintf("MEMIAVL_WRITEFAIL_SEGMENT=%d", segment),
			fmt.Sprintf("MEMIAVL_WRITEFAIL_MAXLOGGED=%d", maxLogged))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("round %d (limit %d): child failed: %v\n%s", round, roundLimit, err, out)
		}
		done, broken := false, false
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			line := sc.Text()
			switch f := strings.Fields(line); {
			case len(f) == 2 && f[0] == "acked":
				v, _ := strconv.ParseInt(f[1], 10, 64)
				lastAcked = max(lastAcked, v)
			case len(f) > 1 && f[0] == "failed" && f[1] == "close:":
				kinds["close"]++ // reports the failure again
			case len(f) > 1 && f[0] == "failed":
				failed++
				kinds[f[1]]++
				t.Logf("round %d (limit %d): %s", round, roundLimit, line)
				if f[1] == "other" || f[1] == "broken" && !broken {
					t.Errorf("round %d: unexpected failure: %s", round, line)
				}
				broken = broken || f[1] == "log" || f[1] == "snapcommit"
			case len(f) > 0 && f[0] == "setup":
				t.Fatalf("child: %s", line)
			case line == "done":
				done = true
			}
		}
		if !done && !strings.Contains(string(out), "failed open") {
			t.Fatalf("round %d: child did not finish:\n%s", round, out)
		}
		db, err := Open(dir, Options{})
		if errors.Is(err, ErrNotFound) && lastAcked == 0 {
			continue // the limit stopped the creation
		}
		if err != nil {
			t.Fatalf("round %d (limit %d): reopen: %v", round, roundLimit, err)
		}
		v := checkRecovered(t, db, lastAcked, ref)
		// the failed rewrites left nothing behind once the writer opened
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.Contains(e.Name(), tmpSuffix) {
				t.Errorf("round %d: %s left in the directory", round, e.Name())
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		lastAcked = v
	}
	// a snapshot write stopped by the limit is a background rewrite's or,
	// in the rounds that commit large blocks by a snapshot, a commit's
	if kinds["log"] == 0 || kinds["rewrite"]+kinds["snapcommit"] == 0 {
		t.Fatalf("failures %v in %d rounds: the limit must stop both the log and a snapshot write", kinds, rounds)
	}
	t.Logf("%d rounds, failures %v, final version %d", rounds, kinds, ref.version)
}
