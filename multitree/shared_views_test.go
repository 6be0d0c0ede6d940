package multitree

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// svMaps counts the process's mappings of files under dir.
func svMaps(t *testing.T, dir string) (n int, lines []string) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, dir+"/") {
			n++
			lines = append(lines, l)
		}
	}
	return n, lines
}

// svModel is the content of every committed version: store "a" has
// "k<v%5>" = "a<v>" set at v, and "latest" = v; store "b" has "j<v%3>" =
// "b<v>" and, every 4th version, "k<(v+2)%5>" of "a" deleted.
type svModel struct {
	mu       sync.Mutex
	versions map[int64]map[string]map[string]string
}

func (m *svModel) get(v int64) map[string]map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.versions[v]
}

func svChanges(v int64) []wal.ChangeSet {
	a := []wal.KVPair{
		{Key: []byte(fmt.Sprintf("k%d", v%5)), Value: []byte(fmt.Sprintf("a%d", v))},
		{Key: []byte("latest"), Value: []byte(fmt.Sprint(v))},
	}
	if v%4 == 0 {
		a = append(a, wal.KVPair{Key: []byte(fmt.Sprintf("k%d", (v+2)%5)), Delete: true})
	}
	b := []wal.KVPair{{Key: []byte(fmt.Sprintf("j%d", v%3)), Value: []byte(fmt.Sprintf("b%d", v))}}
	return []wal.ChangeSet{{Name: "a", Pairs: a}, {Name: "b", Pairs: b}}
}

func svApply(prev map[string]map[string]string, css []wal.ChangeSet) map[string]map[string]string {
	next := map[string]map[string]string{}
	for s, kv := range prev {
		next[s] = map[string]string{}
		for k, v := range kv {
			next[s][k] = v
		}
	}
	for _, cs := range css {
		if next[cs.Name] == nil {
			next[cs.Name] = map[string]string{}
		}
		for _, p := range cs.Pairs {
			if p.Delete {
				delete(next[cs.Name], string(p.Key))
			} else {
				next[cs.Name][string(p.Key)] = string(p.Value)
			}
		}
	}
	return next
}

// svCheckView reads every key the model knows of (and a few absent ones)
// at the view's version.
func svCheckView(m *svModel, vw *View) error {
	want := m.get(vw.Version())
	if want == nil {
		return fmt.Errorf("no model of version %d", vw.Version())
	}
	for _, s := range []string{"a", "b"} {
		keys := []string{"latest", "k0", "k1", "k2", "k3", "k4", "j0", "j1", "j2"}
		for _, k := range keys {
			got, err := vw.Get(s, []byte(k))
			if err != nil {
				return fmt.Errorf("version %d: get %s/%s: %w", vw.Version(), s, k, err)
			}
			w, ok := want[s][k]
			if (got != nil) != ok || string(got) != w {
				return fmt.Errorf("version %d: %s/%s = %q, want %q (present %v)", vw.Version(), s, k, got, w, ok)
			}
		}
	}
	return nil
}

type svConfig struct {
	interval, keep, cache int
	check                 OpenCheck
	rewriteEvery          int // RewriteSnapshot every n commits; 0: never
}

// TestStressSharedViews: readers take views of random versions
// (ViewAt), read them, hold a few across commits, release them, Pin views
// already released and read while pinned, while the writer commits with
// background rewrites, prunes and (some runs) synchronous rewrites. Every
// read returns the version's content; once every view is released and the
// database closed, nothing of its directory stays mapped.
func TestStressSharedViews(t *testing.T) {
	var cfgs []svConfig
	for _, interval := range []int{1, 2, 3} {
		for _, keep := range []int{0, 1, 2} {
			cfgs = append(cfgs, svConfig{interval: interval, keep: keep, cache: []int{-1, 1, 2, 3}[(interval+keep)%4],
				check: []OpenCheck{OpenCheckBackground, OpenCheckSync, OpenCheckNone}[keep], rewriteEvery: []int{0, 7, 0}[interval-1]})
		}
	}
	commits := 120
	if testing.Short() {
		commits = 45
	}
	for i, cfg := range cfgs {
		t.Run(fmt.Sprintf("%d_%+v", i, cfg), func(t *testing.T) { svStress(t, cfg, commits, int64(i)) })
	}
}

func svStress(t *testing.T, cfg svConfig, commits int, seed int64) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: int64(cfg.interval),
		SnapshotKeepRecent: cfg.keep, ViewCacheSize: cfg.cache, OpenCheck: cfg.check}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	model := &svModel{versions: map[int64]map[string]map[string]string{0: {}}}
	// a first stretch, then reopen so that the open check (background)
	// runs with the generation it checks shared
	half := commits / 3
	commit := func(v int64) {
		t.Helper()
		css := svChanges(v)
		model.mu.Lock()
		model.versions[v] = svApply(model.versions[v-1], css)
		model.mu.Unlock()
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
	}
	v := int64(1)
	for ; v <= int64(half); v++ {
		commit(v)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var leftover sync.Mutex
	var allHeld []*View
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed*10 + int64(r)))
			var held, released []*View
			defer func() {
				leftover.Lock()
				allHeld = append(allHeld, held...)
				leftover.Unlock()
			}()
			for !stop.Load() {
				latest := db.Version()
				if latest < 1 {
					continue
				}
				ver := 1 + rng.Int63n(latest)
				vw, err := db.ViewAt(ver)
				switch {
				case err == nil:
				case errors.Is(err, ErrVersion) || errors.Is(err, ErrBeforeFirstVersion):
					continue
				default:
					report(fmt.Errorf("ViewAt(%d): %w", ver, err))
					return
				}
				if vw.Version() != ver {
					report(fmt.Errorf("ViewAt(%d) gave version %d", ver, vw.Version()))
				}
				if err := svCheckView(model, vw); err != nil {
					report(err)
					return
				}
				held = append(held, vw)
				if len(held) > 3 || rng.Intn(2) == 0 {
					i := rng.Intn(len(held))
					h := held[i]
					held = append(held[:i], held[i+1:]...)
					h.Release()
					released = append(released, h)
					if len(released) > 8 {
						released = released[1:]
					}
				}
				// a released view: readable only while a Pin of it holds
				if len(released) > 0 {
					p := released[rng.Intn(len(released))]
					if p.Pin() {
						err := svCheckView(model, p)
						if tr := p.Tree("a"); tr == nil {
							err = errors.Join(err, fmt.Errorf("pinned view %d: no tree", p.Version()))
						} else if _, terr := tr.Get([]byte("latest")); terr != nil {
							err = errors.Join(err, terr)
						}
						p.Unpin()
						if err != nil {
							report(fmt.Errorf("pinned released view: %w", err))
							return
						}
					}
				}
			}
		}(r)
	}
	for ; v <= int64(commits); v++ {
		commit(v)
		if cfg.rewriteEvery > 0 && v%int64(cfg.rewriteEvery) == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// half the views are released before Close, half after
	for i, h := range allHeld {
		if i%2 == 0 {
			h.Release()
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i, h := range allHeld {
		if i%2 == 1 {
			if err := svCheckView(model, h); err != nil {
				t.Errorf("view held across Close: %v", err)
			}
			h.Release()
		}
	}
	if n, lines := svMaps(t, dir); n != 0 {
		t.Errorf("%d mappings of the database's files remain after Close with every view released:\n%s", n, strings.Join(lines, "\n"))
	}
}

// TestPinFailsAfterChildReleased: a view rebuilt from the snapshot the
// database maps (a child generation) refuses Pin once its holders are gone,
// although the database keeps the snapshot mapped; and ViewAt gives the
// version again, correctly, after.
func TestPinFailsAfterChildReleased(t *testing.T) {
	for _, cache := range []int{-1, 1} {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1, ViewCacheSize: cache})
		if err != nil {
			t.Fatal(err)
		}
		model := &svModel{versions: map[int64]map[string]map[string]string{0: {}}}
		for v := int64(1); v <= 6; v++ {
			css := svChanges(v)
			model.versions[v] = svApply(model.versions[v-1], css)
			if err := db.ApplyChangeSets(css); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
			if v == 3 {
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		v4, err := db.ViewAt(4)
		if err != nil {
			t.Fatal(err)
		}
		if v4.st.gen.parent == nil {
			t.Fatalf("cache %d: the view of 4 does not share the database's snapshot 3", cache)
		}
		if err := svCheckView(model, v4); err != nil {
			t.Fatal(err)
		}
		v4.Release()
		if cache > 0 {
			// evicts 4
			v5, err := db.ViewAt(5)
			if err != nil {
				t.Fatal(err)
			}
			v5.Release()
		}
		if v4.Pin() {
			v4.Unpin()
			t.Errorf("cache %d: Pin of the released view of 4 succeeded with no holder of it left", cache)
		}
		v4b, err := db.ViewAt(4)
		if err != nil {
			t.Fatal(err)
		}
		if err := svCheckView(model, v4b); err != nil {
			t.Fatal(err)
		}
		v4b.Release()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if n, lines := svMaps(t, dir); n != 0 {
			t.Errorf("%d mappings after Close: %v", n, lines)
		}
	}
}

// TestCollectAtSwitchBesideChildView: a Commit that switches to a
// background rewrite's snapshot runs one garbage collection once the old
// trees are garbage (unmapLater, collect): the replaced trees' nodes are
// most of the heap. A cached historical view rebuilt from the replaced
// snapshot shares its mapping (a child generation) but has trees of its
// own, so the switch collects at once all the same, while the view keeps
// the files mapped.
func TestCollectAtSwitchBesideChildView(t *testing.T) {
	forced := forcedGCs
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 3, SnapshotKeepRecent: 10, ViewCacheSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit, _ := keyCommitter(t, db)
	commit() // 1
	commit() // 2
	// a view of 1, rebuilt from snapshot 0, which the database maps: cached
	v1, err := db.ViewAt(1)
	if err != nil {
		t.Fatal(err)
	}
	v1.Release()
	commit() // 3: starts the rewrite
	waitRewrite(db)
	db.unmapper.wg.Wait()
	before := forced()
	snap := db.SnapshotVersion()
	commit() // 4: switches to snapshot 3, replacing snapshot 0's trees
	if db.SnapshotVersion() == snap {
		t.Fatalf("no background switch at version %d", db.Version())
	}
	db.unmapper.wg.Wait()
	if n := forced() - before; n != 1 {
		t.Errorf("a background switch beside a cached view of version 1 (rebuilt from the replaced snapshot 0) ran %d collections, want 1", n)
	}
}

// TestConcurrentRebuildsMapOnce: two versions rebuilt at once (as
// maxRebuilds allows) from the same kept snapshot, which the database does
// not map yet, end up sharing one mapping of it: the rebuild that
// recorded its mapping second drops its own for a child of the first
// (mapRebuilt), as queries of neighbouring heights arriving together do.
func TestConcurrentRebuildsMapOnce(t *testing.T) {
	stores := resStores(10)
	for try := 0; try < 10; try++ {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1, SnapshotKeepRecent: 5, ViewCacheSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		for v := 1; v <= 10; v++ {
			resFill(t, db, stores, v)
			if v == 5 || v == 10 {
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		snap5 := filepath.Join(dir, snapshotDirName(5))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, v := range []int64{6, 7} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				vw, err := db.ViewAt(v) // rebuilt from snapshot 5, cached
				if err != nil {
					t.Error(err)
					return
				}
				vw.Release()
			}()
		}
		close(start)
		wg.Wait()
		db.unmapper.wg.Wait() // a duplicate mapping the second rebuild dropped
		both, _ := svMaps(t, snap5)
		if both == 0 {
			t.Fatal("snapshot 5 not mapped")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		one := 8 * 5 // 8 stores hold keys, 5 files each
		if both > one {
			t.Fatalf("try %d: two views rebuilt at once from snapshot 5 hold %d mappings of its files, %d copies of the snapshot (%d for one)",
				try, both, both/one, one)
		}
	}
}
