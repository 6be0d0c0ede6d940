package multitree

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCrashPolicyPointsChild is the process TestCrashPolicyPoints kills: under
// the log policy of the environment (small segments, a background rewrite
// every 3 versions, so that segment rolls and front truncations are
// frequent) it commits crashBlock's blocks up to MEMIAVL_POLICY_UNTIL, printing each
// acknowledged version, and closes the database.
func TestCrashPolicyPointsChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_POLICY_POINT_DIR")
	if dir == "" {
		t.Skip("only run as TestCrashPolicyPoints's child")
	}
	seed, _ := strconv.ParseInt(os.Getenv("MEMIAVL_POLICY_SEED"), 10, 64)
	until, _ := strconv.ParseInt(os.Getenv("MEMIAVL_POLICY_UNTIL"), 10, 64)
	sp, _ := strconv.Atoi(os.Getenv("MEMIAVL_POLICY_SYNC"))
	async, _ := strconv.Atoi(os.Getenv("MEMIAVL_POLICY_ASYNC"))
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 3,
		SnapshotKeepRecent: 1, WALSegmentSize: 24 << 10, Sync: wal.SyncPolicy(sp), AsyncCommitBuffer: async})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for db.WorkingVersion() <= until {
		commitAcked(db, seed)
	}
	if err := db.Close(); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("closed")
}

// runPolicyPoint runs TestCrashPolicyPointsChild on dir under strace, killed at the
// nth call of call, and returns the last version acknowledged and whether
// the kill happened before the child closed the database.
func runPolicyPoint(t *testing.T, strace, call string, n int, dir string, seed, until int64, p logPolicy) (acked int64, killed bool) {
	t.Helper()
	args := testutil.KillAt(strace, call, n, os.Args[0], "-test.run=^TestCrashPolicyPointsChild$", "-test.v")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "MEMIAVL_POLICY_POINT_DIR="+dir, fmt.Sprintf("MEMIAVL_POLICY_SEED=%d", seed),
		fmt.Sprintf("MEMIAVL_POLICY_UNTIL=%d", until), fmt.Sprintf("MEMIAVL_POLICY_SYNC=%d", int(p.sync)), fmt.Sprintf("MEMIAVL_POLICY_ASYNC=%d", p.async))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	acked, failure, closed := readChildOutput(out)
	if failure != "" {
		t.Fatalf("child (%v) at %s #%d: %s", p, call, n, failure)
	}
	if err == nil || closed {
		return acked, false
	}
	if !testutil.KilledBySIGKILL(err) && !testutil.StraceFailed(strace, stderr.Bytes()) {
		t.Fatalf("child (%v) at %s #%d: %v\n%s", p, call, n, err, stderr.Bytes())
	}
	return acked, true
}

// TestCrashPolicyPoints kills the committing process (SIGKILL, the
// operating system survives) at chosen file-system calls under the relaxed
// fsync policies, synchronous and asynchronous: the fsyncs, renames and
// removals of segment rolls, of front truncations after a prune and of
// snapshot switches. TestCrashPoints runs its asynchronous child with no
// bound at all on what survives (acked = 0) and never runs a relaxed policy
// synchronously. Package wal's doc: a process crash loses nothing whose
// Append returned in synchronous mode, whatever the policy, and at most
// 2*AsyncBuffer+1 entries in asynchronous mode. Every other point is
// followed by a second kill in the reopen and the commits after it (a
// double crash). The database must reopen at or after the bound, with the
// right contents and app hash, take further commits with the oracle's app
// hashes and pass Verify once closed.
func TestCrashPolicyPoints(t *testing.T) {
	if os.Getenv("MEMIAVL_POLICY_POINT_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	r := testutil.Rand(t)
	seed := r.Int63()
	ns := []int{2, 9, 23}
	if testing.Short() && !*fullRun {
		ns = []int{9}
	}
	kills := 0
	for _, p := range []logPolicy{{wal.SyncGrouped, 0}, {wal.SyncNone, 0}, {wal.SyncGrouped, 2}, {wal.SyncNone, 2}} {
		for ci, call := range []string{"fsync", "renameat", "unlinkat", "ftruncate"} {
			for ni, n := range ns {
				dir := t.TempDir()
				acked, killed := runPolicyPoint(t, strace, call, n, dir, seed, 14, p)
				if !killed {
					continue
				}
				kills++
				bound := func(a int64) int64 {
					if p.async > 0 {
						return max(0, a-int64(2*p.async+1))
					}
					return a
				}
				need := bound(acked)
				if (ci+ni)%2 == 0 {
					// a second kill, inside the recovery and the
					// commits after it; what the first run left is
					// durable for the second only through the reopen
					again := []string{"fsync", "unlinkat", "renameat", "ftruncate"}[(ci+ni+1)%4]
					a, k := runPolicyPoint(t, strace, again, 1+n%3, dir, seed, 20, p)
					if k {
						kills++
						need = max(need, bound(a))
					} else {
						need = max(need, a)
					}
				}
				checkAfterFault(t, dir, seed, need, 2, fmt.Sprintf("%v killed at %s #%d (acked %d)", p, call, n, acked))
			}
		}
	}
	t.Logf("%d kills", kills)
}
