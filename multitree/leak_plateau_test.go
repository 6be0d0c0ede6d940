package multitree

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// leakSample is the process's resources as far as one database dir is
// concerned.
type leakSample struct {
	goroutines int
	fdsAll     int      // every open descriptor of the process
	fdsDir     []string // descriptors of files under dir
	maps       int      // mappings of files under dir
	deleted    int      // of those, of deleted files
	mapDirs    []string // top-level entries of dir with a mapping
	entries    []string // dir's entries, and wal's
	heap       uint64
}

func (s leakSample) String() string {
	return fmt.Sprintf("goroutines %d, fds %d (dir %d), maps %d (deleted %d) of %v, entries %d %v, heap %d KiB",
		s.goroutines, s.fdsAll, len(s.fdsDir), s.maps, s.deleted, s.mapDirs, len(s.entries), s.entries, s.heap>>10)
}

func leakRead(t *testing.T, dir string, heap bool) leakSample {
	t.Helper()
	var s leakSample
	if heap {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s.heap = ms.HeapAlloc
	}
	s.goroutines = runtime.NumGoroutine()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	md := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		i := strings.Index(l, dir+"/")
		if i < 0 {
			continue
		}
		s.maps++
		if strings.HasSuffix(l, "(deleted)") {
			s.deleted++
		}
		rel := strings.TrimPrefix(l[i:], dir+"/")
		md[strings.SplitN(rel, "/", 2)[0]] = true
	}
	for d := range md {
		s.mapDirs = append(s.mapDirs, d)
	}
	sort.Strings(s.mapDirs)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	s.fdsAll = len(fds)
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
			s.fdsDir = append(s.fdsDir, strings.TrimPrefix(target, dir))
		}
	}
	sort.Strings(s.fdsDir)
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			s.entries = append(s.entries, e.Name())
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, walDirName)); err == nil {
		for _, e := range ents {
			s.entries = append(s.entries, "wal/"+e.Name())
		}
	}
	return s
}

// leakDiskBounded checks entries (see leakRead): the lock, current,
// first, wal, at most keep+1 snapshot directories, and log segments none of
// which starts at or before the oldest kept snapshot's version (the prune
// truncates the log before the oldest snapshot + 1, and every snapshot rolls
// the log at its version + 1).
func leakDiskBounded(entries []string, keep int) error {
	var snaps []int64
	var segs []int64
	for _, e := range entries {
		var v int64
		switch {
		case e == lockFileName || e == currentFileName || e == firstFileName || e == walDirName:
		case strings.HasPrefix(e, "snapshot-") && !strings.Contains(e, ".tmp"):
			if _, err := fmt.Sscanf(e, "snapshot-%d", &v); err != nil {
				return fmt.Errorf("entry %s: %v", e, err)
			}
			snaps = append(snaps, v)
		case strings.HasPrefix(e, "wal/") && strings.HasSuffix(e, ".wal"):
			if _, err := fmt.Sscanf(strings.TrimPrefix(e, "wal/"), "%d.wal", &v); err != nil {
				return fmt.Errorf("entry %s: %v", e, err)
			}
			segs = append(segs, v)
		default:
			return fmt.Errorf("unexpected entry %s in %v", e, entries)
		}
	}
	if len(snaps) == 0 || len(snaps) > keep+1 {
		return fmt.Errorf("%d snapshots on disk, SnapshotKeepRecent %d: %v", len(snaps), keep, entries)
	}
	for _, s := range segs {
		if s <= snaps[0] {
			return fmt.Errorf("log segment %d kept, oldest snapshot %d: %v", s, snaps[0], entries)
		}
	}
	return nil
}

// leakSettle brings db to a state that does not depend on where the
// background work was: the background rewrite switched to or a snapshot of
// the latest version written, the prune after it done, the unmappings done,
// then fewer than an interval of commits read through ViewAt so that the
// view cache holds only views of the current snapshot.
func leakSettle(t *testing.T, db *DB, commit func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := db.RewriteSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < DefaultViewCacheSize; i++ { // fewer than SnapshotInterval (5)
		commit()
	}
	latest := db.Version()
	for v := latest - DefaultViewCacheSize; v < latest; v++ { // the snapshot's version and after
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatal(err)
		}
		view.Release()
	}
	waitForPrune(t, db)
	db.unmapper.wg.Wait()
}

// TestLeakLongRunPlateau runs a writer through many commits with small
// snapshot intervals (background rewrites, prunes), synchronous rewrites,
// store upgrades, an asynchronous log, historical views and read-only
// databases opened beside it and closed, and compares its resources after
// cycle 100 and after cycle 400 (each after settling: see leakSettle).
// None may grow: descriptors, mappings (deleted files' included),
// goroutines, files on disk; the live heap by at most a small constant.
// After Close, and the release of a view held across it, everything is
// back to what it was before Open.
func TestLeakLongRunPlateau(t *testing.T) {
	total, first := 400, 100
	if testing.Short() {
		total, first = 240, 60
	}
	dir := t.TempDir()
	base := leakRead(t, dir, false)
	r := rand.New(rand.NewSource(7))
	stores := []string{"a", "b", "c"}
	db, err := Open(dir, Options{
		CreateIfMissing:    true,
		InitialStores:      stores,
		SnapshotInterval:   5,
		SnapshotKeepRecent: 1,
		AsyncCommitBuffer:  4,
		Sync:               wal.SyncEveryCommit,
		WALSegmentSize:     4 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			db.Close()
		}
	}()
	extra := "" // a store that the upgrades add, rename and delete
	step := 0
	commit := func() {
		t.Helper()
		step++
		names := db.StoreNames()
		var css []wal.ChangeSet
		for _, s := range names {
			var ps []wal.KVPair
			for j := 0; j < 20; j++ {
				k := []byte(fmt.Sprintf("k%04d", r.Intn(500)))
				if j%7 == 0 {
					ps = append(ps, wal.KVPair{Key: k, Delete: true})
					continue
				}
				v := make([]byte, 32)
				r.Read(v)
				ps = append(ps, wal.KVPair{Key: k, Value: v})
			}
			css = append(css, wal.ChangeSet{Name: s, Pairs: ps})
		}
		sort.Slice(css, func(i, j int) bool { return css[i].Name < css[j].Name })
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var samples []leakSample
	for cycle := 1; cycle <= total; cycle++ {
		switch {
		case cycle%23 == 0:
			var u wal.Upgrades
			switch {
			case extra == "":
				extra = fmt.Sprintf("x%d", cycle)
				u.Added = []string{extra}
			case strings.HasPrefix(extra, "x"):
				u.Renamed = []wal.RenamedStore{{OldName: extra, NewName: "y" + extra[1:]}}
				extra = "y" + extra[1:]
			default:
				u.Deleted = []string{extra}
				extra = ""
			}
			if err := db.ApplyUpgrades(u); err != nil {
				t.Fatal(err)
			}
		}
		commit()
		latest := db.Version()
		// the latest view, and a historical one
		if v, err := db.View(); err != nil {
			t.Fatal(err)
		} else {
			v.Get("a", []byte("k0001"))
			v.Release()
		}
		if h := latest - int64(r.Intn(8)); h >= 1 {
			if v, err := db.ViewAt(h); err == nil {
				it := v.Tree("a").Iterator(nil, nil, true)
				for n := 0; it.Valid() && n < 10; n++ {
					it.Next()
				}
				it.Close()
				v.Release()
			}
		}
		if cycle%10 == 0 {
			ro, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := ro.ViewAt(ro.Version() - 1); err == nil {
				v.Get("b", []byte("k0002"))
				v.Release()
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if cycle%37 == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if cycle == first || cycle == total {
			leakSettle(t, db, commit)
			s := leakRead(t, dir, true)
			t.Logf("after cycle %d: %v", cycle, s)
			samples = append(samples, s)
		}
	}
	e, l := samples[0], samples[1]
	// a descriptor of the directory may be open for an fsync for a
	// moment (a log segment rolled ahead): sampled again until the counts
	// are back, for 30 s at most
	for deadline := time.Now().Add(30 * time.Second); (l.fdsAll > e.fdsAll || len(l.fdsDir) > len(e.fdsDir) || l.goroutines > e.goroutines) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l = leakRead(t, dir, true)
	}
	if l.goroutines > e.goroutines {
		t.Errorf("goroutines grew: %d after cycle %d, %d after cycle %d", e.goroutines, first, l.goroutines, total)
	}
	if l.fdsAll > e.fdsAll || len(l.fdsDir) > len(e.fdsDir) {
		t.Errorf("descriptors grew: %d (%v) -> %d (%v)", e.fdsAll, e.fdsDir, l.fdsAll, l.fdsDir)
	}
	if l.maps > e.maps || l.deleted > 0 || len(l.mapDirs) > 1 {
		t.Errorf("mappings grew: %d (%d deleted, %v) -> %d (%d deleted, %v)", e.maps, e.deleted, e.mapDirs, l.maps, l.deleted, l.mapDirs)
	}
	// on disk: the current snapshot and SnapshotKeepRecent (1) older
	// ones, the log from the oldest kept snapshot on (a segment per
	// version here: WALSegmentSize is below an entry), nothing else
	for _, s := range samples {
		if err := leakDiskBounded(s.entries, 1); err != nil {
			t.Error(err)
		}
	}
	if l.heap > e.heap+e.heap/2+(2<<20) {
		t.Errorf("live heap grew: %d KiB -> %d KiB", e.heap>>10, l.heap>>10)
	}

	// a view held across Close keeps its snapshot until released
	held, err := db.ViewAt(db.Version() - 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if got, err := held.Get("a", []byte("k0001")); err != nil {
		t.Errorf("held view after Close: %v (%q)", err, got)
	}
	held.Release()
	testutil.WaitGoroutines(t, base.goroutines, "after Close")
	s := leakRead(t, dir, false)
	if len(s.fdsDir) != 0 || s.maps != 0 || s.fdsAll > base.fdsAll {
		t.Errorf("after Close and Release: %v; before Open: %v", s, base)
	}
}

// TestLeakReopenCycles opens and closes the database 50 times, each time
// with commits that start background rewrites (SnapshotInterval 3) which
// Close may cancel mid-way, an asynchronous log in every other cycle, a
// read-only database opened beside the writer and closed only after the
// writer's Close (its mappings may then name pruned, deleted files), and a
// view held across the writer's Close. After each cycle, once the read-only
// database is closed and the view released, the process holds no
// descriptor or mapping of the directory's files and no goroutine more than
// before the first Open; after each writer Open the directory holds no
// leftover of a cancelled rewrite. (Snapshots installed by a rewrite that
// Close cancelled before its switch stay until the next switch's prune, as
// the package doc says; they are not counted here.)
func TestLeakReopenCycles(t *testing.T) {
	cycles := 50
	if testing.Short() {
		cycles = 30
	}
	dir := t.TempDir()
	base := leakRead(t, dir, false)
	r := rand.New(rand.NewSource(11))
	for cycle := 1; cycle <= cycles; cycle++ {
		opts := Options{
			CreateIfMissing:    true,
			InitialStores:      []string{"a", "b"},
			SnapshotInterval:   3,
			SnapshotKeepRecent: 1,
			WALSegmentSize:     2 << 10,
		}
		if cycle%2 == 0 {
			opts.AsyncCommitBuffer = 8
			opts.Sync = wal.SyncEveryCommit
		}
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		// a cancelled rewrite's directory is removed by the writer's
		// Open (a log segment rolled ahead is being created meanwhile)
		for _, e := range leakRead(t, dir, false).entries {
			if strings.Contains(e, ".tmp") && !strings.HasPrefix(e, "wal/") {
				t.Errorf("cycle %d, after Open: leftover %s", cycle, e)
			}
		}
		var ro *DB
		var held *View
		for i := 0; i < 7; i++ {
			for _, st := range []string{"a", "b"} {
				for j := 0; j < 30; j++ {
					v := make([]byte, 24)
					r.Read(v)
					if err := db.Set(st, []byte(fmt.Sprintf("k%03d", r.Intn(300))), v); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := db.Commit(); err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			if i == 2 {
				if ro, err = Open(dir, Options{ReadOnly: true}); err != nil {
					t.Fatal(err)
				}
				if v, err := ro.ViewAt(ro.Version() - 1); err == nil {
					v.Release()
				}
			}
			if i == 4 && cycle%3 == 0 {
				if held, err = db.ViewAt(db.Version() - 2); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", cycle, err)
		}
		// Close drops a segment rolled ahead that got no record
		for _, e := range leakRead(t, dir, false).entries {
			if strings.HasPrefix(e, "wal/") && strings.Contains(e, ".tmp") {
				t.Errorf("cycle %d, after Close: leftover %s", cycle, e)
			}
		}
		if held != nil {
			if _, err := held.Get("a", []byte("k001")); err != nil {
				t.Errorf("cycle %d: view held across Close: %v", cycle, err)
			}
			held.Release()
		}
		if v, err := ro.View(); err != nil {
			t.Errorf("cycle %d: read-only beside: %v", cycle, err)
		} else {
			v.Get("b", []byte("k002"))
			v.Release()
		}
		if err := ro.Close(); err != nil {
			t.Fatalf("cycle %d: read-only Close: %v", cycle, err)
		}
		testutil.WaitGoroutines(t, base.goroutines, fmt.Sprintf("cycle %d", cycle))
		if s := leakRead(t, dir, false); len(s.fdsDir) != 0 || s.maps != 0 || s.fdsAll > base.fdsAll {
			t.Fatalf("cycle %d, after Close: %v; before the first Open: %v", cycle, s, base)
		}
	}
}

// TestLeakCheckedSnapshotsBounded: the record of the snapshots whose
// checksums were checked (DB.snapsChecked, consulted by ViewAt's rebuilds)
// loses a snapshot's entry when the prune removes it: after many rewrites
// with SnapshotKeepRecent 1 it holds about as many entries as there are
// snapshots on disk, not one per rewrite ever done.
func TestLeakCheckedSnapshotsBounded(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rewrites := 300
	for i := 0; i < rewrites; i++ {
		if err := db.Set("a", []byte(fmt.Sprintf("k%d", i%50)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	waitForPrune(t, db)
	snaps, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.snapsChecked.Lock()
	n := len(db.snapsChecked.m)
	db.snapsChecked.Unlock()
	t.Logf("%d rewrites, %d snapshots on disk %v, %d checked snapshots recorded", rewrites, len(snaps), snaps, n)
	if n > len(snaps)+2 {
		t.Errorf("the record of checked snapshots holds %d entries after %d rewrites, with %d snapshots on disk: it grows with every rewrite", n, rewrites, len(snaps))
	}
}

// openSnapshot4 opens a database in dir (closed at the end of the test)
// with the one store "a", no automatic snapshots and SnapshotKeepRecent 0;
// it commits versions 1 to 4, rewrites the snapshot at 4, and commits 5
// and 6. commit(i) sets the store's 50 keys to i and commits.
func openSnapshot4(t *testing.T, dir string) (db *DB, commit func(i int)) {
	t.Helper()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	commit = func(i int) {
		t.Helper()
		for j := 0; j < 50; j++ {
			if err := db.Set("a", []byte(fmt.Sprintf("k%03d", j)), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 4; i++ {
		commit(i)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commit(5)
	commit(6)
	return db, commit
}

// TestLeakViewCacheDropsPrunedSnapshots: a version ViewAt rebuilt and
// cached (ViewCacheSize) is dropped from the cache when the prune removes
// the snapshot it was rebuilt from, so that no mapping of the snapshot's
// deleted files stays behind once the caller's views are released (a node
// that answered a few historical queries and then none would otherwise
// keep up to ViewCacheSize pruned snapshots' disk space).
func TestLeakViewCacheDropsPrunedSnapshots(t *testing.T) {
	dir := t.TempDir()
	db, commit := openSnapshot4(t, dir)
	// a historical query: version 5, rebuilt from snapshot 4, cached
	v, err := db.ViewAt(5)
	if err != nil {
		t.Fatal(err)
	}
	v.Release()
	// the node goes on: rewrites, whose prunes remove snapshot 4
	for i := 7; i <= 30; i++ {
		commit(i)
		if i%5 == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitForPrune(t, db)
	db.unmapper.wg.Wait()
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(4))); err == nil {
		t.Fatalf("snapshot 4 not pruned")
	}
	s := leakRead(t, dir, false)
	t.Logf("%v", s)
	if s.deleted > 0 {
		t.Errorf("%d mappings of deleted (pruned) snapshot files stay, of %v, held by the view cache: %v", s.deleted, s.mapDirs, s)
	}
}
