package multitree

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// steadySample is what TestSteadyStateStaysBounded reads after a switch to
// a background rewrite.
type steadySample struct {
	heap        uint64 // live heap after a collection
	mappings    int    // mappings of files under the database directory
	generations int    // snapshot directories with a mapped file
	fds         int    // open descriptors of files under it
	entries     int    // snapshot directories and log segments on disk
}

// TestSteadyStateStaysBounded commits a workload that overwrites a fixed
// set of keys, so that the state does not grow, through many background
// rewrites, and reads after each switch the live heap, the mappings and
// descriptors of the database's files and its snapshot directories and log
// segments. None may grow with the number of rewrites: a generation, a
// rebaser, a tree or a log segment kept after its switch would grow one of
// them by a step per rewrite.
//
// With settle, each rewrite is let finish before the next commit, which
// switches to it; a sample then sees the database at rest, and everything
// but the heap must stay at most what it was over the first rewrites.
// Without, rewrites run beside the commits and catch up: a sample may see
// the next rewrite's snapshot mapped, and the mapped snapshots must be at
// most two.
func TestSteadyStateStaysBounded(t *testing.T) {
	for _, settle := range []bool{true, false} {
		t.Run(fmt.Sprintf("settle=%v", settle), func(t *testing.T) { testSteadyState(t, settle) })
	}
}

func testSteadyState(t *testing.T, settle bool) {
	r := testutil.Rand(t)
	keys, perVersion, switches := 3000, 150, 36
	if testing.Short() {
		keys, perVersion, switches = 1000, 60, 18
	}
	dir := t.TempDir()
	stores := []string{"a", "b", "c"}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := func() []byte {
		v := make([]byte, 64)
		r.Read(v)
		return v
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	// commit commits a version in which every store gets pairs()
	commit := func(pairs func() []wal.KVPair) {
		t.Helper()
		css := make([]wal.ChangeSet, 0, len(stores))
		for _, s := range stores {
			css = append(css, wal.ChangeSet{Name: s, Pairs: pairs()})
		}
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit(func() (ps []wal.KVPair) {
		for i := 0; i < keys; i++ {
			ps = append(ps, wal.KVPair{Key: key(i), Value: value()})
		}
		return ps
	})

	var samples []steadySample
	snap := db.SnapshotVersion()
	for v := 2; len(samples) < switches; v++ {
		if v > 100*switches {
			t.Fatalf("%d switches in %d versions", len(samples), v)
		}
		commit(func() (ps []wal.KVPair) {
			for j := 0; j < perVersion; j++ {
				i := r.Intn(keys)
				if j%10 == 0 { // a delete, and the key back in a later version
					ps = append(ps, wal.KVPair{Key: key(i), Delete: true})
					continue
				}
				ps = append(ps, wal.KVPair{Key: key(i), Value: value()})
			}
			return ps
		})
		// A rewrite that started is let finish before the next commit,
		// which switches to it: each sample then sees one generation,
		// none being written or caught up.
		// Without settle a rewrite runs beside the commits, but is let
		// finish once it is 4 intervals behind, so that the switches
		// come however slow the machine's rewrites are against its
		// commits.
		if settle {
			waitRewrite(db)
		} else {
			WaitRewriteBehind(db, 32)
		}
		if db.SnapshotVersion() == snap {
			continue
		}
		snap = db.SnapshotVersion()
		waitForPrune(t, db)
		db.unmapper.wg.Wait()
		samples = append(samples, readSteadySample(t, dir))
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stores {
		if err := view.Tree(name).Check(); err != nil {
			t.Fatalf("store %s: %v", name, err)
		}
		if n := view.Tree(name).Size(); n > int64(keys) || n < int64(keys)*8/10 {
			t.Fatalf("store %s holds %d keys of %d", name, n, keys)
		}
	}
	view.Release()

	// the first third (after two rewrites that reach the steady state)
	// against the last third
	third := len(samples) / 3
	early, late := samples[2:2+third], samples[len(samples)-third:]
	maxOf := func(ss []steadySample, f func(steadySample) uint64) uint64 {
		m := uint64(0)
		for _, s := range ss {
			m = max(m, f(s))
		}
		return m
	}
	for _, m := range []struct {
		name  string
		f     func(steadySample) uint64
		slack func(uint64) uint64
	}{
		{"live heap, bytes", func(s steadySample) uint64 { return s.heap }, func(e uint64) uint64 {
			if settle {
				return e/2 + 1<<20
			}
			return e + 1<<20 // a sample may hold a catch-up's copies
		}},
		{"mappings of the database's files", func(s steadySample) uint64 { return uint64(s.mappings) }, func(uint64) uint64 { return 0 }},
		{"open descriptors of the database's files", func(s steadySample) uint64 { return uint64(s.fds) }, func(uint64) uint64 { return 0 }},
		{"snapshots and log segments on disk", func(s steadySample) uint64 { return uint64(s.entries) }, func(uint64) uint64 { return 0 }},
	} {
		e, l := maxOf(early, m.f), maxOf(late, m.f)
		t.Logf("%s: at most %d over switches 3-%d, %d over the last %d", m.name, e, 2+third, l, third)
		if e == 0 && m.name != "live heap, bytes" {
			t.Errorf("%s: none counted: the sample does not see the database", m.name)
		}
		if !settle && m.slack(e) == 0 {
			continue // a rewrite may be in flight: see generations below
		}
		if l > e+m.slack(e) {
			t.Errorf("%s grows with the rewrites: %d over the first switches, %d over the last", m.name, e, l)
		}
	}
	for i, s := range samples {
		// unsettled, the replaced generation may still be unmapping in the
		// background while the next rewrite's snapshot is mapped for its
		// catch-up: three at most
		if s.generations < 1 || s.generations > 3 || settle && s.generations != 1 {
			t.Errorf("switch %d: %d snapshots mapped", i+1, s.generations)
		}
	}
}

// waitForPrune waits for a prune the last Commit may have started.
func waitForPrune(t *testing.T, db *DB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		db.mu.Lock()
		busy := db.mu.pruning
		db.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the prune does not end")
		}
		time.Sleep(time.Millisecond)
	}
}

// readSteadySample collects and reads the process's live heap, and counts
// the mappings and descriptors of files under dir and dir's snapshots and
// log segments.
func readSteadySample(t *testing.T, dir string) steadySample {
	t.Helper()
	runtime.GC()
	runtime.GC() // the first may leave finalizers' objects for the second
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := steadySample{heap: ms.HeapAlloc}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	mapped := map[string]bool{}
	for _, l := range strings.Split(string(maps), "\n") {
		if i := strings.Index(l, dir+string(filepath.Separator)); i >= 0 {
			s.mappings++
			rel := strings.TrimPrefix(l[i:], dir+string(filepath.Separator))
			mapped[strings.SplitN(rel, string(filepath.Separator), 2)[0]] = true
		}
	}
	s.generations = len(mapped)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			s.fds++
		}
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	s.entries = len(snaps) + len(segs)
	return s
}
