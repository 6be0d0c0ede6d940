package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/time/rate"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestSwitchRefusesDifferentRewrite: the Commit that would switch to
// a finished background rewrite compares the rewritten trees with the live
// ones and, when they differ, keeps the live trees and reports the rewrite
// as failed (ErrRewrite) instead of serving the rewrite's state. The
// rewrite's tree is replaced after its write by a tree of the same version
// holding another key, as a bug in the write or the catch-up would leave it.
func TestSwitchRefusesDifferentRewrite(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 2, RewriteConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	jobs := make(chan *rewriteJob, 1)
	db.afterWrite = func(ctx context.Context, v int64) {
		db.mu.Lock()
		job := db.mu.rewrite
		db.mu.Unlock()
		fake, err := memiavl.New(memiavl.Options{InitialVersion: v})
		if err == nil {
			_, err = fake.Set([]byte("bogus"), []byte("x"))
		}
		if err == nil {
			_, _, err = fake.SaveVersion()
		}
		if err != nil {
			panic(err)
		}
		job.res.trees["a"] = fake // the job's own, until it is done
		jobs <- job
	}
	commit := func(k string) ([]byte, error) {
		t.Helper()
		if err := db.Set("a", []byte(k), []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if info == nil {
			t.Fatalf("commit of %s: %v", k, err)
		}
		return info.Hash(), err
	}
	for _, k := range []string{"k1", "k2"} { // version 2 starts the rewrite
		if _, err := commit(k); err != nil {
			t.Fatal(err)
		}
	}
	<-(<-jobs).done
	_, err = commit("k3") // switches, or refuses to
	if !errors.Is(err, ErrRewrite) {
		t.Fatalf("commit after a rewrite that differs from the live state: %v, want an error wrapping ErrRewrite", err)
	}
	if got := db.SnapshotVersion(); got != 0 {
		t.Errorf("the working trees switched to the rewrite's snapshot %d", got)
	}
	vw, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer vw.Release()
	for k, want := range map[string]string{"bogus": "", "k1": "v-k1", "k2": "v-k2", "k3": "v-k3"} {
		if got, err := vw.Get("a", []byte(k)); err != nil || string(got) != want {
			t.Errorf("version 3 reads %s = %q, %v; want %q", k, got, err, want)
		}
	}
}

// TestRewritePacedAtRate: a background rewrite's writes go through a
// limiter of exactly RewriteRateLimit bytes per second.
func TestRewritePacedAtRate(t *testing.T) {
	const limit = 3 << 20
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 1, RewriteRateLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := make(chan snapshot.Limiter, 1)
	db.wrapLimiter = func(l snapshot.Limiter) snapshot.Limiter {
		select {
		case got <- l:
		default:
		}
		return l
	}
	fillStore(t, db, 100, 10) // version 1 starts a rewrite
	waitRewrite(db)
	var l snapshot.Limiter
	select {
	case l = <-got:
	default:
		t.Fatal("the rewrite was not paced")
	}
	rl, ok := l.(*rate.Limiter)
	if !ok {
		t.Fatalf("limiter %T", l)
	}
	if rl.Limit() != rate.Limit(limit) {
		t.Errorf("rewrite paced at %v bytes per second, want %d", rl.Limit(), limit)
	}
}

// TestVetKeepsCurrentOpenable: when a rewrite finds a damaged
// snapshot directory of its version that current names, it points current
// at the snapshot the trees read from before it removes the directory, so
// that a crash before the new one is written leaves a database that opens
// at its latest version.
func TestVetKeepsCurrentOpenable(t *testing.T) {
	dir := t.TempDir()
	writeVetFixture(t, dir, 0)
	commit := func(db *DB, v int64) { t.Helper(); commitVetValue(t, db, v, 0) }
	flipInFile(t, filepath.Join(dir, snapshotDirName(4), treeDirName("a"), "kvs"), []byte("value-4"), []byte("valuX-4"))

	db, err := Open(dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 5, TargetVersion: 3, OpenCheck: OpenCheckSync})
	if err != nil {
		t.Fatal(err)
	}
	commit(db, 4) // again, as the log holds it
	// what a rewrite of version 4 does first; the process dies right after
	db.mu.Lock()
	err = db.vetSnapshotDir(4, db.mu.gen.version, db.mu.trees)
	db.mu.Unlock()
	if err != nil {
		t.Fatalf("vet of the damaged snapshot 4: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(4))); !os.IsNotExist(err) {
		t.Fatalf("damaged snapshot 4 kept: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after the vet removed snapshot 4: %v", err)
	}
	defer db.Close()
	if db.Version() != 4 {
		t.Fatalf("opened at %d, want 4", db.Version())
	}
	if got, err := db.Get("a", []byte("k")); err != nil || string(got) != "value-4" {
		t.Fatalf("k = %q, %v; want value-4", got, err)
	}
}

// TestCloseReportsFailedRewrite: a background rewrite that failed
// with no Commit after it to report the failure is reported by Close.
func TestCloseReportsFailedRewrite(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 1, RewriteRateLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected rewrite failure")
	db.wrapLimiter = func(snapshot.Limiter) snapshot.Limiter { return failingLimiter{injected} }
	fillStore(t, db, 500, 100) // version 1 starts the rewrite, which fails
	waitRewrite(db)
	if err := db.Close(); !errors.Is(err, ErrRewrite) || !errors.Is(err, injected) {
		t.Fatalf("Close after a failed rewrite: %v, want an error wrapping ErrRewrite and the failure", err)
	}
}

// TestWorkingCommitInfoVersion: WorkingCommitInfo is the commit info
// the next Commit produces, version included (the initial version for the
// first commit).
func TestWorkingCommitInfoVersion(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, InitialVersion: 5, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for want := int64(5); want <= 6; want++ {
		if err := db.Set("a", []byte("k"), []byte(fmt.Sprint(want))); err != nil {
			t.Fatal(err)
		}
		w := db.WorkingCommitInfo()
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if w.Version != want || info.Version != want {
			t.Fatalf("working info of version %d, commit %d; want %d", w.Version, info.Version, want)
		}
		if len(w.StoreInfos) != len(info.StoreInfos) {
			t.Fatalf("working info has %d stores, commit %d", len(w.StoreInfos), len(info.StoreInfos))
		}
		for i, si := range w.StoreInfos {
			ci := info.StoreInfos[i]
			if si.Name != ci.Name || si.CommitId.Version != ci.CommitId.Version || !bytes.Equal(si.CommitId.Hash, ci.CommitId.Hash) {
				t.Errorf("working store info %v, committed %v", si, ci)
			}
		}
	}
}

// TestRefusedUpgradeChangesNothing: store upgrades that fail part way
// through (a deletion, then an addition of an invalid name) change nothing:
// the deleted store stays, in the working state and after a reopen alike.
func TestRefusedUpgradeChangesNothing(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Deleted: []string{"a"}, Added: []string{""}}); err == nil {
		t.Fatal("upgrades adding a store of an empty name accepted")
	}
	if got := fmt.Sprint(db.StoreNames()); got != "[a b]" {
		t.Fatalf("stores after the refused upgrades: %s, want [a b]", got)
	}
	if got, err := db.Get("a", []byte("k")); err != nil || string(got) != "v" {
		t.Fatalf("a/k after the refused upgrades: %q, %v", got, err)
	}
	if err := db.Set("b", []byte("k"), []byte("w")); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(db.StoreNames()); got != "[a b]" || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
		t.Fatalf("reopened with stores %s, the hash committed: %v", got, bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()))
	}
}

// TestViewCacheHoldsItsSize: ViewAt keeps ViewCacheSize rebuilt
// versions: with a cache of 2, going back and forth between two old
// versions rebuilds each once.
func TestViewCacheHoldsItsSize(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, ViewCacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 4; i++ {
		fillStore(t, db, 3, 8)
	}
	rebuilt := map[int64]int{}
	db.afterRebuild = func(v int64) { rebuilt[v]++ }
	for i := 0; i < 3; i++ {
		for _, v := range []int64{1, 2} {
			vw, err := db.ViewAt(v)
			if err != nil {
				t.Fatal(err)
			}
			if vw.Version() != v {
				t.Fatalf("ViewAt(%d) is of version %d", v, vw.Version())
			}
			vw.Release()
		}
	}
	if rebuilt[1] != 1 || rebuilt[2] != 1 {
		t.Fatalf("rebuilds %v, want each version once (a cache of 2)", rebuilt)
	}
}

// TestViewAtKeptSnapshotVersion: the version of a kept older
// snapshot is served from that snapshot, once the snapshots and the log
// before it are pruned.
func TestViewAtKeptSnapshotVersion(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for v := int64(1); v <= 5; v++ {
		if err := db.Set("a", []byte("k"), []byte(fmt.Sprint("v", v))); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[v] = info.Hash()
		if v == 2 || v == 4 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil { // waits for the prune
		t.Fatal(err)
	}
	if got, err := listSnapshots(dir); err != nil || fmt.Sprint(got) != "[2 4]" {
		t.Fatalf("snapshots %v (%v), want [2 4]", got, err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v := int64(2); v <= 4; v++ {
		vw, err := db.ViewAt(v)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", v, err)
		}
		if !bytes.Equal(vw.CommitInfo().Hash(), hashes[v]) {
			t.Errorf("ViewAt(%d) hash differs from the committed one", v)
		}
		if got, err := vw.Get("a", []byte("k")); err != nil || string(got) != fmt.Sprint("v", v) {
			t.Errorf("ViewAt(%d) reads %q, %v", v, got, err)
		}
		vw.Release()
	}
}
