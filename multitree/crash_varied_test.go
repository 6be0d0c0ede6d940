package multitree

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// crashVariedEntry returns what version v logs in the varied crash test,
// given the stores before it: store upgrades at some versions (a store
// added, or deleted once there are eight, one renamed, one deleted), then
// changes to most of the stores after them.
func crashVariedEntry(seed, v int64, stores []string) wal.Entry {
	r := rand.New(rand.NewSource(seed*1_000_003 + v))
	e := wal.Entry{Version: v}
	live := append([]string(nil), stores...)
	drop := func(i int) {
		e.Upgrades.Deleted = append(e.Upgrades.Deleted, live[i])
		live = append(live[:i], live[i+1:]...)
	}
	if v%11 == 0 {
		if len(live) < 8 {
			name := fmt.Sprintf("a%d", v)
			e.Upgrades.Added = append(e.Upgrades.Added, name)
			live = append(live, name)
		} else {
			drop(r.Intn(len(live)))
		}
	}
	// the SDK deletes, then renames, then adds: a rename or deletion
	// picks none of the stores this version creates
	old := func() int {
		for {
			i := r.Intn(len(live))
			if live[i][1:] != fmt.Sprint(v) {
				return i
			}
		}
	}
	if v%17 == 0 && len(live) > 2 {
		i := old()
		name := fmt.Sprintf("r%d", v)
		e.Upgrades.Renamed = append(e.Upgrades.Renamed, wal.RenamedStore{OldName: live[i], NewName: name})
		live[i] = name
	}
	if v%23 == 0 && len(live) > 3 {
		drop(old())
	}
	for _, name := range live {
		if r.Intn(4) == 0 {
			continue
		}
		cs := wal.ChangeSet{Name: name}
		for i, n := 0, 5+r.Intn(40); i < n; i++ {
			k := make([]byte, 8)
			binary.BigEndian.PutUint64(k, uint64(r.Intn(1000)))
			if r.Intn(4) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k})
				continue
			}
			val := make([]byte, r.Intn(200))
			r.Read(val)
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: val})
		}
		e.ChangeSets = append(e.ChangeSets, cs)
	}
	return e
}

// crashVariedOptions are the options of one child of the varied crash
// test, passed to it in the environment.
type crashVariedOptions struct {
	interval, keep, async int
	maxLogged             int  // SetMaxLoggedEntry if not 0
	rewrites              bool // RewriteSnapshot after some commits
}

func (o crashVariedOptions) String() string {
	return fmt.Sprintf("%d,%d,%d,%d,%v", o.interval, o.keep, o.async, o.maxLogged, o.rewrites)
}

// TestCrashVariedChild is the process that the varied crash test kills.
// It commits crashVariedEntry blocks forever, with store upgrades, and
// prints each acknowledged version.
func TestCrashVariedChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_CRASHV_DIR")
	if dir == "" {
		t.Skip("only run as the varied crash test's child process")
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(2)
	}
	seed, _ := strconv.ParseInt(os.Getenv("MEMIAVL_CRASHV_SEED"), 10, 64)
	var o crashVariedOptions
	if _, err := fmt.Sscanf(os.Getenv("MEMIAVL_CRASHV_OPTS"), "%d,%d,%d,%d,%t", &o.interval, &o.keep, &o.async, &o.maxLogged, &o.rewrites); err != nil {
		fail(fmt.Errorf("options: %w", err))
	}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: int64(o.interval),
		SnapshotKeepRecent: o.keep, AsyncCommitBuffer: o.async})
	if err != nil {
		fail(err)
	}
	if o.maxLogged > 0 {
		SetMaxLoggedEntry(db, o.maxLogged)
	}
	for {
		v := db.WorkingVersion()
		e := crashVariedEntry(seed, v, db.StoreNames())
		if err := db.ApplyUpgrades(e.Upgrades); err != nil {
			fail(err)
		}
		if err := db.ApplyChangeSets(e.ChangeSets); err != nil {
			fail(err)
		}
		info, err := db.Commit()
		if err != nil {
			fail(err)
		}
		fmt.Printf("acked %d %X\n", info.Version, info.Hash())
		if o.rewrites && v%13 == 5 {
			// an offline-style rewrite on the commit path, so that
			// kills land in its write, switch and pruning too
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				fail(err)
			}
		}
	}
}

// TestCrashRecoveryVaried kills children that commit with store upgrades,
// asynchronous logs, background and synchronous snapshot rewrites, random
// snapshot intervals and retention, and versions committed by a snapshot
// (a bound on log entries that the larger blocks pass), and checks every reopen against
// the reference. Between some rounds it rolls the database back to an
// earlier version (TargetVersion with Rollback), from which the next child
// commits the same blocks again.
func TestCrashRecoveryVaried(t *testing.T) {
	if os.Getenv("MEMIAVL_CRASHV_DIR") != "" {
		t.Skip("child")
	}
	r := testutil.Rand(t)
	seed := r.Int63()
	dir := t.TempDir()
	rounds := crashSize(40, 20, 6)
	ref := &crashRef{entry: func(v int64, stores []string) wal.Entry { return crashVariedEntry(seed, v, stores) },
		past: map[int64]map[string]*memiavl.Tree{}}
	ref.reset(crashStores)
	lastAcked, rollbacks := int64(0), 0
	for round := 0; round < rounds; round++ {
		o := crashVariedOptions{interval: []int{2, 3, 5, 8}[r.Intn(4)], keep: r.Intn(3),
			async: []int{0, 0, 1, 3}[r.Intn(4)], maxLogged: []int{0, 0, 16 << 10}[r.Intn(3)], rewrites: r.Intn(2) == 0}
		acked := killChild(t, r, "TestCrashVariedChild", "MEMIAVL_CRASHV_DIR="+dir,
			fmt.Sprintf("MEMIAVL_CRASHV_SEED=%d", seed), "MEMIAVL_CRASHV_OPTS="+o.String())
		lastAcked = max(lastAcked, acked)
		// a process crash loses at most the queued and in-flight entries
		// of an asynchronous log (package wal)
		durable := lastAcked
		if o.async > 0 {
			durable -= int64(2*o.async + 1)
		}

		db, err := Open(dir, Options{})
		if errors.Is(err, ErrNotFound) && lastAcked == 0 {
			continue // killed before the database was created
		}
		if err != nil {
			t.Fatalf("round %d (options %v): reopen after kill: %v", round, o, err)
		}
		v := checkRecovered(t, db, durable, ref)
		closeVerified(t, db, dir)
		lastAcked = v

		if round%3 != 2 || v < 3 {
			continue
		}
		target := v - 1 - int64(r.Intn(int(min(v-1, 15))))
		db, err = Open(dir, Options{TargetVersion: target, Rollback: true})
		if errors.Is(err, ErrVersion) {
			t.Logf("round %d: no kept snapshot at or below %d (at %d)", round, target, v)
			continue
		}
		if err != nil {
			t.Fatalf("round %d: rollback from %d to %d: %v", round, v, target, err)
		}
		ref.rollback(t, target)
		if got := checkRecovered(t, db, target, ref); got != target {
			t.Fatalf("rolled back to %d, at %d", target, got)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// the rollback holds on a reopen
		if db, err = Open(dir, Options{}); err != nil {
			t.Fatal(err)
		}
		if got := checkRecovered(t, db, target, ref); got != target {
			t.Fatalf("reopened at %d after a rollback to %d", got, target)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		lastAcked = target
		rollbacks++
	}
	t.Logf("%d kills, %d rollbacks, final version %d, stores %q", rounds, rollbacks, ref.version, ref.stores())
}
