package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// rfPair: a pair (ours and rootmulti) with snapshots at 5 and 10, 12
// versions, no background rewrites.
func rfPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{t: t, keys: keyring{}, odb: nil, dir: t.TempDir(), cfg: testConfig()}
	p.cfg.SnapshotInterval = -1
	p.cfg.SnapshotKeepRecent = 1
	p.cfg.OpenCheck = "none"
	p.odb = dbm.NewMemDB()
	p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
	t.Cleanup(func() { p.ours.Close() })
	for v := 1; v <= 12; v++ {
		p.commit(map[string][][2][]byte{
			"a": {{fmt.Appendf(nil, "k%02d", v), fmt.Appendf(nil, "v%d", v)}},
			"b": {{fmt.Appendf(nil, "b%02d", v%4), fmt.Appendf(nil, "w%d", v)}},
		})
		if v == 5 || v == 10 {
			if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

// rfDirty writes an uncommitted pair to store a of ours.
func rfDirty(p *pair) {
	p.ours.GetKVStore(p.keys["a"]).Set([]byte("dirty"), []byte("x"))
}

func rfHasDirty(p *pair) bool {
	return p.ours.GetKVStore(p.keys["a"]).Get([]byte("dirty")) != nil
}

// rfCheckLoadedLatest checks that ours is loaded at the latest version with
// rootmulti's answers, and goes on committing as rootmulti.
func rfCheckLoadedLatest(t *testing.T, p *pair) {
	t.Helper()
	if p.ours.DB() == nil {
		t.Fatal("not loaded")
	}
	// rootmulti discards its uncommitted writes on a reload too
	if err := p.oracle.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	p.sameLastCommit()
	latest := p.oracle.LastCommitID().Version
	for _, h := range []int64{latest, latest - 1} {
		for _, k := range []string{"k03", "k11", "zz"} {
			req := types.RequestQuery{Path: "/a/key", Data: []byte(k), Height: h, Prove: true}
			r1, e1 := p.ours.Query(&req)
			req2 := types.RequestQuery{Path: "/a/key", Data: []byte(k), Height: h, Prove: true}
			r2, e2 := p.oracle.Query(&req2)
			if err := sameResponse(r1, e1, r2, e2); err != nil {
				t.Fatalf("query %s at %d: %v", k, h, err)
			}
		}
		cms, err := p.ours.CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Fatalf("CacheMultiStoreWithVersion(%d): %v", h, err)
		}
		ocms, err := p.oracle.CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k03", "k11", "dirty"} {
			if a, b := cms.GetKVStore(p.keys["a"]).Get([]byte(k)), ocms.GetKVStore(p.keys["a"]).Get([]byte(k)); !bytes.Equal(a, b) {
				t.Fatalf("branch at %d: %s = %q, rootmulti %q", h, k, a, b)
			}
		}
	}
	if rfHasDirty(p) {
		t.Fatal("uncommitted write survived the reload")
	}
	p.commit(map[string][][2][]byte{"a": {{[]byte("after"), []byte("1")}}})
	var buf bytes.Buffer
	if err := p.ours.Snapshot(uint64(p.ours.LastCommitID().Version), protoio.NewDelimitedWriter(&buf)); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatalf("further load: %v", err)
	}
	p.sameLastCommit()
}

// rfReplace replaces the file at path by a copy with one byte changed
// (mappings of the old file are untouched).
func rfReplace(t *testing.T, path string, off int) (restore func()) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(b)
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x5a
	tmp := path + ".damaged"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(tmp, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
}

func rfSnapDir(dir string, v int64) string {
	return filepath.Join(dir, fmt.Sprintf("snapshot-%020d", v))
}

// TestReloadFailOlderSnapshotDamaged: a LoadVersion whose open fails after
// the database was closed (the older snapshot's metadata damaged, which the
// checks before it do not read) loads the latest version again, with
// rootmulti's answers; the uncommitted writes are gone.
func TestReloadFailOlderSnapshotDamaged(t *testing.T) {
	p := rfPair(t)
	rfDirty(p)
	rfReplace(t, filepath.Join(rfSnapDir(p.dir, 5), "metadata"), 10)
	err := p.ours.LoadVersion(7)
	t.Logf("LoadVersion(7): %v", err)
	if err == nil {
		t.Fatal("loaded")
	}
	rfCheckLoadedLatest(t, p)
}

// TestReloadFailCurrentDamaged: with the current snapshot's metadata
// damaged, the load and its fallback fail; the multistore is left unloaded
// (answering ErrNotLoaded, the LOCK free) and loads once the file is
// repaired.
func TestReloadFailCurrentDamaged(t *testing.T) {
	p := rfPair(t)
	rfDirty(p)
	restore := rfReplace(t, filepath.Join(rfSnapDir(p.dir, 10), "metadata"), 10)
	err := p.ours.LoadLatestVersion()
	t.Logf("LoadLatestVersion: %v", err)
	if err == nil {
		t.Fatal("loaded")
	}
	rfCheckUnloaded(t, p)
	restore()
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	rfCheckLoadedLatest(t, p)
}

// rfCheckUnloaded checks the unloaded multistore's answers and that the
// LOCK is free.
func rfCheckUnloaded(t *testing.T, p *pair) {
	t.Helper()
	if p.ours.DB() != nil {
		t.Fatalf("still loaded at %d", p.ours.DB().Version())
	}
	req := types.RequestQuery{Path: "/a/key", Data: []byte("k03"), Prove: true}
	if _, err := p.ours.Query(&req); !errors.Is(err, compat.ErrNotLoaded) {
		t.Error("query answered")
	}
	if _, err := p.ours.CacheMultiStoreWithVersion(5); !errors.Is(err, compat.ErrNotLoaded) {
		t.Errorf("CacheMultiStoreWithVersion: %v", err)
	}
	if p.ours.GetCommitKVStore(p.keys["a"]) != nil {
		t.Error("a store is loaded")
	}
	mustPanic(t, func() { p.ours.Commit() })
	var buf bytes.Buffer
	if err := p.ours.Snapshot(5, protoio.NewDelimitedWriter(&buf)); err == nil {
		t.Error("Snapshot answered")
	}
	db, err := multitree.Open(p.dir, multitree.Options{})
	if errors.Is(err, multitree.ErrLocked) {
		t.Errorf("LOCK still held: %v", err)
	}
	if err == nil {
		db.Close()
	}
}

// TestRollbackUnloadedAcrossUpgrade: a rollback to a version before the
// upgrade that added a mounted store is refused with ErrVersion before
// anything is discarded, on a loaded multistore and on one not loaded
// (whose check reads target's stores from a read-only open), so that the
// database is not rolled back to a version the multistore cannot load.
func TestRollbackUnloadedAcrossUpgrade(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 1; i <= 4; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a", "b"}, i)
	}
	abc := mount{iavl: []string{"a", "b", "c"}, transient: "t", memory: "m"}
	p.keys.key("c", types.StoreTypeIAVL)
	rboReopen(t, p, abc, &types.StoreUpgrades{Added: []string{"c"}})
	for i := 5; i <= 7; i++ {
		rboCommit(t, p.ours, p.keys, []string{"a", "b", "c"}, i)
	}
	if err := p.ours.RollbackToVersion(3); !errors.Is(err, multitree.ErrVersion) {
		t.Fatalf("loaded multistore's rollback to 3: %v, want ErrVersion", err)
	}
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	ms, err := compat.NewMultiStore(p.dir, nil, p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.ours = ms
	mountAll(ms, p.keys, abc)
	err = ms.RollbackToVersion(3)
	latest, lerr := multitree.LatestVersion(p.dir)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if !errors.Is(err, multitree.ErrVersion) || latest != 7 {
		t.Fatalf("rollback to 3 (before the upgrade that added the mounted store c) on a multistore not loaded: err %v, latest version now %d; want ErrVersion and version 7 kept, as when it is loaded", err, latest)
	}
}

// TestRollbackCachedNotKept: a rollback to a version whose snapshot was
// pruned (8, 9: snapshot 5 pruned, snapshot 10 current), though the query
// view cache still holds its view, is refused by the check before the
// database is closed, as LoadVersion of it is: the uncommitted writes and
// the loaded multistore stay as they were.
func TestRollbackCachedNotKept(t *testing.T) {
	p := &pair{t: t, keys: keyring{}, dir: t.TempDir(), cfg: testConfig()}
	p.cfg.SnapshotInterval = -1
	p.cfg.SnapshotKeepRecent = 0
	p.cfg.QueryViews = 6
	p.odb = dbm.NewMemDB()
	p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
	t.Cleanup(func() { p.ours.Close() })
	for v := 1; v <= 12; v++ {
		p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%02d", v), []byte("v")}}})
		if v == 5 || v == 10 {
			if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	rfDirty(p)
	before := p.ours.DB()
	if err := p.ours.LoadVersion(8); err == nil || p.ours.DB() != before || !rfHasDirty(p) {
		t.Fatalf("LoadVersion(8), not kept: %v", err)
	}
	err := p.ours.RollbackToVersion(8)
	if err == nil {
		t.Fatal("rolled back to 8, whose snapshot is pruned")
	}
	if p.ours.DB() != before || !rfHasDirty(p) {
		t.Fatalf("the rollback to 8 (not kept: %v) was refused only after the multistore closed its database, which lost the uncommitted writes; want it refused by the check, leaving the loaded multistore as it was", err)
	}
}

// TestUpgradeRefusedBeforeReopen: upgrades the database cannot apply (one
// store renamed to two mounted stores, which rootmulti carries out by
// copying it into both, while a rename here moves a store; a store name of
// 130 bytes, over the database's 119) are refused by the load's checks
// before the database is closed, changing nothing: the multistore stays
// loaded with its uncommitted writes.
func TestUpgradeRefusedBeforeReopen(t *testing.T) {
	long := strings.Repeat("n", 130)
	for name, c := range map[string]struct {
		mount []string
		up    *types.StoreUpgrades
	}{
		"rename to two": {[]string{"c", "d"}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "a", NewKey: "c"}, {OldKey: "a", NewKey: "d"}}}},
		"long name":     {[]string{long}, &types.StoreUpgrades{Added: []string{long}}},
	} {
		t.Run(name, func(t *testing.T) {
			p := rfPair(t)
			for _, n := range c.mount {
				k := p.keys.key(n, types.StoreTypeIAVL)
				p.oracle.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
				p.ours.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
			}
			if err := p.oracle.LoadLatestVersionAndUpgrade(c.up); err != nil {
				t.Fatalf("rootmulti: %v", err)
			}
			rfDirty(p)
			before := p.ours.DB()
			err := p.ours.LoadLatestVersionAndUpgrade(c.up)
			if err == nil {
				return // applied, as rootmulti does
			}
			if p.ours.DB() != before || !rfHasDirty(p) {
				t.Fatalf("upgrades refused after the database was closed (loaded now: %v), the uncommitted writes lost: %v; want them refused by the checks, the multistore left as it was", p.ours.DB() != nil, err)
			}
		})
	}
}
