package multitree

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// resStores names n stores.
func resStores(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("store%03d", i)
	}
	return s
}

// resFill commits a version that writes two keys into every store but
// each fifth one, which stays empty (an empty store maps no file).
func resFill(t *testing.T, db *DB, stores []string, version int) {
	t.Helper()
	var css []wal.ChangeSet
	for i, s := range stores {
		if i%5 == 4 {
			continue
		}
		css = append(css, wal.ChangeSet{Name: s, Pairs: []wal.KVPair{
			{Key: []byte(fmt.Sprintf("k%d", version%7)), Value: []byte(fmt.Sprintf("v%d", version))},
			{Key: []byte("fixed"), Value: []byte("x")},
		}})
	}
	if err := db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
}

func resFDs(t *testing.T) int {
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(e)
}

// resMaps counts the process's mappings of files under dir.
func resMaps(t *testing.T, dir string) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, dir+"/") {
			n++
		}
	}
	return n
}

// TestOpenCheckDescriptorsPerStore: Open's checksum check (the default
// OpenCheckBackground, and OpenCheckSync) holds the files of one store open
// at a time, as the rest of the database's work holds a bounded number of
// descriptors (mapping a snapshot one at a time, a rewrite at most
// syncGroupMaxOpen): under a descriptor limit that lets a database of 200
// stores open without the check and write a snapshot, the same Open with
// the check succeeds too (it opened all 5 files of every store at once
// before, and failed with EMFILE).
func TestOpenCheckDescriptorsPerStore(t *testing.T) {
	dir := t.TempDir()
	stores := resStores(200)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 3; v++ {
		resFill(t, db, stores, v)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
	}()
	base := resFDs(t)
	lim := syscall.Rlimit{Cur: uint64(base + 320), Max: old.Max}
	if lim.Cur > old.Cur {
		t.Skipf("descriptor limit %d already below %d", old.Cur, lim.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}

	// the database's own work fits the limit: an open without the check,
	// commits and a rewrite of every store's snapshot
	db, err = Open(dir, Options{OpenCheck: OpenCheckNone, SnapshotInterval: -1})
	if err != nil {
		t.Fatalf("OpenCheckNone under a limit of %d descriptors: %v", lim.Cur, err)
	}
	resFill(t, db, stores, 4)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatalf("rewrite under a limit of %d descriptors: %v", lim.Cur, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, oc := range []OpenCheck{OpenCheckBackground, OpenCheckSync} {
		g0 := runtime.NumGoroutine()
		db, err := Open(dir, Options{OpenCheck: oc, SnapshotInterval: -1})
		if err != nil {
			// and a failed Open leaves nothing behind
			if n := resFDs(t); n > base {
				t.Errorf("OpenCheck %v: %d descriptors after the failed Open, %d before", oc, n, base)
			}
			if m := resMaps(t, dir); m != 0 {
				t.Errorf("OpenCheck %v: %d mappings after the failed Open", oc, m)
			}
			for i := 0; runtime.NumGoroutine() > g0 && i < 500; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > g0 {
				t.Errorf("OpenCheck %v: %d goroutines after the failed Open, %d before", oc, n, g0)
			}
			t.Errorf("OpenCheck %v: Open of 200 stores under a limit of %d descriptors (enough for an open without the check and a rewrite): %v", oc, lim.Cur, err)
			continue
		}
		if err := db.WaitOpenCheck(context.Background()); err != nil {
			t.Errorf("OpenCheck %v: check: %v", oc, err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("OpenCheck %v: Close: %v", oc, err)
		}
	}
}

// TestViewsShareMappedSnapshot: a historical view rebuilt from a snapshot
// the database maps already shares that mapping instead of mapping every
// file again (5 memory maps per non-empty store): the cached views of 8
// versions rebuilt from the writer's snapshot add no mapping of its files
// (they added 8 copies before, growing with stores x views towards
// vm.max_map_count).
func TestViewsShareMappedSnapshot(t *testing.T) {
	dir := t.TempDir()
	stores := resStores(20)
	const cached = 8
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1, ViewCacheSize: cached})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	resFill(t, db, stores, 1)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.unmapper.wg.Wait()
	for v := 2; v <= cached+4; v++ {
		resFill(t, db, stores, v)
	}
	one := resMaps(t, dir) // the writer's mapping of snapshot 1
	if one == 0 {
		t.Fatal("no mapping of the snapshot")
	}
	for v := int64(2); v < 2+cached; v++ {
		vw, err := db.ViewAt(v) // rebuilt from snapshot 1 and the log
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vw.Get(stores[0], []byte("fixed")); err != nil {
			t.Fatal(err)
		}
		vw.Release()
	}
	if got := resMaps(t, dir); got != one {
		t.Errorf("%d views of versions rebuilt from snapshot %d (the one the database maps, %d mappings for %d stores) hold %d mappings of its files: %.0f copies of the snapshot",
			cached, db.SnapshotVersion(), one, len(stores), got, float64(got)/float64(one))
	}
}
