package multitree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// logPolicy is one log configuration of the policy crash campaign.
type logPolicy struct {
	sync  wal.SyncPolicy
	async int
}

func (p logPolicy) String() string { return fmt.Sprintf("%v/async%d", p.sync, p.async) }

func (p logPolicy) options() Options {
	return Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 4, SnapshotKeepRecent: 1,
		WALSegmentSize: 48 << 10, Sync: p.sync, AsyncCommitBuffer: p.async}
}

// TestCrashPoliciesChild is the process TestCrashPolicies kills: it
// commits crashBlock's blocks forever under the log policy of the
// environment, printing each acknowledged version.
func TestCrashPoliciesChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_POLICY_DIR")
	if dir == "" {
		t.Skip("only run as TestCrashPolicies's child")
	}
	seed, _ := strconv.ParseInt(os.Getenv("MEMIAVL_POLICY_SEED"), 10, 64)
	sp, _ := strconv.Atoi(os.Getenv("MEMIAVL_POLICY_SYNC"))
	async, _ := strconv.Atoi(os.Getenv("MEMIAVL_POLICY_ASYNC"))
	p := logPolicy{sync: wal.SyncPolicy(sp), async: async}
	db, err := Open(dir, p.options())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for {
		commitAcked(db, seed)
	}
}

// TestCrashPolicies kills (SIGKILL: the operating system survives) a
// committing process under every fsync policy, with and without an
// asynchronous log, with frequent background rewrites, prunes and segment
// rolls. Package wal's doc ("What a crash can lose"): a process crash loses
// only records not yet handed to the operating system, whatever the
// policy: nothing acknowledged in synchronous mode, at most
// 2*AsyncBuffer+1 entries in asynchronous mode. multitree's doc: reopening
// lands on the last durable version, never on a corrupt one. The reopen
// (alternately with the child's options and with the defaults, a restart
// under another policy) must land at or after that bound with the right
// contents and app hash, continue committing with the oracle's app hashes,
// and leave a database Verify accepts.
func TestCrashPolicies(t *testing.T) {
	if os.Getenv("MEMIAVL_POLICY_DIR") != "" {
		t.Skip("child")
	}
	r := testutil.Rand(t)
	kills := 3
	if testing.Short() && !*fullRun {
		kills = 2
	}
	if n, err := strconv.Atoi(os.Getenv("MEMIAVL_POLICY_KILLS")); err == nil && n > 0 {
		kills = n
	}
	for _, p := range []logPolicy{
		{wal.SyncEveryCommit, 0}, {wal.SyncEveryCommit, 2},
		{wal.SyncGrouped, 0}, {wal.SyncGrouped, 3},
		{wal.SyncNone, 0}, {wal.SyncNone, 2},
	} {
		t.Run(p.String(), func(t *testing.T) {
			seed := r.Int63()
			dir := t.TempDir()
			ref := newCrashRef(seed)
			floor := int64(0) // durable for sure: closed by a reopen
			for k := 0; k < kills; k++ {
				acked := killChild(t, r, "TestCrashPoliciesChild", "MEMIAVL_POLICY_DIR="+dir, fmt.Sprintf("MEMIAVL_POLICY_SEED=%d", seed),
					fmt.Sprintf("MEMIAVL_POLICY_SYNC=%d", int(p.sync)), fmt.Sprintf("MEMIAVL_POLICY_ASYNC=%d", p.async))
				durable := acked
				if p.async > 0 {
					durable -= int64(2*p.async + 1)
				}
				durable = max(durable, floor)
				opts := Options{}
				if k%2 == 0 {
					opts = p.options()
					opts.CreateIfMissing, opts.InitialStores = false, nil
				}
				db, err := Open(dir, opts)
				if errors.Is(err, ErrNotFound) && acked == 0 {
					continue
				}
				if err != nil {
					t.Fatalf("kill %d (acked %d): reopen: %v", k, acked, err)
				}
				v := checkRecovered(t, db, durable, ref)
				for i := 0; i < 3; i++ {
					if err := db.ApplyChangeSets(crashBlock(seed, v+1)); err != nil {
						t.Fatal(err)
					}
					info, err := db.Commit()
					if err != nil {
						t.Fatalf("kill %d: commit %d after the reopen: %v", k, v+1, err)
					}
					v++
					ref.advance(t, v)
					if want := ref.appHash(t, v); !bytes.Equal(info.Hash(), want) {
						t.Fatalf("kill %d: version %d after the reopen: app hash %X, want %X", k, v, info.Hash(), want)
					}
				}
				closeVerified(t, db, dir)
				floor = v
				t.Logf("kill %d: acked %d, reopened, now at %d", k, acked, v)
			}
		})
	}
}
