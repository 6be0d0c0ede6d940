package main

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/internal/workload"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// crCrash2Calls are the calls TestCLICrashRewriteVersion kills
// rewrite-snapshot at.
var crCrash2Calls = []string{"renameat", "fsync", "unlinkat", "ftruncate"}

// crVersionHashes returns the app hash (hex) of every version from..to
// that dir serves, through read-only opens at each as a target; versions it
// refuses are left out.
func crVersionHashes(t *testing.T, dir string, from, to int64) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for v := from; v <= to; v++ {
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v, SnapshotInterval: -1,
			ViewCacheSize: -1, OpenCheck: multitree.OpenCheckNone})
		if err != nil {
			continue
		}
		if db.Version() != v {
			t.Fatalf("open at target %d: version %d", v, db.Version())
		}
		out[v] = hex.EncodeToString(db.LastCommitInfo().Hash())
		_ = db.Close()
	}
	return out
}

// crWritableState opens dir as its writer (as a node would after the
// crash), returns its version and app hash, and closes it.
func crWritableState(t *testing.T, dir, where string) (int64, string) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatalf("%s: writable open: %v", where, err)
	}
	v, h := db.Version(), hex.EncodeToString(db.LastCommitInfo().Hash())
	if err := db.Close(); err != nil {
		t.Fatalf("%s: close of the writable open: %v", where, err)
	}
	return v, h
}

// crCommitNext has a writer commit makeDB's next block to dir and returns
// the version and app hash (hex) it committed.
func crCommitNext(t *testing.T, dir, where string) (int64, string) {
	t.Helper()
	gen, err := workload.New(workload.Config{Seed: 3, Scale: 0.02}) // makeDB's
	if err != nil {
		t.Fatal(err)
	}
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatalf("%s: writable open: %v", where, err)
	}
	defer db.Close()
	if err := db.ApplyChangeSets(gen.Block(db.WorkingVersion())); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatalf("%s: commit: %v", where, err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("%s: close: %v", where, err)
	}
	return info.Version, hex.EncodeToString(info.Hash())
}

// TestCLICrashRewriteVersion kills 'rewrite-snapshot --version V', with and
// without --rollback, where V has no kept snapshot (the open replays the
// log from an older snapshot), at each renameat, fsync, unlinkat and
// ftruncate it makes. The database: version 30, snapshots 0, 10 and 20
// (current 20), the log from version 1. After each kill the directory must
// open read-only and as a writer and pass Verify, at a committed state:
// with --rollback, version 30 with its app hash or V with V's (all or
// nothing); without, version 30 unchanged. Every version the database
// served before and still serves once the command finished (what it keeps
// by --keep-recent) must be served after the kill with its app hash, and no
// version may be served with another hash. Running the command again ends
// at the final state (or, killed after V's snapshot was in place but before
// it became current, leaves it as a kept snapshot, as documented). Under -short only the first two points of each call and every
// 11th after them are tried.
func TestCLICrashRewriteVersion(t *testing.T) { crRewriteSweep(t, false) }

// TestCLICrashRewriteVersionRollback is TestCLICrashRewriteVersion with
// --rollback.
func TestCLICrashRewriteVersionRollback(t *testing.T) { crRewriteSweep(t, true) }

func crRewriteSweep(t *testing.T, rollback bool) {
	strace := testutil.Strace(t)
	step := 1
	if testing.Short() {
		step = 11
	}
	src := t.TempDir()
	hash30 := makeDB(t, src, 0.02, 30, 10, 20)
	before := crVersionHashes(t, src, 1, 30)
	for v := int64(10); v <= 30; v++ {
		if before[v] == "" {
			t.Fatalf("the source does not serve version %d", v)
		}
	}
	if before[30] != hash30 {
		t.Fatalf("version 30: %s, want %s", before[30], hash30)
	}
	// the app hash of makeDB's block 31
	next := filepath.Join(t.TempDir(), "db")
	copyDir(t, src, next)
	if v, h := crCommitNext(t, next, "block 31"); v != 31 {
		t.Fatalf("committed %d", v)
	} else {
		before[31] = h
	}
	type op struct {
		name     string
		version  int64
		rollback bool
	}
	ops := []op{
		{"older-than-current", 15, false},
		{"after-current", 25, false},
		{"rollback-older-than-current", 15, true},
		{"rollback-after-current", 25, true},
	}
	kills := 0
	for _, o := range ops {
		if o.rollback != rollback {
			continue
		}
		args := func(dir string) []string {
			a := []string{"rewrite-snapshot", "--progress", "none", "--version", fmt.Sprint(o.version)}
			if o.rollback {
				a = append(a, "--rollback")
			}
			return append(a, dir)
		}
		latest := int64(30)
		if o.rollback {
			latest = o.version
		}
		// the command run to the end: what it keeps
		ref := filepath.Join(t.TempDir(), "db")
		copyDir(t, src, ref)
		mustCLI(t, args(ref)...)
		kept, err := multitree.SnapshotVersions(ref)
		if err != nil {
			t.Fatal(err)
		}
		if res := dumpOf(t, ref, 0); res.Version != latest || res.AppHash != before[latest] || res.SnapshotVersion != o.version {
			t.Fatalf("%s: the command run to the end left %+v", o.name, res)
		}
		oldestKept := kept[0]
		if oldestKept == 0 {
			oldestKept = 1
		}
		t.Run(o.name, func(t *testing.T) {
			for i, call := range crCrash2Calls {
				// under -short the first two points of each call, then
				// every step-th
				n := 1
				for ; ; n++ {
					if n > 2 && n%step != i%step {
						continue
					}
					var dir string
					fresh := func() []string {
						dir = filepath.Join(t.TempDir(), "db")
						copyDir(t, src, dir)
						return args(dir)
					}
					if !cliKilledAt(t, strace, call, n, fresh) {
						break
					}
					kills++
					where := fmt.Sprintf("%s: killed at %s #%d", o.name, call, n)
					crCheckAfterRewriteKill(t, where, dir, o.rollback, o.version, oldestKept, before)
					// running the command again finishes it
					if code, out, errs := cli(t, args(dir)...); code != 0 {
						t.Fatalf("%s: rerun: exit %d\n%s%s", where, code, out, errs)
					}
					res := dumpOf(t, dir, 0)
					if res.Version != latest || res.AppHash != before[latest] {
						t.Fatalf("%s: after the rerun: %+v", where, res)
					}
					if res.SnapshotVersion != o.version {
						// a kill between the install of snapshot V and
						// the switch of current leaves V as a kept
						// snapshot, which a rerun leaves as it is ("If V
						// already has a kept snapshot, nothing is
						// written ... the database is left as it is")
						if o.rollback || !slices.Contains(res.Snapshots, o.version) {
							t.Fatalf("%s: after the rerun: %+v", where, res)
						}
						t.Logf("%s: the rerun left snapshot %d current, %d beside it, as for a kept snapshot", where, res.SnapshotVersion, o.version)
					}
					if _, err := multitree.Verify(dir); err != nil {
						t.Fatalf("%s: verify after the rerun: %v", where, err)
					}
					// a node goes on from there
					if v, h := crCommitNext(t, dir, where); v != latest+1 || h != before[v] {
						t.Fatalf("%s: the next commit after the rerun: version %d, app hash %s, want %d, %s", where, v, h, latest+1, before[latest+1])
					}
				}
				if n == 1 && (call != "ftruncate" || o.rollback) {
					t.Errorf("%s never called %s", o.name, call)
				}
			}
		})
	}
	t.Logf("%d kills", kills)
}

// crCheckAfterRewriteKill checks the directory a killed rewrite-snapshot
// --version v left (see TestCLICrashRewriteVersion).
func crCheckAfterRewriteKill(t *testing.T, where, dir string, rollback bool, v, oldestKept int64, before map[int64]string) {
	t.Helper()
	allowed := []int64{30}
	if rollback {
		allowed = append(allowed, v)
	}
	latest, err := multitree.LatestVersion(dir)
	if err != nil {
		t.Fatalf("%s: LatestVersion: %v", where, err)
	}
	got, hash := dbState(t, dir)
	if latest != got {
		t.Fatalf("%s: LatestVersion %d, a read-only open %d", where, latest, got)
	}
	if !slices.Contains(allowed, got) || hash != before[got] {
		t.Fatalf("%s: read-only open: version %d, app hash %s; allowed versions %v with their hashes", where, got, hash, allowed)
	}
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("%s: verify: %v", where, err)
	}
	served := crVersionHashes(t, dir, 1, got)
	for w := oldestKept; w <= got; w++ {
		if served[w] != before[w] {
			t.Errorf("%s: version %d is served with app hash %q, before %q", where, w, served[w], before[w])
		}
	}
	for w, h := range served {
		if h != before[w] {
			t.Errorf("%s: version %d is served with app hash %s, before %s", where, w, h, before[w])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// the writer's open (a node restarted) lands on the same state, and
	// leaves a database that verifies and reads the same
	if wv, wh := crWritableState(t, dir, where); wv != got || wh != hash {
		t.Fatalf("%s: writable open: version %d, app hash %s; the read-only open saw %d, %s", where, wv, wh, got, hash)
	}
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("%s: verify after the writable open: %v", where, err)
	}
	if again, h := dbState(t, dir); again != got || h != hash {
		t.Fatalf("%s: after the writable open: version %d, app hash %s, before it %d, %s", where, again, h, got, hash)
	}
	served = crVersionHashes(t, dir, 1, got)
	for w := oldestKept; w <= got; w++ {
		if served[w] != before[w] {
			t.Fatalf("%s: after the writable open, version %d is served with app hash %q, before %q", where, w, served[w], before[w])
		}
	}
}
