package compat_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// rvErrText is the outcome of a historical lookup, for comparisons.
func rvLookup(s types.CommitMultiStore, keys keyring, h int64) string {
	got, err := rvBranchRead(s, keys, h)
	if err != nil {
		return "branch err: " + err.Error()
	}
	ci, err := getCommitInfo(s, h)
	if err != nil {
		return "info err: " + err.Error()
	}
	return fmt.Sprintf("%s %X", got, ci.Hash())
}

// TestViewsAfterRestore: a state-sync restore at height 6 into ours
// and into rootmulti, then blocks 7..20 on both: heights before 6 answer
// rootmulti's "no commit info found" (never committed here), the kept ones
// read as rootmulti.
func TestViewsAfterRestore(t *testing.T) {
	src := rvPair(t, rvConfig(3, 1, 4))
	for h := 1; h <= 6; h++ {
		rvBlock(src, h)
	}
	var stream bytes.Buffer
	if err := src.oracle.Snapshot(6, protoio.NewDelimitedWriter(&stream)); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []int{0, 1} {
		t.Run(fmt.Sprintf("keep%d", keep), func(t *testing.T) {
			p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: filepath.Join(t.TempDir(), "db"), cfg: rvConfig(3, keep, 1)}
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
			t.Cleanup(func() { p.ours.Close() })
			for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
				if _, err := s.Restore(6, snapshottypes.CurrentFormat, ssReader(stream.Bytes())); err != nil {
					t.Fatal(err)
				}
			}
			p.sameLastCommit()
			for h := 7; h <= 20; h++ {
				rvBlock(p, h)
				rvSettle()
			}
			snaps := rvKeptSnapshots(t, p)
			t.Logf("snapshots %v", snaps)
			for h := int64(0); h <= 21; h++ {
				a, b := rvLookup(p.ours, p.keys, h), rvLookup(p.oracle, p.keys, h)
				if h >= snaps[0] || h < 6 || h > 20 {
					if sideNorm(a) != sideNorm(b) {
						t.Errorf("height %d: ours %s | rootmulti %s", h, a, b)
					}
				}
			}
		})
	}
}

// TestViewsBranchAcrossRollback: a branch of height 8 taken before
// RollbackToVersion(6) and other blocks 7, 8 must not read the new
// height 8 nor, silently, the discarded one: it fails (ErrVersionReleased),
// as branches do across a reload. A new branch reads the new blocks.
func TestViewsBranchAcrossRollback(t *testing.T) {
	p := rvPair(t, rvConfig(3, 2, 4))
	for h := 1; h <= 8; h++ {
		rvBlock(p, h)
		rvSettle()
	}
	var kvs []types.KVStore
	for _, h := range []int64{8, 7, 5} {
		b, err := p.ours.CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, b.GetKVStore(p.keys["a"]))
	}
	if err := p.ours.RollbackToVersion(6); err != nil {
		t.Fatal(err)
	}
	for h := 7; h <= 8; h++ {
		p.ours.GetKVStore(p.keys["a"]).Set([]byte("same"), []byte(fmt.Sprintf("new%d", h)))
		p.ours.Commit()
	}
	for i, kv := range kvs {
		rec := rvRecover(func() { t.Logf("branch %d reads %q", i, kv.Get([]byte("same"))) })
		if i < 2 {
			if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
				t.Errorf("branch %d of a rolled-back height: %v", i, rec)
			}
		}
	}
	got, err := rvBranchRead(p.ours, p.keys, 8)
	if err != nil || got != `"new8" ""` {
		t.Errorf("new branch of 8: %s %v", got, err)
	}
}

// TestViewsEvictedBranchLetsGo: a branch of an older height whose view the
// cache evicted can never read again (ErrVersionReleased), and that read
// lets go of the rebuilt version (its in-memory trees): 8 such branches do
// not keep 8 versions' heap beyond query-views = 1.
func TestViewsEvictedBranchLetsGo(t *testing.T) {
	cfg := rvConfig(-1, 0, 1) // no rewrites: a rebuild replays the log from 0
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, smallMount, nil)
	defer ms.Close()
	val := bytes.Repeat([]byte("x"), 1024)
	for h := 0; h < 10; h++ {
		kv := ms.GetKVStore(keys["a"])
		for i := 0; i < 2000; i++ {
			kv.Set([]byte(fmt.Sprintf("h%02d-%05d", h, i)), val)
		}
		ms.Commit()
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var dead []types.KVStore
	for h := int64(1); h <= 8; h++ {
		b, err := ms.CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Fatal(err)
		}
		kv := b.GetKVStore(keys["a"])
		kv.Get([]byte("h00-00001"))
		dead = append(dead, kv)
	}
	// evict them all (query-views 1): every branch is dead now
	ms.GetKVStore(keys["b"]).Set([]byte("x"), []byte("y"))
	ms.Commit()
	for _, kv := range dead[:len(dead)-1] {
		rec := rvRecover(func() { kv.Get([]byte("h00-00002")) })
		if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
			t.Fatalf("evicted branch read: %v", rec)
		}
	}
	after := heap()
	n := len(dead)
	runtime.KeepAlive(dead)
	dead = nil
	dropped := heap()
	t.Logf("heap before the branches %d MiB, with %d dead branches %d MiB, once they are dropped %d MiB", before>>20, n, after>>20, dropped>>20)
	// query-views is 1: the multistore keeps one version open; the dead
	// branches should not keep more (one rebuilt version here is about
	// 2000 values of 1 KiB per block, ~12 MiB)
	if after > before+32<<20 && after > dropped+32<<20 {
		t.Errorf("%d branches whose versions were evicted (every read panics ErrVersionReleased) retain %d MiB of heap, freed only when they are dropped", n, (after-dropped)>>20)
	}
}

// TestViewsInitialVersionAfterPrunes: a chain with initial version 10
// whose first snapshot (version 0) and later ones are pruned: the heights
// before 10 answer rootmulti's "no commit info found", whatever snapshots
// are left.
func TestViewsInitialVersionAfterPrunes(t *testing.T) {
	for _, keep := range []int{0, 1, 5} {
		t.Run(fmt.Sprintf("keep%d", keep), func(t *testing.T) {
			p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: rvConfig(3, keep, 1)}
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
			ms, err := compat.NewMultiStore(p.dir, nil, p.cfg)
			if err != nil {
				t.Fatal(err)
			}
			mountAll(ms, p.keys, smallMount)
			if err := ms.SetInitialVersion(10); err != nil {
				t.Fatal(err)
			}
			if err := ms.LoadLatestVersion(); err != nil {
				t.Fatal(err)
			}
			p.ours = ms
			t.Cleanup(func() { ms.Close() })
			if err := p.oracle.SetInitialVersion(10); err != nil {
				t.Fatal(err)
			}
			for h := 10; h <= 24; h++ {
				rvBlock(p, h)
				rvSettle()
			}
			snaps := rvKeptSnapshots(t, p)
			t.Logf("snapshots %v", snaps)
			for h := int64(1); h <= 25; h++ {
				if h >= 10 && h < snaps[0] && h < 24 {
					continue // pruned here, kept by rootmulti
				}
				a, b := rvLookup(p.ours, p.keys, h), rvLookup(p.oracle, p.keys, h)
				if sideNorm(a) != sideNorm(b) {
					t.Errorf("height %d: ours %s | rootmulti %s", h, a, b)
				}
			}
		})
	}
}

// TestViewsLoadOlderThenRecommit: LoadVersion of a height between
// kept snapshots, then the same blocks committed again across background
// rewrites: every height from the oldest kept snapshot reads as rootmulti,
// the re-committed ones too, and branches taken before the reload fail.
func TestViewsLoadOlderThenRecommit(t *testing.T) {
	p := rvPair(t, rvConfig(3, 1, 2))
	for h := 1; h <= 14; h++ {
		rvBlock(p, h)
		rvSettle()
	}
	old, err := p.ours.CacheMultiStoreWithVersion(13)
	if err != nil {
		t.Fatal(err)
	}
	snaps := rvKeptSnapshots(t, p)
	target := snaps[0] + 1
	t.Logf("snapshots %v, load %d", snaps, target)
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		if err := s.LoadVersion(target); err != nil {
			t.Fatal(err)
		}
	}
	rec := rvRecover(func() { old.GetKVStore(p.keys["a"]).Get([]byte("same")) })
	if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
		t.Errorf("branch from before the reload: %v", rec)
	}
	for h := snaps[0]; h <= target; h++ {
		if a, b := rvLookup(p.ours, p.keys, h), rvLookup(p.oracle, p.keys, h); a != b {
			t.Errorf("after load, height %d: ours %s | rootmulti %s", h, a, b)
		}
	}
	for h := int(target) + 1; h <= 20; h++ {
		rvBlock(p, h)
		rvSettle()
	}
	snaps = rvKeptSnapshots(t, p)
	t.Logf("snapshots after re-commits %v", snaps)
	for h := snaps[0]; h <= 20; h++ {
		if a, b := rvLookup(p.ours, p.keys, h), rvLookup(p.oracle, p.keys, h); a != b {
			t.Errorf("after re-commits, height %d: ours %s | rootmulti %s", h, a, b)
		}
	}
}
