package compat_test

import (
	"bytes"
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

	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// leakSample is the process's resources as far as one database dir is
// concerned.
type leakSample struct {
	goroutines int
	fdsAll     int
	fdsDir     []string // descriptors of files under dir (or beside it)
	maps       int      // mappings of files under dir
	deleted    int      // of those, of deleted files
	mapDirs    []string // top-level entries of dir with a mapping
	snaps      []int64
	beside     []string // entries of dir's parent other than dir
	heap       uint64
}

func (s leakSample) String() string {
	return fmt.Sprintf("goroutines %d, fds %d (dir %d: %v), maps %d (deleted %d) of %v, snapshots %v, beside %v, heap %d KiB",
		s.goroutines, s.fdsAll, len(s.fdsDir), s.fdsDir, s.maps, s.deleted, s.mapDirs, s.snaps, s.beside, s.heap>>10)
}

func leakRead(t *testing.T, dir string) leakSample {
	t.Helper()
	var s leakSample
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap = ms.HeapAlloc
	s.goroutines = runtime.NumGoroutine()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	md := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		i := strings.Index(l, dir)
		if i < 0 {
			continue
		}
		s.maps++
		if strings.HasSuffix(l, "(deleted)") {
			s.deleted++
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(l[i:], dir), "/")
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
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir) {
			s.fdsDir = append(s.fdsDir, strings.TrimPrefix(target, dir))
		}
	}
	sort.Strings(s.fdsDir)
	s.snaps, _ = multitree.SnapshotVersions(dir)
	if ents, err := os.ReadDir(filepath.Dir(dir)); err == nil {
		for _, e := range ents {
			if e.Name() != filepath.Base(dir) {
				s.beside = append(s.beside, e.Name())
			}
		}
	}
	return s
}

// leakWaitSettled waits (a minute at most) until only the current
// snapshot is mapped and at most keep older snapshots are on disk.
func leakWaitSettled(t *testing.T, ms *compat.MultiStore, keep int) leakSample {
	t.Helper()
	cur := fmt.Sprintf("snapshot-%020d", ms.DB().SnapshotVersion())
	deadline := time.Now().Add(time.Minute)
	for {
		s := leakRead(t, ms.Dir())
		if len(s.mapDirs) == 1 && s.mapDirs[0] == cur && len(s.snaps) <= keep+1 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: current %s, %v", cur, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeakCompatLongRun drives a MultiStore (no BaseApp) through many
// blocks with background rewrites (snapshot-interval 5), an asynchronous
// log, writes through stores and cache branches with iterators left open,
// historical branches (CacheMultiStoreWithVersion) read and iterated with
// iterators left open and then dropped, proved queries at older heights,
// state-sync snapshots (some never pruned by PruneSnapshotHeight), synchronous
// rewrites and reloads (LoadLatestVersion on the open multistore), and
// compares its resources after block 100 and block 400, each after a
// RewriteSnapshot and fewer than an interval of blocks: descriptors,
// mappings, goroutines and snapshots on disk must not grow, the live heap by
// a small constant only. After Close every descriptor and mapping of the
// directory is gone and the goroutines come back to their number before the
// first load.
func TestLeakCompatLongRun(t *testing.T) {
	for _, zc := range []bool{false, true} {
		t.Run(fmt.Sprintf("zerocopy=%v", zc), func(t *testing.T) { testLeakCompatLongRun(t, zc) })
	}
}

func testLeakCompatLongRun(t *testing.T, zeroCopy bool) {
	total, first := scale(400, 200), scale(100, 50)
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	base := leakRead(t, dir)
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = 5, 1, 4
	cfg.AsyncCommitBuffer = 4
	cfg.ZeroCopy = zeroCopy
	keys := keyring{}
	m := mount{iavl: []string{"a", "b", "c"}, transient: "t", memory: "m"}
	ms := newOurs(t, dir, cfg, keys, m, nil)
	closed := false
	defer func() {
		if !closed {
			ms.Close()
		}
	}()
	r := rand.New(rand.NewSource(3))
	value := func() []byte {
		v := make([]byte, 40)
		r.Read(v)
		return v
	}
	block := func() {
		t.Helper()
		for _, name := range m.iavl {
			kv := ms.GetKVStore(keys[name])
			for j := 0; j < 15; j++ {
				k := []byte(fmt.Sprintf("k%04d", r.Intn(400)))
				if j%6 == 0 {
					kv.Delete(k)
				} else {
					kv.Set(k, value())
				}
			}
		}
		ms.GetKVStore(keys["t"]).Set([]byte("tk"), value())
		ms.GetKVStore(keys["m"]).Set([]byte("mk"), value())
		// an iterator of the latest store, left open
		it := ms.GetKVStore(keys["a"]).Iterator(nil, nil)
		if it.Valid() {
			it.Next()
		}
		// a branch written back, with an iterator left open, and one
		// discarded
		cms := ms.CacheMultiStore()
		cms.GetKVStore(keys["b"]).Set([]byte(fmt.Sprintf("k%04d", r.Intn(400))), value())
		bit := cms.GetKVStore(keys["b"]).ReverseIterator(nil, nil)
		if bit.Valid() {
			bit.Next()
		}
		cms.Write()
		drop := ms.CacheMultiStore()
		drop.GetKVStore(keys["c"]).Set([]byte("dropped"), value())
		drop.GetKVStore(keys["c"]).Iterator(nil, nil)
		ms.Commit()
	}
	history := func() {
		t.Helper()
		latest := ms.LatestVersion()
		for i := 0; i < 2; i++ {
			h := latest - int64(r.Intn(7))
			if h < 1 {
				continue
			}
			b, err := ms.CacheMultiStoreWithVersion(h)
			if err != nil {
				continue // beyond the kept snapshots
			}
			func() {
				defer func() { recover() }() // ErrVersionReleased
				kv := b.GetKVStore(keys["a"])
				kv.Get([]byte("k0001"))
				it := kv.Iterator(nil, nil) // left open
				for n := 0; it.Valid() && n < 5; n++ {
					it.Next()
				}
				b.GetKVStore(keys["b"]).ReverseIterator(nil, nil)
			}()
			q := types.RequestQuery{Path: "/a/key", Data: []byte(fmt.Sprintf("k%04d", r.Intn(400))), Height: h, Prove: true}
			ms.Query(&q)
			q = types.RequestQuery{Path: "/b/subspace", Data: []byte("k00"), Height: h}
			ms.Query(&q)
		}
	}
	var samples []leakSample
	held := int64(0)
	for cycle := 1; cycle <= total; cycle++ {
		block()
		history()
		if cycle%17 == 0 {
			h := ms.LatestVersion() - 1
			var buf bytes.Buffer
			if err := ms.Snapshot(uint64(h), protoio.NewDelimitedWriter(&buf)); err != nil {
				t.Fatalf("snapshot of %d: %v", h, err)
			}
			if cycle%34 == 0 {
				ms.PruneSnapshotHeight(h)
				held = 0
			} else {
				held = h // replaced by the next Snapshot
			}
		}
		if cycle%41 == 0 {
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if cycle%53 == 0 {
			if err := ms.LoadLatestVersion(); err != nil {
				t.Fatal(err)
			}
			held = 0
		}
		if cycle == first || cycle == total {
			if held != 0 {
				ms.PruneSnapshotHeight(held)
				held = 0
			}
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < cfg.QueryViews; i++ { // fewer than an interval
				block()
			}
			s := leakWaitSettled(t, ms, cfg.SnapshotKeepRecent)
			t.Logf("after block %d: %v", cycle, s)
			samples = append(samples, s)
		}
	}
	e, l := samples[0], samples[1]
	// a descriptor of the directory may be open for an fsync for a
	// moment (the prune's, a log segment's): sampled again until the
	// counts are back, for 30 s at most
	for deadline := time.Now().Add(30 * time.Second); (l.fdsAll > e.fdsAll || len(l.fdsDir) > len(e.fdsDir) || l.goroutines > e.goroutines) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l = leakRead(t, dir)
	}
	if l.goroutines > e.goroutines {
		t.Errorf("goroutines grew: %d -> %d", e.goroutines, l.goroutines)
	}
	if l.fdsAll > e.fdsAll || len(l.fdsDir) > len(e.fdsDir) {
		t.Errorf("descriptors grew: %d %v -> %d %v", e.fdsAll, e.fdsDir, l.fdsAll, l.fdsDir)
	}
	if l.maps > e.maps || l.deleted > 0 {
		t.Errorf("mappings grew: %d (%d deleted) -> %d (%d deleted)", e.maps, e.deleted, l.maps, l.deleted)
	}
	if len(l.beside) > 0 {
		t.Errorf("entries beside the database: %v", l.beside)
	}
	if l.heap > e.heap+e.heap/2+(2<<20) {
		t.Errorf("live heap grew: %d KiB -> %d KiB", e.heap>>10, l.heap>>10)
	}

	// a branch of an older height and an iterator of it kept across Close
	b, err := ms.CacheMultiStoreWithVersion(ms.LatestVersion() - 2)
	if err != nil {
		t.Fatal(err)
	}
	it := b.GetKVStore(keys["a"]).Iterator(nil, nil)
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	_ = it
	testutil.WaitGoroutines(t, base.goroutines, "after Close")
	if s := leakRead(t, dir); len(s.fdsDir) != 0 || s.maps != 0 || s.fdsAll > base.fdsAll {
		t.Errorf("after Close: %v; before the first load: %v", s, base)
	}
}

// TestLeakCompatRestoreCycles restores a state-sync stream into fresh
// multistores again and again, one restore in three from a stream cut
// short (which fails and reloads the database as it was), and closes each:
// after each cycle no descriptor, mapping or goroutine is left, and nothing
// but the database directory is beside it (no staging or replaced
// directory of the import).
func TestLeakCompatRestoreCycles(t *testing.T) {
	cycles := scale(30, 15)
	keys := keyring{}
	m := mount{iavl: []string{"a", "b"}, transient: "t"}
	src := newOurs(t, filepath.Join(t.TempDir(), "src"), testConfig(), keys, m, nil)
	r := rand.New(rand.NewSource(5))
	for h := 0; h < 20; h++ {
		for _, name := range m.iavl {
			for j := 0; j < 30; j++ {
				v := make([]byte, 30)
				r.Read(v)
				src.GetKVStore(keys[name]).Set([]byte(fmt.Sprintf("k%04d", r.Intn(1000))), v)
			}
		}
		src.Commit()
	}
	height := uint64(src.LatestVersion())
	var buf bytes.Buffer
	if err := src.Snapshot(height, protoio.NewDelimitedWriter(&buf)); err != nil {
		t.Fatal(err)
	}
	src.PruneSnapshotHeight(int64(height))
	want := src.LastCommitID()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	stream := buf.Bytes()
	root := t.TempDir()
	base := leakRead(t, filepath.Join(root, "none"))
	for cycle := 1; cycle <= cycles; cycle++ {
		parent := filepath.Join(root, fmt.Sprint(cycle))
		if err := os.Mkdir(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(parent, "db")
		ms := newOurs(t, dir, testConfig(), keys, m, nil)
		b := stream
		cut := cycle%3 == 0
		if cut {
			b = stream[:len(stream)*2/3]
		}
		_, err := ms.Restore(height, 3, protoio.NewDelimitedReader(bytes.NewReader(b), 64<<20))
		switch {
		case cut && err == nil:
			t.Fatalf("cycle %d: restore of a stream cut short succeeded", cycle)
		case !cut && err != nil:
			t.Fatalf("cycle %d: restore: %v", cycle, err)
		case !cut:
			if got := ms.LastCommitID(); got.Version != want.Version || !bytes.Equal(got.Hash, want.Hash) {
				t.Fatalf("cycle %d: restored %v, want %v", cycle, got, want)
			}
			ms.CacheMultiStoreWithVersion(int64(height))
		}
		if err := ms.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", cycle, err)
		}
		testutil.WaitGoroutines(t, base.goroutines, fmt.Sprintf("cycle %d", cycle))
		s := leakRead(t, dir)
		if len(s.fdsDir) != 0 || s.maps != 0 || s.fdsAll > base.fdsAll || len(s.beside) != 0 {
			t.Fatalf("cycle %d (cut %v), after Close: %v; before: %v", cycle, cut, s, base)
		}
	}
}

// TestLeakCompatReloadSwitches reloads one multistore 50 times, switching
// between LoadVersion of an older height (read there, branches of it and
// queries left behind) and LoadLatestVersion, with blocks, background
// rewrites and a state-sync snapshot never pruned in between: the
// descriptors, mappings and goroutines after switch 50 are no more than
// after switch 10, and after Close all are released.
func TestLeakCompatReloadSwitches(t *testing.T) {
	switches := scale(50, 30)
	dir := filepath.Join(t.TempDir(), "db")
	base := leakRead(t, dir)
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = 4, 2, 3
	cfg.AsyncCommitBuffer = 2
	keys := keyring{}
	m := mount{iavl: []string{"a", "b"}, memory: "m"}
	ms := newOurs(t, dir, cfg, keys, m, nil)
	defer ms.Close()
	r := rand.New(rand.NewSource(9))
	block := func() {
		for _, name := range m.iavl {
			for j := 0; j < 10; j++ {
				v := make([]byte, 20)
				r.Read(v)
				ms.GetKVStore(keys[name]).Set([]byte(fmt.Sprintf("k%03d", r.Intn(200))), v)
			}
		}
		ms.Commit()
	}
	var s10 leakSample
	for sw := 1; sw <= switches; sw++ {
		for i := 0; i < 6; i++ {
			block()
		}
		latest := ms.LatestVersion()
		var buf bytes.Buffer
		if err := ms.Snapshot(uint64(latest), protoio.NewDelimitedWriter(&buf)); err != nil {
			t.Fatal(err)
		}
		if err := ms.LoadVersion(latest - 3); err != nil {
			t.Fatalf("switch %d: LoadVersion(%d): %v", sw, latest-3, err)
		}
		if got := ms.LatestVersion(); got != latest-3 {
			t.Fatalf("switch %d: at %d after LoadVersion(%d)", sw, got, latest-3)
		}
		ms.GetKVStore(keys["a"]).Iterator(nil, nil) // left open
		if b, err := ms.CacheMultiStoreWithVersion(latest - 4); err == nil {
			b.GetKVStore(keys["b"]).Get([]byte("k001"))
		}
		q := types.RequestQuery{Path: "/a/key", Data: []byte("k002"), Height: latest - 4, Prove: true}
		ms.Query(&q)
		if err := ms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
		if got := ms.LatestVersion(); got != latest {
			t.Fatalf("switch %d: at %d after LoadLatestVersion, want %d", sw, got, latest)
		}
		if sw == 10 || sw == switches {
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < cfg.QueryViews; i++ { // fewer than an interval
				block()
			}
			s := leakWaitSettled(t, ms, cfg.SnapshotKeepRecent)
			if sw == 10 {
				s10 = s
			} else {
				// a descriptor of the directory may be open for an fsync
				// of the prune's for a moment: sampled again until the
				// counts are back, or for 30 s
				grew := func(s leakSample) bool {
					return s.goroutines > s10.goroutines || s.fdsAll > s10.fdsAll || len(s.fdsDir) > len(s10.fdsDir) || s.maps > s10.maps || s.deleted > 0 ||
						s.heap > s10.heap+s10.heap/2+(2<<20)
				}
				for deadline := time.Now().Add(30 * time.Second); grew(s) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					s = leakRead(t, dir)
				}
				if grew(s) {
					t.Errorf("resources grew: after switch 10 %v, after switch %d %v", s10, sw, s)
				}
			}
			t.Logf("after switch %d: %v", sw, s)
		}
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitGoroutines(t, base.goroutines, "after Close")
	if s := leakRead(t, dir); len(s.fdsDir) != 0 || s.maps != 0 || s.fdsAll > base.fdsAll {
		t.Errorf("after Close: %v; before: %v", s, base)
	}
}
