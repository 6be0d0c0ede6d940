package compat_test

// Historical reads (CacheMultiStoreWithVersion, Query at
// older heights, GetCommitInfo) and of the view cache behind them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// rvPair is a pair (ours beside rootmulti pruning nothing) with cfg.
func rvPair(t *testing.T, cfg compat.Config) *pair {
	p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: cfg}
	p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
	p.ours = newOurs(t, p.dir, cfg, p.keys, smallMount, nil)
	t.Cleanup(func() { p.ours.Close() })
	return p
}

func rvConfig(interval int64, keep, views int) compat.Config {
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = interval, keep, views
	return cfg
}

// rvBlock writes a few deterministic pairs of block h to both stores.
func rvBlock(p *pair, h int) types.CommitID {
	w := map[string][][2][]byte{}
	for _, s := range []string{"a", "b"} {
		w[s] = [][2][]byte{
			{[]byte(fmt.Sprintf("k%03d", h)), []byte(fmt.Sprintf("%s-v%d", s, h))},
			{[]byte("same"), []byte(fmt.Sprintf("%s-same%d", s, h))},
		}
	}
	return p.commit(w)
}

// rvSettle gives the background rewrite and prune time to finish.
func rvSettle() { time.Sleep(15 * time.Millisecond) }

// rvSnapshots lists the kept snapshot versions of dir.
func rvSnapshots(t *testing.T, dir string) []int64 {
	t.Helper()
	vs, err := multitree.SnapshotVersions(dir)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// rvKeptSnapshots lists the kept snapshot versions of p's database once
// the background prune of the last switch has ended, when at most
// keep-recent snapshots are older than the current one (a rewrite's
// snapshot not yet switched to may follow it). No commit may run
// meanwhile: none switches, so no other prune starts. A listing taken
// while the prune runs names snapshots it removes before the heights they
// hold are read.
func rvKeptSnapshots(t *testing.T, p *pair) []int64 {
	t.Helper()
	cur := p.ours.DB().SnapshotVersion()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		snaps := rvSnapshots(t, p.dir)
		older := 0
		for _, v := range snaps {
			if v < cur {
				older++
			}
		}
		if older <= p.cfg.SnapshotKeepRecent {
			return snaps
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots %v: the prune to keep-recent %d before the current %d does not end", snaps, p.cfg.SnapshotKeepRecent, cur)
		}
	}
}

// rvBranchRead reads "same" and k<h> of store a at h from a branch of h.
func rvBranchRead(s types.CommitMultiStore, keys keyring, h int64) (string, error) {
	b, err := s.CacheMultiStoreWithVersion(h)
	if err != nil {
		return "", err
	}
	kv := b.GetKVStore(keys["a"])
	return fmt.Sprintf("%q %q", kv.Get([]byte("same")), kv.Get([]byte(fmt.Sprintf("k%03d", h)))), nil
}

// TestViewsAnswerableHeights: for combinations of SnapshotInterval and
// SnapshotKeepRecent, the heights answered by CacheMultiStoreWithVersion,
// GetCommitInfo and Query reach back to the oldest kept snapshot (README:
// "historical queries ... reach back to the oldest kept snapshot"), answer
// as rootmulti (pruning nothing) does, and the same after a restart.
func TestViewsAnswerableHeights(t *testing.T) {
	for _, tc := range []struct {
		interval int64
		keep     int
	}{{3, 0}, {3, 1}, {4, 2}, {5, 1}, {-1, 0}, {-1, 3}, {1, 0}, {1, 1}} {
		t.Run(fmt.Sprintf("interval%d-keep%d", tc.interval, tc.keep), func(t *testing.T) {
			p := rvPair(t, rvConfig(tc.interval, tc.keep, 1))
			const n = 17
			for h := 1; h <= n; h++ {
				rvBlock(p, h)
				rvSettle()
			}
			check := func(phase string) {
				// the prune of the last switch runs in the background;
				// none runs in a database just opened, which may have
				// opened a rewrite's snapshot never switched to
				snaps := rvSnapshots(t, p.dir)
				if phase == "running" {
					snaps = rvKeptSnapshots(t, p)
				}
				oldest := snaps[0]
				t.Logf("%s: snapshots %v", phase, snaps)
				if tc.interval > 0 && len(snaps) > tc.keep+2 {
					// one more: the rewrite just installed, not yet switched to
					t.Errorf("%s: %d snapshots kept, keep-recent %d", phase, len(snaps), tc.keep)
				}
				for h := int64(1); h <= n; h++ {
					kept := h >= oldest || h == n
					got, err := rvBranchRead(p.ours, p.keys, h)
					want, werr := rvBranchRead(p.oracle, p.keys, h)
					if werr != nil {
						t.Fatal(werr)
					}
					switch {
					case kept && err != nil:
						t.Errorf("%s: height %d (oldest kept snapshot %d) not answered: %v", phase, h, oldest, err)
					case kept && got != want:
						t.Errorf("%s: height %d reads %s, rootmulti %s", phase, h, got, want)
					}
					ci, err := p.ours.GetCommitInfo(h)
					oci, _ := p.oracle.GetCommitInfo(h)
					switch {
					case kept && err != nil:
						t.Errorf("%s: GetCommitInfo(%d) (oldest kept snapshot %d): %v", phase, h, oldest, err)
					case err == nil && !bytes.Equal(ci.Hash(), oci.Hash()):
						t.Errorf("%s: GetCommitInfo(%d) hash %X, rootmulti %X", phase, h, ci.Hash(), oci.Hash())
					}
					if kept {
						req := types.RequestQuery{Path: "/a/key", Data: []byte("same"), Height: h, Prove: true}
						res, err := p.ours.Query(&req)
						req2 := types.RequestQuery{Path: "/a/key", Data: []byte("same"), Height: h, Prove: true}
						ores, oerr := p.oracle.Query(&req2)
						if err := sameResponse(res, err, ores, oerr); err != nil {
							t.Errorf("%s: query at %d: %v", phase, h, err)
						}
					}
				}
			}
			check("running")
			p.ours.Close()
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
			check("reopened")
		})
	}
}

// rvMappedSnapshots returns the snapshot directories of dir that the
// process maps (from /proc/self/maps), with their mapping counts.
func rvMappedSnapshots(t *testing.T, dir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, dir)
		if i < 0 {
			continue
		}
		rest := strings.TrimPrefix(line[i+len(dir):], "/")
		if j := strings.Index(rest, "/"); j >= 0 {
			rest = rest[:j]
		}
		out[rest]++
	}
	return out
}

func rvTotal(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// rvWaitMaps waits until done holds of the mapped files of dir (unmapping
// runs in the background), for a minute at most, returning the last count.
func rvWaitMaps(t *testing.T, dir string, done func(map[string]int) bool) map[string]int {
	var m map[string]int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		m = rvMappedSnapshots(t, dir)
		if done(m) || time.Now().After(deadline) {
			return m
		}
	}
}

// TestViewsReleasedAfterBranchesDropped: branches of many heights
// (more than query-views), each read and iterated, then dropped; after
// query-views more commits and a rewrite, only the current snapshot (and
// those the cached latest versions read) stays mapped; after Close none.
func TestViewsReleasedAfterBranchesDropped(t *testing.T) {
	p := rvPair(t, rvConfig(4, 2, 3))
	for h := 1; h <= 12; h++ {
		rvBlock(p, h)
		rvSettle()
	}
	base := rvMappedSnapshots(t, p.dir)
	t.Logf("mapped before branches: %v", base)
	for round := 0; round < 3; round++ {
		for h := int64(1); h <= p.ours.LatestVersion(); h++ {
			b, err := p.ours.CacheMultiStoreWithVersion(h)
			if err != nil {
				continue
			}
			it := b.GetKVStore(p.keys["a"]).Iterator(nil, nil)
			for ; it.Valid(); it.Next() {
			}
			it.Close()
			p.ours.GetCommitInfo(h)
			q := types.RequestQuery{Path: "/b/key", Data: []byte("same"), Height: h, Prove: true}
			p.ours.Query(&q)
		}
	}
	t.Logf("mapped with branches: %v", rvMappedSnapshots(t, p.dir))
	for i := 0; i < 12; i++ {
		rvBlock(p, 100+i)
		rvSettle()
	}
	// A background rewrite switched to in the last query-views commits
	// leaves the cached views of the versions before the switch reading
	// the older snapshot. The rewrite (waited for) and a snapshot of the
	// latest version, then query-views commits, fewer than an interval (no
	// rewrite starts): every cached view reads the current snapshot.
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < p.cfg.QueryViews; i++ {
		rvBlock(p, 200+i)
	}
	cur := fmt.Sprintf("snapshot-%020d", p.ours.DB().SnapshotVersion())
	m := rvWaitMaps(t, p.dir, func(m map[string]int) bool {
		for name, c := range m {
			if name < cur && c > 0 {
				return false
			}
		}
		return true
	})
	for name, c := range m {
		// the current snapshot, and a background rewrite's new one
		if name != cur && !strings.HasPrefix(name, "snapshot-") {
			t.Errorf("unexpected mapping %s", name)
		}
		if name < cur && c > 0 {
			t.Errorf("snapshot %s still mapped (%d files) after the branches were dropped; current %s; all %v", name, c, cur, m)
		}
	}
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	if m := rvWaitMaps(t, p.dir, func(m map[string]int) bool { return rvTotal(m) == 0 }); rvTotal(m) != 0 {
		t.Errorf("mapped after Close: %v", m)
	}
}

// rvModel records the contents of store a at every height.
type rvModel map[int64]map[string]string

// TestViewsBranchesAcrossRewrites: many branches of many heights
// (beyond query-views), kept across commits, background rewrites and
// prunes, read on other goroutines: each read gives the height's value or
// panics with ErrVersionReleased, nothing else.
func TestViewsBranchesAcrossRewrites(t *testing.T) {
	p := rvPair(t, rvConfig(3, 1, 2))
	r := rand.New(rand.NewSource(1))
	model := rvModel{}
	cur := map[string]string{}
	commit := func() {
		w := map[string][][2][]byte{}
		for i := 0; i < 5; i++ {
			k, v := fmt.Sprintf("k%02d", r.Intn(30)), fmt.Sprintf("v%d", r.Int())
			w["a"] = append(w["a"], [2][]byte{[]byte(k), []byte(v)})
			cur[k] = v
		}
		id := p.commit(w)
		snap := map[string]string{}
		for k, v := range cur {
			snap[k] = v
		}
		model[id.Version] = snap
	}
	for i := 0; i < 6; i++ {
		commit()
	}
	type br struct {
		h  int64
		kv types.KVStore
		it types.Iterator
	}
	var brs []br
	for i := 0; i < 40; i++ {
		latest := p.ours.LatestVersion()
		h := latest - int64(r.Intn(4))
		if h < 1 {
			h = 1
		}
		b, err := p.ours.CacheMultiStoreWithVersion(h)
		if err == nil {
			kv := b.GetKVStore(p.keys["a"])
			brs = append(brs, br{h: h, kv: kv, it: kv.Iterator(nil, nil)})
		}
		commit()
		rvSettle()
		for j := range brs {
			b := &brs[j]
			func() {
				defer func() {
					if rec := recover(); rec != nil {
						if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
							t.Errorf("branch of %d panicked with %v", b.h, rec)
						}
					}
				}()
				k := fmt.Sprintf("k%02d", r.Intn(30))
				got := b.kv.Get([]byte(k))
				want, ok := model[b.h][k]
				if (got == nil) == ok || string(got) != want {
					t.Errorf("branch of %d: %s = %q, want %q (present %v)", b.h, k, got, want, ok)
				}
				if b.it.Valid() {
					k, v := string(b.it.Key()), string(b.it.Value())
					if model[b.h][k] != v {
						t.Errorf("iterator of %d: %s = %q, want %q", b.h, k, v, model[b.h][k])
					}
					b.it.Next()
				}
			}()
		}
	}
}

// TestViewsAfterClose: branches and iterators of the latest and of
// older heights fail their next read after Close (doc of Close).
func TestViewsAfterClose(t *testing.T) {
	for _, zc := range []bool{false, true} {
		t.Run(fmt.Sprintf("zerocopy=%v", zc), func(t *testing.T) {
			cfg := rvConfig(3, 1, 4)
			cfg.ZeroCopy = zc
			p := rvPair(t, cfg)
			for h := 1; h <= 8; h++ {
				rvBlock(p, h)
				rvSettle()
			}
			var kvs []types.KVStore
			var its []types.Iterator
			for _, h := range []int64{8, 7, 5, 3} {
				b, err := p.ours.CacheMultiStoreWithVersion(h)
				if err != nil {
					t.Fatalf("branch of %d: %v", h, err)
				}
				kv := b.GetKVStore(p.keys["a"])
				kvs = append(kvs, kv)
				its = append(its, kv.Iterator(nil, nil))
			}
			if err := p.ours.Close(); err != nil {
				t.Fatal(err)
			}
			for i, kv := range kvs {
				rec := rvRecover(func() { kv.Get([]byte("same")) })
				if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
					t.Errorf("branch %d: Get after Close: %v", i, rec)
				}
				rec = rvRecover(func() { its[i].Next() })
				if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
					t.Errorf("branch %d: Next after Close: %v", i, rec)
				}
			}
		})
	}
}

func rvRecover(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}
