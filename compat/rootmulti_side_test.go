package compat_test

// Side-by-side tests against rootmulti (cosmossdk.io/store v1.1.1, over a
// cosmos-db memdb), after rootmulti/store_test.go: the same operations run on
// both and every difference fails the test ("DIFF"), except the differences
// accepted by design in sideAccepted, where our own outcome is checked.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/log"
	"cosmossdk.io/store/cachemulti"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// side is rootmulti (o) and our multistore (c) side by side.
type side struct {
	t    *testing.T
	keys keyring
	odb  dbm.DB
	dir  string
	cfg  compat.Config
	o    *rootmulti.Store
	c    *compat.MultiStore
}

var sideStores = []string{"store1", "store2", "store3"}

func newSide(t *testing.T, pruning pruningtypes.PruningOptions) *side {
	z := &side{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
	z.fresh(sideStores, pruning)
	t.Cleanup(func() {
		if z.c != nil {
			z.c.Close()
		}
	})
	return z
}

// fresh closes ours and builds new unloaded instances of both with names
// mounted as IAVL stores, under new StoreKeys.
func (z *side) fresh(names []string, pruning pruningtypes.PruningOptions) {
	if z.c != nil {
		if err := z.c.Close(); err != nil {
			z.t.Fatal(err)
		}
	}
	z.keys = keyring{}
	z.o = rootmulti.NewStore(z.odb, log.NewNopLogger(), metrics.NewNoOpMetrics())
	c, err := compat.NewMultiStore(z.dir, log.NewNopLogger(), z.cfg)
	if err != nil {
		z.t.Fatal(err)
	}
	z.c = c
	z.o.SetPruning(pruning)
	z.c.SetPruning(pruning)
	for _, n := range names {
		k := z.keys.key(n, types.StoreTypeIAVL)
		z.o.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
		z.c.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
	}
}

// both runs f on each and returns (ours, rootmulti) outcomes.
func (z *side) both(f func(s types.CommitMultiStore) any) (string, string) {
	return sideNorm(outcome(func() any { return f(z.c) })), sideNorm(outcome(func() any { return f(z.o) }))
}

var sideLoc = regexp.MustCompile(` ?\[[^\]]*\.go:\d+\]`)

// sideNorm drops the source locations errorsmod prints with %v.
func sideNorm(s string) string { return sideLoc.ReplaceAllString(s, "") }

// samePanicness compares only whether both panicked (messages differ).
func (z *side) samePanicness(what string, f func(s types.CommitMultiStore) any) {
	z.t.Helper()
	a, b := z.both(f)
	if strings.HasPrefix(a, "panic") != strings.HasPrefix(b, "panic") {
		z.t.Errorf("DIFF %s: ours %s | rootmulti %s", what, a, b)
	} else if a != b {
		z.t.Logf("same outcome kind, other text, %s: ours %s | rootmulti %s", what, a, b)
	}
}

// same runs f on both and reports a DIFF if the outcomes differ.
func (z *side) same(what string, f func(s types.CommitMultiStore) any) string {
	z.t.Helper()
	a, b := z.both(f)
	if a != b {
		z.t.Errorf("DIFF %s: ours %s | rootmulti %s", what, a, b)
	}
	return a
}

// sideAccept is a difference from rootmulti accepted by design: why, and the
// pattern our outcome must match in full.
type sideAccept struct {
	reason string
	ours   string
}

// sideAccepted lists every accepted difference, by comparison name.
var sideAccepted = map[string]sideAccept{
	"unloaded/GetCommitInfo": {
		"ours reads commit infos only once loaded", `err: no commit info found: compat: the multistore is not loaded`},
	"unloaded/CacheMultiStoreWithVersion": {
		"ours serves versions only once loaded", `compat: the multistore is not loaded`},
	"stale-versioned-branch/uncached-read": {
		"a reload releases the versions held for earlier CacheMultiStoreWithVersion branches",
		`panic: compat: version no longer held for queries: store "store1" at version 1`},
	"stale-versioned-branch/iterate": {
		"a reload releases the versions held for earlier CacheMultiStoreWithVersion branches",
		`panic: compat: version no longer held for queries: store "store1" at version 1`},
	"upgrade-delete/StoreKeysByName-after-commit": {
		"ours keeps the deleted store's key until the next load (queries read the map concurrently)",
		`\[restore2 store1 store3 store4\]`},
	"upgrade/re-add-deleted-store": {
		"ours accepts; rootmulti refuses since its iavl keeps the deleted store's versions", `<nil>`},
	"upgrade/rename-back": {
		"ours accepts; rootmulti refuses since its iavl keeps the old name's versions", `<nil>`},
	"upgrade/rename-one-store-twice": {
		"ours refuses a second rename of the same store (a rename moves it); rootmulti copies it into both",
		`.*cannot rename "store2" to "(?:restore2|copy2)": the same upgrades deleted or renamed it before.*`},
	"rename-old-mounted/old-store": {
		"ours drops the renamed-from store though its name stays mounted; rootmulti keeps it", `""`},
	"rename-old-mounted/WorkingHash": {
		"ours hashes the commit info without the renamed-from store; rootmulti keeps it",
		`8D866E105864EF96C192027E9221F4726F3904BA6B5CB7691917C4D4F8FBF17D`},
	"rename-old-mounted/commit-info": {
		"ours drops the renamed-from store from the commit info; rootmulti keeps it", `v2 \[restore2 store1 store3\]`},
	"rename-old-mounted/reload": {
		"the old name is not in our commit info, so mounting it again needs an upgrade",
		`version of store store2 mismatch root store's version; expected 2 got 0; new stores should be added using StoreUpgrades`},
	"rename-old-mounted/old-store-after-reload": {
		"the refused load leaves a fresh instance unloaded", `<no store>`},
	"fresh-db/rename-between-mounted-stores": {
		"on a fresh database ours refuses a rename between two mounted stores; rootmulti accepts",
		`compat: cannot rename store "store2" to "store3": both exist`},
	"initial-version-before-load/Commit": {
		"ours commits the trees at the initial version (README); rootmulti at 1 under a later commit info",
		`5 2EBD175E29B3D3B26A75B75F0DFA6D20FD3BF9632ECA24F992B2933C440DEA9E`},
	"initial-version-before-load/store-version": {
		"ours commits the trees at the initial version (README); rootmulti at 1", `5`},
	"initial-version-before-load/reload": {
		"ours' trees are at the commit info's version; rootmulti refuses its trees at 1", `<nil>`},
	"rollback/GetCommitInfo-rolled-back": {
		"ours has no commit info for rolled-back versions; rootmulti returns the stale ones",
		`err: no commit info found`},
	"rollback-unloaded/RollbackToVersion": {
		"ours rolls back and loads an unloaded instance; rootmulti fails", `<nil>`},
	"reload-before-commit/read": {
		"a store an upgrade removed reads empty after a reload before the Commit; rootmulti's reads its committed pairs until the Commit drops it (the app hash is the same)", `""`},
	"rollback-unloaded/LastCommitID": {
		"ours is loaded at the rolled-back-to version", `version 5, hash of commit 5: true`},
}

// accepted checks the outcomes of an accepted difference: ours must match the
// table's pattern; rootmulti's is logged.
func (z *side) accepted(name, ours, root string) {
	z.t.Helper()
	a, ok := sideAccepted[name]
	if !ok {
		z.t.Fatalf("%s: not in sideAccepted", name)
	}
	if !regexp.MustCompile(`^(?:` + a.ours + `)$`).MatchString(ours) {
		z.t.Errorf("DIFF %s: ours %s, want %s (%s) | rootmulti %s", name, ours, a.ours, a.reason, root)
		return
	}
	z.t.Logf("accepted %s (%s): ours %s | rootmulti %s", name, a.reason, ours, root)
}

// acceptedBoth runs f on both and checks an accepted difference.
func (z *side) acceptedBoth(name string, f func(s types.CommitMultiStore) any) {
	z.t.Helper()
	a, b := z.both(f)
	z.accepted(name, a, b)
}

// want runs f on both: the outcomes must be equal, and be want.
func (z *side) want(what, want string, f func(s types.CommitMultiStore) any) {
	z.t.Helper()
	if a := z.same(what, f); a != want {
		z.t.Errorf("%s: %s, want %s", what, a, want)
	}
}

func (z *side) loadBoth(what string, f func(s types.CommitMultiStore) error) (error, error) {
	z.t.Helper()
	ec, eo := f(z.c), f(z.o)
	if (ec == nil) != (eo == nil) {
		z.t.Errorf("DIFF %s: ours err=%v | rootmulti err=%v", what, ec, eo)
	}
	return ec, eo
}

func (z *side) commit() types.CommitID {
	z.t.Helper()
	wc, wo := z.c.WorkingHash(), z.o.WorkingHash()
	if !bytes.Equal(wc, wo) {
		z.t.Errorf("DIFF WorkingHash: ours %X | rootmulti %X", wc, wo)
	}
	a, b := z.c.Commit(), z.o.Commit()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		z.t.Fatalf("DIFF Commit: ours %d %X | rootmulti %d %X", a.Version, a.Hash, b.Version, b.Hash)
	}
	if !bytes.Equal(a.Hash, wc) {
		z.t.Errorf("our Commit hash differs from our WorkingHash")
	}
	z.sameLCID()
	return a
}

func (z *side) sameLCID() {
	z.t.Helper()
	a, b := z.c.LastCommitID(), z.o.LastCommitID()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		z.t.Errorf("DIFF LastCommitID: ours %d %X | rootmulti %d %X", a.Version, a.Hash, b.Version, b.Hash)
	}
	if z.c.LatestVersion() != z.o.LatestVersion() {
		z.t.Errorf("DIFF LatestVersion: ours %d | rootmulti %d", z.c.LatestVersion(), z.o.LatestVersion())
	}
}

func (z *side) set(store string, k, v string) {
	z.c.GetStoreByName(store).(types.KVStore).Set([]byte(k), []byte(v))
	z.o.GetStoreByName(store).(types.KVStore).Set([]byte(k), []byte(v))
}

func keysByNameOf(s types.CommitMultiStore) map[string]types.StoreKey {
	return s.(interface {
		StoreKeysByName() map[string]types.StoreKey
	}).StoreKeysByName()
}

func keyNames(s types.CommitMultiStore) []string {
	var names []string
	for n := range keysByNameOf(s) {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func getByName(s types.CommitMultiStore, name, k string) any {
	st := storeByName(s, name)
	if st == nil {
		return "<no store>"
	}
	return fmt.Sprintf("%q", st.(types.KVStore).Get([]byte(k)))
}

func storeByName(s types.CommitMultiStore, name string) types.Store {
	switch s := s.(type) {
	case *compat.MultiStore:
		if st := s.GetStoreByName(name); st != nil {
			return st
		}
	case *rootmulti.Store:
		if st := s.GetStoreByName(name); st != nil {
			return st
		}
	}
	return nil
}

// getCommitInfo is s.GetCommitInfo(ver) (not in types.CommitMultiStore).
func getCommitInfo(s types.CommitMultiStore, ver int64) (*types.CommitInfo, error) {
	switch s := s.(type) {
	case *compat.MultiStore:
		return s.GetCommitInfo(ver)
	case *rootmulti.Store:
		return s.GetCommitInfo(ver)
	}
	return nil, fmt.Errorf("%T has no GetCommitInfo", s)
}

func commitInfoOf(s types.CommitMultiStore, ver int64) any {
	ci, err := getCommitInfo(s, ver)
	if err != nil {
		return "err: " + err.Error()
	}
	var names []string
	for _, si := range ci.StoreInfos {
		names = append(names, fmt.Sprintf("%s@%d:%X", si.Name, si.CommitId.Version, si.CommitId.Hash))
	}
	return fmt.Sprintf("v%d %s hash=%X", ci.Version, strings.Join(names, ","), ci.Hash())
}

// commitInfoNames is the version and the store names of a commit info.
func commitInfoNames(s types.CommitMultiStore, ver int64) string {
	ci, err := getCommitInfo(s, ver)
	if err != nil {
		return "err: " + err.Error()
	}
	var names []string
	for _, si := range ci.StoreInfos {
		names = append(names, si.Name)
	}
	return fmt.Sprintf("v%d %v", ci.Version, names)
}

func queryOf(s types.CommitMultiStore, q types.RequestQuery) any {
	res, err := s.(types.Queryable).Query(&q)
	_, code, _ := errorsmod.ABCIInfo(err, false)
	if res == nil {
		return fmt.Sprintf("nil res err=%v code=%d", err, code)
	}
	proof := ""
	if res.ProofOps != nil {
		bz, _ := res.ProofOps.Marshal()
		proof = fmt.Sprintf("%X", sha256.Sum256(bz))
	}
	return fmt.Sprintf("err=%v code=%d h=%d key=%q val=%q(nil=%v) log=%q proof=%s path-after=%q", err, code, res.Height, res.Key, res.Value, res.Value == nil, res.Log, proof, q.Path)
}

// ---------------------------------------------------------------------------

func TestRootmultiSideStoreMountAndTypes(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.same("GetStoreType", func(s types.CommitMultiStore) any { return s.GetStoreType() })
	k1 := z.keys["store1"]
	z.same("mount dup key", func(s types.CommitMultiStore) any {
		s.MountStoreWithDB(k1, types.StoreTypeIAVL, nil)
		return nil
	})
	z.same("mount nil", func(s types.CommitMultiStore) any { s.MountStoreWithDB(nil, types.StoreTypeIAVL, nil); return nil })
	// dup name: messages include the key's address, compare panic-ness only
	dup := types.NewKVStoreKey("store1")
	a, b := z.both(func(s types.CommitMultiStore) any { s.MountStoreWithDB(dup, types.StoreTypeIAVL, nil); return nil })
	if strings.HasPrefix(a, "panic") != strings.HasPrefix(b, "panic") {
		t.Errorf("DIFF mount dup name: ours %s | rootmulti %s", a, b)
	}
	// TestCacheWraps / TestCacheMultiStore: on an unloaded store
	z.same("CacheWrap type (unloaded)", func(s types.CommitMultiStore) any { return fmt.Sprintf("%T", s.CacheWrap()) })
	z.same("CacheWrapWithTrace type (unloaded)", func(s types.CommitMultiStore) any {
		return fmt.Sprintf("%T", s.CacheWrapWithTrace(nil, nil))
	})
	z.same("CacheMultiStore type (unloaded)", func(s types.CommitMultiStore) any { return fmt.Sprintf("%T", s.CacheMultiStore()) })
	if _, ok := z.c.CacheMultiStore().(cachemulti.Store); !ok {
		t.Errorf("DIFF CacheMultiStore is not cachemulti.Store")
	}
	z.same("LastCommitID (unloaded)", func(s types.CommitMultiStore) any { return s.LastCommitID() })
	z.same("LatestVersion (unloaded)", func(s types.CommitMultiStore) any { return s.LatestVersion() })
	z.same("GetStoreByName (unloaded)", func(s types.CommitMultiStore) any { return storeByName(s, "store1") == nil })
	z.same("GetCommitKVStore (unloaded)", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(k1) == nil })
	z.same("Query (unloaded)", func(s types.CommitMultiStore) any {
		return queryOf(s, types.RequestQuery{Path: "/store1/key", Data: []byte("k")})
	})
	z.want("WorkingHash (unloaded)", "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", func(s types.CommitMultiStore) any {
		return fmt.Sprintf("%X", s.WorkingHash())
	})
	z.acceptedBoth("unloaded/GetCommitInfo", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })
	z.acceptedBoth("unloaded/CacheMultiStoreWithVersion", func(s types.CommitMultiStore) any {
		_, err := s.CacheMultiStoreWithVersion(1)
		return err
	})
	z.same("SetInitialVersion (unloaded)", func(s types.CommitMultiStore) any { return s.SetInitialVersion(1) })
}

// TestRootmultiSideUnloadedAfterCommits: reads on an unloaded instance over a
// database with versions (what the upgrade store loader sees).
func TestRootmultiSideUnloadedAfterCommits(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "k", "v")
	z.commit()
	z.commit()
	z.fresh(sideStores, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.same("LastCommitID (unloaded, v2)", func(s types.CommitMultiStore) any { return s.LastCommitID() })
	z.same("LatestVersion (unloaded, v2)", func(s types.CommitMultiStore) any { return s.LatestVersion() })
	z.acceptedBoth("unloaded/GetCommitInfo", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })
	z.acceptedBoth("unloaded/CacheMultiStoreWithVersion", func(s types.CommitMultiStore) any {
		_, err := s.CacheMultiStoreWithVersion(1)
		return err
	})
	z.same("Query (unloaded, v2)", func(s types.CommitMultiStore) any {
		return queryOf(s, types.RequestQuery{Path: "/store1/key", Data: []byte("k")})
	})
}

func TestRootmultiSideCacheMultiStoreWithVersion(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	z.set("store1", "wind", "blows")
	cid := z.commit()
	if cid.Version != 1 {
		t.Fatal(cid)
	}
	z.same("CMSWV(2)", func(s types.CommitMultiStore) any { _, err := s.CacheMultiStoreWithVersion(2); return err })
	z.same("CMSWV(0)", func(s types.CommitMultiStore) any { _, err := s.CacheMultiStoreWithVersion(0); return err })
	z.same("CMSWV(-1)", func(s types.CommitMultiStore) any { _, err := s.CacheMultiStoreWithVersion(-1); return err })
	k1 := z.keys["store1"]
	cmsC, errC := z.c.CacheMultiStoreWithVersion(1)
	cmsO, errO := z.o.CacheMultiStoreWithVersion(1)
	if errC != nil || errO != nil {
		t.Fatalf("CMSWV(1): %v | %v", errC, errO)
	}
	kvC, kvO := cmsC.GetKVStore(k1), cmsO.GetKVStore(k1)
	if a, b := kvC.Get([]byte("wind")), kvO.Get([]byte("wind")); !bytes.Equal(a, b) {
		t.Errorf("DIFF CMSWV get: %q | %q", a, b)
	}

	// add store4 and store5 on the loaded instances
	for _, n := range []string{"store4", "store5"} {
		k := z.keys.key(n, types.StoreTypeIAVL)
		z.c.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
		z.o.MountStoreWithDB(k, types.StoreTypeIAVL, nil)
	}
	z.loadBoth("upgrade add store4,5", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"store4", "store5"}})
	})
	z.commit()
	z.same("CMSWV(1) after adding stores", func(s types.CommitMultiStore) any { _, err := s.CacheMultiStoreWithVersion(1); return err })
	z.samePanicness("CMSWV(1) read added store4", func(s types.CommitMultiStore) any {
		cms, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return cms.GetKVStore(z.keys["store4"]).Get([]byte("x")) == nil
	})
	z.same("CMSWV(1) GetKVStore added store4 (no read)", func(s types.CommitMultiStore) any {
		cms, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return cms.GetKVStore(z.keys["store4"]) != nil
	})
	z.same("CMSWV(2) read store1", func(s types.CommitMultiStore) any {
		cms, err := s.CacheMultiStoreWithVersion(2)
		if err != nil {
			return err
		}
		return fmt.Sprintf("%q", cms.GetKVStore(k1).Get([]byte("wind")))
	})

	// the branch made before the reload: reads and writes
	a := outcome(func() any { return fmt.Sprintf("%q", kvC.Get([]byte("wind"))) })
	b := outcome(func() any { return fmt.Sprintf("%q", kvO.Get([]byte("wind"))) })
	if a != b {
		t.Errorf("DIFF read of a CacheMultiStoreWithVersion(1) branch made before LoadLatestVersionAndUpgrade: ours %s | rootmulti %s", a, b)
	}
	a = outcome(func() any { return fmt.Sprintf("%q", kvC.Get([]byte("uncached"))) })
	b = outcome(func() any { return fmt.Sprintf("%q", kvO.Get([]byte("uncached"))) })
	z.accepted("stale-versioned-branch/uncached-read", a, b)
	a = outcome(func() any {
		it := kvC.Iterator(nil, nil)
		defer it.Close()
		return it.Valid()
	})
	b = outcome(func() any {
		it := kvO.Iterator(nil, nil)
		defer it.Close()
		return it.Valid()
	})
	z.accepted("stale-versioned-branch/iterate", a, b)
	a = outcome(func() any { kvC.Set([]byte("wind"), []byte("newValue")); cmsC.Write(); return nil })
	b = outcome(func() any { kvO.Set([]byte("wind"), []byte("newValue")); cmsO.Write(); return nil })
	if strings.HasPrefix(a, "panic") != strings.HasPrefix(b, "panic") {
		t.Errorf("DIFF write to versioned branch: ours %s | rootmulti %s", a, b)
	} else {
		t.Logf("write to versioned branch: ours %s | rootmulti %s", a, b)
	}
	// and a fresh branch: must panic on Write in both
	a, b = z.both(func(s types.CommitMultiStore) any {
		cms, _ := s.CacheMultiStoreWithVersion(1)
		cms.GetKVStore(k1).Set([]byte("wind"), []byte("x"))
		cms.Write()
		return nil
	})
	if strings.HasPrefix(a, "panic") != strings.HasPrefix(b, "panic") {
		t.Errorf("DIFF write to fresh versioned branch: ours %s | rootmulti %s", a, b)
	}
}

func TestRootmultiSideHashStableWithEmptyCommit(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "wind", "blows")
	h1 := z.commit()
	h2 := z.commit()
	if !bytes.Equal(h1.Hash, h2.Hash) || h2.Version != 2 {
		t.Errorf("empty commit changed hash")
	}
}

func TestRootmultiSideMultistoreCommitLoad(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	z.same("GetStoreByName store1", func(s types.CommitMultiStore) any { return storeByName(s, "store1") != nil })
	z.same("GetStoreByName store77", func(s types.CommitMultiStore) any { return storeByName(s, "store77") != nil })
	for i := 0; i < 3; i++ {
		z.commit()
		for _, n := range sideStores {
			z.same("store LastCommitID "+n, func(s types.CommitMultiStore) any {
				return s.GetCommitKVStore(z.keys[n]).LastCommitID()
			})
		}
	}
	z.fresh(sideStores, po)
	z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	z.commit()
	z.fresh(sideStores, po)
	z.loadBoth("LoadVersion(2)", func(s types.CommitMultiStore) error { return s.LoadVersion(2) })
	z.sameLCID()
	for _, n := range sideStores {
		z.same("store LastCommitID after LoadVersion(2) "+n, func(s types.CommitMultiStore) any {
			return s.GetCommitKVStore(z.keys[n]).LastCommitID()
		})
	}
	z.same("LatestVersion after LoadVersion(2)", func(s types.CommitMultiStore) any { return s.LatestVersion() })
	z.commit()
	z.commit()
	z.commit()
}

func TestRootmultiSideMultistoreLoadWithUpgrade(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "first", "store")
	z.set("store2", "second", "restore")
	z.set("store3", "third", "dropped")
	z.same("store4 absent", func(s types.CommitMultiStore) any { return storeByName(s, "store4") == nil })
	z.commit()
	z.same("GetCommitInfo(1)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })

	z.fresh(sideStores, po)
	z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	z.same("store2 get", func(s types.CommitMultiStore) any { return getByName(s, "store2", "second") })

	modified := []string{"store1", "restore2", "store3", "store4"}
	upgrades := &types.StoreUpgrades{
		Added:   []string{"store4"},
		Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "restore2"}},
		Deleted: []string{"store3"},
	}
	z.fresh(modified, po)
	z.loadBoth("upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(upgrades) })
	z.same("store1 get", func(s types.CommitMultiStore) any { return getByName(s, "store1", "first") })
	// store3, deleted but still mounted: an empty store until the Commit
	k3 := z.keys["store3"]
	z.want("store3 GetStoreByName before commit", `""`, func(s types.CommitMultiStore) any { return getByName(s, "store3", "third") })
	z.want("store3 GetKVStore before commit", `""`, func(s types.CommitMultiStore) any {
		return fmt.Sprintf("%q", s.GetKVStore(k3).Get([]byte("third")))
	})
	z.want("store3 CacheMultiStore before commit", `""`, func(s types.CommitMultiStore) any {
		return fmt.Sprintf("%q", s.CacheMultiStore().GetKVStore(k3).Get([]byte("third")))
	})
	z.want("store3 CacheMultiStoreWithVersion(1) before commit", `"dropped"`, func(s types.CommitMultiStore) any {
		cms, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return fmt.Sprintf("%q", cms.GetKVStore(k3).Get([]byte("third")))
	})
	z.want("store3 in StoreKeysByName before commit", "true", func(s types.CommitMultiStore) any {
		_, ok := keysByNameOf(s)["store3"]
		return ok
	})
	z.set("store3", "written", "dropped with the store")
	z.same("store4 empty iterate", func(s types.CommitMultiStore) any {
		it := storeByName(s, "store4").(types.KVStore).Iterator(nil, nil)
		defer it.Close()
		n := 0
		for ; it.Valid(); it.Next() {
			n++
		}
		return n
	})
	z.set("store4", "fourth", "created")
	z.same("store2 not mounted", func(s types.CommitMultiStore) any { return storeByName(s, "store2") == nil })
	z.same("restore2 has old data", func(s types.CommitMultiStore) any { return getByName(s, "restore2", "second") })
	// queries between load and commit
	for _, q := range []types.RequestQuery{
		{Path: "/store3/key", Data: []byte("third"), Height: 1, Prove: true},
		{Path: "/store3/key", Data: []byte("third")},
		{Path: "/store3/subspace", Data: []byte("th")},
		{Path: "/restore2/key", Data: []byte("second")},
		{Path: "/restore2/key", Data: []byte("second"), Height: 1},
		{Path: "/store2/key", Data: []byte("second"), Height: 1},
		{Path: "/store4/key", Data: []byte("fourth")},
		{Path: "/store1/key", Data: []byte("first"), Height: 1, Prove: true},
	} {
		z.same(fmt.Sprintf("query %s h=%d prove=%v after upgrade, before commit", q.Path, q.Height, q.Prove), func(s types.CommitMultiStore) any { return queryOf(s, q) })
	}
	migrated := z.commit()
	if migrated.Version != 2 {
		t.Fatal(migrated)
	}
	z.want("store3 GetStoreByName after commit is nil", "true", func(s types.CommitMultiStore) any { return storeByName(s, "store3") == nil })
	z.want("store3 GetKVStore after commit panics", "true", func(s types.CommitMultiStore) any {
		return strings.HasPrefix(outcome(func() any { return s.GetKVStore(k3) }), "panic")
	})
	z.acceptedBoth("upgrade-delete/StoreKeysByName-after-commit", func(s types.CommitMultiStore) any { return keyNames(s) })

	z.fresh([]string{"store1", "restore2", "store4"}, po)
	z.loadBoth("reload without store3", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	z.same("rl1", func(s types.CommitMultiStore) any { return getByName(s, "store1", "first") })
	z.same("rl2", func(s types.CommitMultiStore) any { return getByName(s, "restore2", "second") })
	z.same("rl4", func(s types.CommitMultiStore) any { return getByName(s, "store4", "fourth") })
	z.same("GetCommitInfo(2)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 2) })
	z.same("GetCommitInfo(1) after reload", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })
	z.want("StoreKeysByName after reload", "[restore2 store1 store4]", func(s types.CommitMultiStore) any { return keyNames(s) })
	z.commit()

	// reload with store3 still mounted (no upgrades): both must refuse
	z.fresh([]string{"store1", "restore2", "store3", "store4"}, po)
	a, b := z.both(func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
	if (a == "<nil>") != (b == "<nil>") {
		t.Errorf("DIFF reload with deleted store3 mounted: ours %s | rootmulti %s", a, b)
	}
}

// TestRootmultiSideReaddDeletedStore: a store deleted by one upgrade, added
// back by a later one.
func TestRootmultiSideReaddDeletedStore(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store3", "k", "v")
	z.set("store1", "k", "v")
	z.commit()
	z.fresh([]string{"store1", "store2", "store3"}, po)
	z.loadBoth("delete store3", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Deleted: []string{"store3"}})
	})
	z.commit()
	z.fresh([]string{"store1", "store2"}, po)
	z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.commit()
	z.fresh([]string{"store1", "store2", "store3"}, po)
	z.acceptedBoth("upgrade/re-add-deleted-store", func(s types.CommitMultiStore) any {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"store3"}})
	})
	// ours: store3 starts empty and commits
	if got := getByName(z.c, "store3", "k"); got != `""` {
		t.Errorf("re-added store3 has the deleted store's data: %v", got)
	}
	z.c.GetStoreByName("store3").(types.KVStore).Set([]byte("k2"), []byte("v2"))
	if id := z.c.Commit(); id.Version != 4 {
		t.Errorf("commit after re-adding store3: %v", id)
	}
	if got := getByName(z.c, "store3", "k2"); got != `"v2"` {
		t.Errorf("re-added store3 after commit: %v", got)
	}
}

// TestRootmultiSideRenameOneStoreTwice: store2 renamed to two stores in one
// load is refused before it changes anything: the store reloads as it was,
// without the upgrades, and commits on.
func TestRootmultiSideRenameOneStoreTwice(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store2", "k", "v")
	z.commit()
	z.fresh([]string{"store1", "restore2", "copy2", "store3"}, po)
	z.acceptedBoth("upgrade/rename-one-store-twice", func(s types.CommitMultiStore) any {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Renamed: []types.StoreRename{
			{OldKey: "store2", NewKey: "restore2"}, {OldKey: "store2", NewKey: "copy2"}}})
	})
	c, err := compat.NewMultiStore(z.dir, log.NewNopLogger(), z.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := keyring{}
	for _, n := range sideStores {
		c.MountStoreWithDB(keys.key(n, types.StoreTypeIAVL), types.StoreTypeIAVL, nil)
	}
	z.c.Close()
	z.c = nil
	if err := c.LoadLatestVersion(); err != nil {
		t.Fatalf("load after the refused upgrade: %v", err)
	}
	if got := getByName(c, "store2", "k"); got != `"v"` || c.LastCommitID().Version != 1 {
		t.Fatalf("store2 after the refused upgrade: %v at version %d", got, c.LastCommitID().Version)
	}
}

// TestRootmultiSideRenameBack: store2 renamed to restore2, later back to store2.
func TestRootmultiSideRenameBack(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store2", "k", "v")
	z.commit()
	z.fresh([]string{"store1", "restore2", "store3"}, po)
	z.loadBoth("rename", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "restore2"}}})
	})
	z.commit()
	z.fresh([]string{"store1", "store2", "store3"}, po)
	z.acceptedBoth("upgrade/rename-back", func(s types.CommitMultiStore) any {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "restore2", NewKey: "store2"}}})
	})
	// ours: store2 has the data back and commits
	if got := getByName(z.c, "store2", "k"); got != `"v"` {
		t.Errorf("store2 renamed back: %v", got)
	}
	if id := z.c.Commit(); id.Version != 3 {
		t.Errorf("commit after renaming back: %v", id)
	}
}

// TestRootmultiSideRenameWithOldStillMounted: a rename with both names
// mounted.
func TestRootmultiSideRenameWithOldStillMounted(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store2", "k", "v")
	z.commit()
	z.fresh([]string{"store1", "store2", "restore2", "store3"}, po)
	z.loadBoth("rename with old mounted", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "restore2"}}})
	})
	z.acceptedBoth("rename-old-mounted/old-store", func(s types.CommitMultiStore) any { return getByName(s, "store2", "k") })
	z.same("restore2 get", func(s types.CommitMultiStore) any { return getByName(s, "restore2", "k") })
	z.acceptedBoth("rename-old-mounted/WorkingHash", func(s types.CommitMultiStore) any { return fmt.Sprintf("%X", s.WorkingHash()) })
	wc := z.c.WorkingHash()
	a, b := z.both(func(s types.CommitMultiStore) any { id := s.Commit(); return fmt.Sprintf("%d %X", id.Version, id.Hash) })
	if want := fmt.Sprintf("2 %X", wc); a != want {
		t.Errorf("our Commit %s, want %s (our WorkingHash)", a, want)
	}
	t.Logf("Commit: ours %s | rootmulti %s", a, b)
	z.acceptedBoth("rename-old-mounted/commit-info", func(s types.CommitMultiStore) any { return commitInfoNames(s, 2) })
	z.same("store2 get after commit", func(s types.CommitMultiStore) any { return getByName(s, "store2", "k") })
	z.same("restore2 get after commit", func(s types.CommitMultiStore) any { return getByName(s, "restore2", "k") })
	z.fresh([]string{"store1", "store2", "restore2", "store3"}, po)
	z.acceptedBoth("rename-old-mounted/reload", func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
	z.acceptedBoth("rename-old-mounted/old-store-after-reload", func(s types.CommitMultiStore) any { return getByName(s, "store2", "k") })
}

func TestRootmultiSideMultiStoreRestart(t *testing.T) {
	po := pruningtypes.NewCustomPruningOptions(2, 1)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	for i := 1; i < 3; i++ {
		z.set("store1", "wind", fmt.Sprintf("blows:%d", i))
		z.set("store2", "water", fmt.Sprintf("flows:%d", i))
		z.set("store3", "fire", fmt.Sprintf("burns:%d", i))
		z.commit()
		z.same(fmt.Sprintf("GetCommitInfo(%d)", i), func(s types.CommitMultiStore) any { return commitInfoOf(s, int64(i)) })
	}
	z.set("store1", "wind", "blows:3")
	z.set("store2", "water", "flows:3")
	z.commit()
	z.same("GetCommitInfo(3)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 3) })
	z.set("store3", "fire", "burns:3")
	z.commit()
	z.same("GetCommitInfo(4)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 4) })
	z.same("GetPruning", func(s types.CommitMultiStore) any { return s.GetPruning() })
	z.fresh(sideStores, po)
	z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	z.same("store1", func(s types.CommitMultiStore) any { return getByName(s, "store1", "wind") })
	z.same("store2", func(s types.CommitMultiStore) any { return getByName(s, "store2", "water") })
	z.same("store3", func(s types.CommitMultiStore) any { return getByName(s, "store3", "fire") })
	z.same("GetPruning after reload", func(s types.CommitMultiStore) any { return s.GetPruning() })
}

func TestRootmultiSideMultiStoreQuery(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.commit()
	z.same("bad-name", func(s types.CommitMultiStore) any { return storeByName(s, "bad-name") == nil })
	z.set("store1", "wind", "blows")
	z.set("store2", "water", "flows")
	cid := z.commit()
	z.fresh(sideStores, po)
	z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	ver := cid.Version
	for _, q := range []types.RequestQuery{
		{Path: "/key", Data: []byte("wind"), Height: ver},
		{Path: "h897fy32890rf63296r92", Data: []byte("wind"), Height: ver},
		{Path: "/garbage/key", Data: []byte("wind"), Height: ver},
		{Path: "/store1/key", Data: []byte("wind"), Height: ver},
		{Path: "/store2/key", Data: []byte("wind"), Height: ver, Prove: true},
		{Path: "/store2/key", Data: []byte("water"), Height: ver, Prove: true},
		{Path: "/store1/key", Data: []byte("wind"), Height: 1, Prove: true},
		{Path: "/store1/key", Data: []byte("wind"), Height: 0, Prove: true},
		{Path: "/store1/key", Data: []byte("wind"), Height: -1},
		{Path: "/store1/key", Data: []byte("wind"), Height: -1, Prove: true},
		{Path: "/store1/key", Data: []byte("wind"), Height: 3},
		{Path: "/store1/key", Data: []byte("wind"), Height: 3, Prove: true},
		{Path: "/store1/subspace", Data: []byte("w")},
		{Path: "/store1/subspace", Data: []byte("w"), Height: 1},
		{Path: "/store1/subspace", Data: []byte("w"), Prove: true},
		{Path: "/store1/key/extra", Data: []byte("wind")},
		{Path: "/store1/", Data: []byte("wind")},
		{Path: "/", Data: []byte("wind")},
		{Path: "", Data: []byte("wind")},
	} {
		z.same(fmt.Sprintf("query %q h=%d prove=%v", q.Path, q.Height, q.Prove), func(s types.CommitMultiStore) any { return queryOf(s, q) })
	}
}

func TestRootmultiSidePruningNothingHistorical(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	for i := 0; i < 10; i++ {
		z.commit()
	}
	for v := int64(1); v <= 10; v++ {
		z.same(fmt.Sprintf("CMSWV(%d) on empty stores", v), func(s types.CommitMultiStore) any {
			cms, err := s.CacheMultiStoreWithVersion(v)
			if err != nil {
				return err
			}
			return fmt.Sprintf("%q", cms.GetKVStore(z.keys["store1"]).Get([]byte("x")))
		})
	}
	z.same("CMSWV(11)", func(s types.CommitMultiStore) any { _, err := s.CacheMultiStoreWithVersion(11); return err })
}

// TestRootmultiSideLoadVersionRepeatedly: rootmulti's
// TestMultiStore_Pruning_SameHeightsTwice, with pruning nothing.
func TestRootmultiSideLoadVersionRepeatedly(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	for i := 0; i < 10; i++ {
		z.set("store1", fmt.Sprintf("k%d", i), "v")
		z.commit()
	}
	for v := int64(1); v < 10; v++ {
		z.loadBoth(fmt.Sprintf("LoadVersion(%d)", v), func(s types.CommitMultiStore) error { return s.LoadVersion(v) })
		z.sameLCID()
		z.same(fmt.Sprintf("Get after LoadVersion(%d)", v), func(s types.CommitMultiStore) any { return getByName(s, "store1", "k5") })
	}
	z.loadBoth("LoadVersion(9)", func(s types.CommitMultiStore) error { return s.LoadVersion(9) })
	z.set("store1", "k9", "v")
	z.commit() // 10 again
	z.commit() // 11
	z.loadBoth("LoadVersion(12)", func(s types.CommitMultiStore) error { return s.LoadVersion(12) })
	z.sameLCID()
}

// TestRootmultiSideUnevenStoresHeightCheck: a store mounted without an
// upgrade is refused by the load, and the loaded stores, their uncommitted
// writes included, read and commit on.
func TestRootmultiSideUnevenStoresHeightCheck(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "k", "v")
	z.commit()
	z.set("store1", "pending", "p")
	z.set("store2", "pending", "p2")
	k4 := z.keys.key("store4", types.StoreTypeIAVL)
	z.c.MountStoreWithDB(k4, types.StoreTypeIAVL, nil)
	z.o.MountStoreWithDB(k4, types.StoreTypeIAVL, nil)
	ec, eo := z.loadBoth("load with store4 mounted, no upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	if ec == nil || eo == nil {
		t.Fatalf("load with store4 mounted, no upgrade: ours %v | rootmulti %v, want both refused", ec, eo)
	}
	if ec.Error() != eo.Error() {
		t.Logf("error text: ours %q | rootmulti %q", ec, eo)
	}
	z.want("Get store1 after refused load", `"v"`, func(s types.CommitMultiStore) any { return getByName(s, "store1", "k") })
	z.want("uncommitted store1 write after refused load", `"p"`, func(s types.CommitMultiStore) any { return getByName(s, "store1", "pending") })
	z.want("uncommitted store2 write after refused load", `"p2"`, func(s types.CommitMultiStore) any { return getByName(s, "store2", "pending") })
	z.want("store4 after refused load", "<no store>", func(s types.CommitMultiStore) any { return getByName(s, "store4", "k") })
	z.same("LastCommitID after refused load", func(s types.CommitMultiStore) any { return s.LastCommitID() })
	for _, q := range []types.RequestQuery{
		{Path: "/store1/key", Data: []byte("k"), Height: 1},
		{Path: "/store1/key", Data: []byte("k"), Prove: true},
		{Path: "/store1/key", Data: []byte("pending")},
		{Path: "/store4/key", Data: []byte("k")},
	} {
		z.same(fmt.Sprintf("query %s %q h=%d after refused load", q.Path, q.Data, q.Height), func(s types.CommitMultiStore) any { return queryOf(s, q) })
	}
	z.commit()
	z.want("store1 write committed after refused load", `"p"`, func(s types.CommitMultiStore) any { return getByName(s, "store1", "pending") })
	z.same("query after commit", func(s types.CommitMultiStore) any {
		return queryOf(s, types.RequestQuery{Path: "/store2/key", Data: []byte("pending"), Height: 2, Prove: true})
	})
	z.loadBoth("upgrade add store4", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"store4"}})
	})
	z.set("store4", "k", "v4")
	z.commit()
}

func TestRootmultiSideSetInitialVersion(t *testing.T) {
	t.Run("after load", func(t *testing.T) {
		z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
		z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
		z.same("SetInitialVersion(5)", func(s types.CommitMultiStore) any { return s.SetInitialVersion(5) })
		z.set("store1", "k", "v")
		z.commit()
		z.same("store LastCommitID", func(s types.CommitMultiStore) any { return s.GetCommitKVStore(z.keys["store1"]).LastCommitID() })
		z.same("GetCommitInfo(5)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 5) })
		z.same("GetCommitInfo(4)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 4) })
		z.same("CMSWV(4)", func(s types.CommitMultiStore) any { _, err := s.CacheMultiStoreWithVersion(4); return err })
		z.same("query h=4", func(s types.CommitMultiStore) any {
			return queryOf(s, types.RequestQuery{Path: "/store1/key", Data: []byte("k"), Height: 4})
		})
		z.same("query h=0 prove", func(s types.CommitMultiStore) any {
			return queryOf(s, types.RequestQuery{Path: "/store1/key", Data: []byte("k"), Prove: true})
		})
		z.commit()
		z.fresh(sideStores, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
		z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
		z.sameLCID()
		z.commit()
	})
	t.Run("before load", func(t *testing.T) {
		z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
		z.same("SetInitialVersion(5) before load", func(s types.CommitMultiStore) any { return s.SetInitialVersion(5) })
		z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
		z.set("store1", "k", "v")
		z.acceptedBoth("initial-version-before-load/Commit", func(s types.CommitMultiStore) any {
			id := s.Commit()
			return fmt.Sprintf("%d %X", id.Version, id.Hash)
		})
		z.acceptedBoth("initial-version-before-load/store-version", func(s types.CommitMultiStore) any {
			return s.GetCommitKVStore(z.keys["store1"]).LastCommitID().Version
		})
		z.fresh(sideStores, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
		z.acceptedBoth("initial-version-before-load/reload", func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
	})
}

func TestRootmultiSideListeners(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	testKey := types.NewKVStoreKey("listening_test_key")
	z.same("ListeningEnabled unknown", func(s types.CommitMultiStore) any { return s.ListeningEnabled(testKey) })
	z.c.AddListeners([]types.StoreKey{testKey})
	z.o.AddListeners([]types.StoreKey{testKey})
	z.same("ListeningEnabled wrong", func(s types.CommitMultiStore) any {
		return s.ListeningEnabled(types.NewKVStoreKey("wrong_listening_test_key"))
	})
	z.same("ListeningEnabled test", func(s types.CommitMultiStore) any { return s.ListeningEnabled(testKey) })

	// TestStateListeners
	k1, k2 := z.keys["store1"], z.keys["store2"]
	z.c.AddListeners([]types.StoreKey{k1})
	z.o.AddListeners([]types.StoreKey{k1})
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	cc, co := z.c.CacheMultiStore(), z.o.CacheMultiStore()
	pop := func(what string) {
		a := fmt.Sprintf("%v", z.c.PopStateCache())
		b := fmt.Sprintf("%v", z.o.PopStateCache())
		if a != b {
			t.Errorf("DIFF PopStateCache %s: ours %s | rootmulti %s", what, a, b)
		}
	}
	cc.GetKVStore(k1).Set([]byte{1}, []byte{1})
	co.GetKVStore(k1).Set([]byte{1}, []byte{1})
	pop("before write")
	cc.Write()
	co.Write()
	pop("after write")
	cc.GetKVStore(k2).Set([]byte{1}, []byte{1})
	co.GetKVStore(k2).Set([]byte{1}, []byte{1})
	cc.Write()
	co.Write()
	pop("unobserved store")
	// direct writes, deletes, historical branch writes
	z.c.GetKVStore(k1).Set([]byte{2}, []byte{2})
	z.o.GetKVStore(k1).Set([]byte{2}, []byte{2})
	z.c.GetKVStore(k1).Delete([]byte{1})
	z.o.GetKVStore(k1).Delete([]byte{1})
	pop("direct set/delete")
	z.commit()
	pop("after commit")
	z.samePanicness("historical branch listener write", func(s types.CommitMultiStore) any {
		cms, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		cms.GetKVStore(k1).Set([]byte{3}, []byte{3})
		cms.Write()
		return nil
	})
	pop("after historical branch write")
	// listeners added after load
	z.c.AddListeners([]types.StoreKey{k2})
	z.o.AddListeners([]types.StoreKey{k2})
	z.c.GetKVStore(k2).Set([]byte{4}, []byte{4})
	z.o.GetKVStore(k2).Set([]byte{4}, []byte{4})
	z.c.GetKVStore(k1).Set([]byte{5}, []byte{5})
	z.o.GetKVStore(k1).Set([]byte{5}, []byte{5})
	pop("listener added after load")
	// listener survives a reload
	z.loadBoth("reload same instance", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.c.GetKVStore(k2).Set([]byte{6}, []byte{6})
	z.o.GetKVStore(k2).Set([]byte{6}, []byte{6})
	pop("after reload on same instance")
}

func TestRootmultiSideTracing(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	bc, bo := &bytes.Buffer{}, &bytes.Buffer{}
	k1 := z.keys["store1"]
	tc := types.TraceContext(map[string]interface{}{"blockHeight": 64})
	z.c.SetTracer(bc)
	z.o.SetTracer(bo)
	z.c.SetTracingContext(tc)
	z.o.SetTracingContext(tc)
	z.same("TracingEnabled", func(s types.CommitMultiStore) any { return s.TracingEnabled() })
	cmp := func(what string) {
		if bc.String() != bo.String() {
			t.Errorf("DIFF trace %s:\n ours      %q\n rootmulti %q", what, bc.String(), bo.String())
		}
		bc.Reset()
		bo.Reset()
	}
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		st := s.GetKVStore(k1)
		st.Set([]byte("a"), []byte("1"))
		st.Get([]byte("a"))
		st.Has([]byte("b"))
		st.Delete([]byte("a"))
		st.Set([]byte("c"), []byte("3"))
		it := st.Iterator(nil, nil)
		for ; it.Valid(); it.Next() {
			_ = it.Key()
			_ = it.Value()
		}
		it.Close()
	}
	cmp("GetKVStore ops")
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		cms := s.CacheMultiStore()
		st := cms.GetKVStore(k1)
		st.Set([]byte("d"), []byte("4"))
		st.Get([]byte("c"))
		cms.Write()
	}
	cmp("CacheMultiStore ops")
	z.commit()
	cmp("commit")
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		cms, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			t.Fatal(err)
		}
		st := cms.GetKVStore(k1)
		st.Get([]byte("c"))
		st.Get([]byte("missing"))
	}
	cmp("CacheMultiStoreWithVersion ops")
	z.c.SetTracingContext(types.TraceContext{"txHash": "ab"})
	z.o.SetTracingContext(types.TraceContext{"txHash": "ab"})
	for _, s := range []types.CommitMultiStore{z.c, z.o} {
		s.GetKVStore(k1).Get([]byte("c"))
	}
	cmp("merged context")
	z.c.SetTracer(nil)
	z.o.SetTracer(nil)
	z.same("TracingEnabled off", func(s types.CommitMultiStore) any { return s.TracingEnabled() })
}

func TestRootmultiSideCommitOrdered(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "wind", "blows")
	z.set("store2", "water", "flows")
	z.set("store3", "fire", "burns")
	z.commit()
	for _, v := range []int64{-1, 0, 1, 2} {
		z.same(fmt.Sprintf("GetCommitInfo(%d)", v), func(s types.CommitMultiStore) any { return commitInfoOf(s, v) })
	}
}

func TestRootmultiSideRollback(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	for i := 1; i <= 5; i++ {
		z.set("store1", "k", fmt.Sprintf("v%d", i))
		z.set("store2", fmt.Sprintf("k%d", i), "x")
		z.commit()
	}
	z.same("rollback(0)", func(s types.CommitMultiStore) any { return s.RollbackToVersion(0) })
	z.loadBoth("rollback(3)", func(s types.CommitMultiStore) error { return s.RollbackToVersion(3) })
	z.sameLCID()
	z.same("get after rollback", func(s types.CommitMultiStore) any { return getByName(s, "store1", "k") })
	z.same("get store2 k4 after rollback", func(s types.CommitMultiStore) any { return getByName(s, "store2", "k4") })
	for _, v := range []int64{3, 4, 5} {
		if v == 3 {
			z.same("GetCommitInfo(3) after rollback", func(s types.CommitMultiStore) any { return commitInfoOf(s, v) })
		} else {
			z.acceptedBoth("rollback/GetCommitInfo-rolled-back", func(s types.CommitMultiStore) any { return commitInfoOf(s, v) })
		}
		z.same(fmt.Sprintf("CMSWV(%d) after rollback (error or not)", v), func(s types.CommitMultiStore) any {
			_, err := s.CacheMultiStoreWithVersion(v)
			return err != nil
		})
		z.same(fmt.Sprintf("query h=%d after rollback", v), func(s types.CommitMultiStore) any {
			return queryOf(s, types.RequestQuery{Path: "/store1/key", Data: []byte("k"), Height: v})
		})
	}
	z.set("store1", "k", "other")
	z.commit()
	z.same("GetCommitInfo(4) after new commit", func(s types.CommitMultiStore) any { return commitInfoOf(s, 4) })
	cid5 := z.commit()
	z.commit()
	z.fresh(sideStores, po)
	z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.sameLCID()
	// rollback on an unloaded instance (as `simd rollback` does after load)
	z.fresh(sideStores, po)
	z.acceptedBoth("rollback-unloaded/RollbackToVersion", func(s types.CommitMultiStore) any { return s.RollbackToVersion(5) })
	z.acceptedBoth("rollback-unloaded/LastCommitID", func(s types.CommitMultiStore) any {
		id := s.LastCommitID()
		return fmt.Sprintf("version %d, hash of commit 5: %v", id.Version, bytes.Equal(id.Hash, cid5.Hash))
	})
}

// TestRootmultiSideUpgradesOnFreshDB: store upgrades at version 0.
func TestRootmultiSideUpgradesOnFreshDB(t *testing.T) {
	for _, tc := range []struct {
		name     string
		up       *types.StoreUpgrades
		accepted string // the sideAccepted entry of the load, if any
	}{
		{"added", &types.StoreUpgrades{Added: []string{"store3"}}, ""},
		{"deleted", &types.StoreUpgrades{Deleted: []string{"store3"}}, ""},
		{"renamed from nothing", &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "old", NewKey: "store3"}}}, ""},
		{"renamed from a mounted store", &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "store2", NewKey: "store3"}}},
			"fresh-db/rename-between-mounted-stores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
			if tc.accepted != "" {
				z.acceptedBoth(tc.accepted, func(s types.CommitMultiStore) any { return s.LoadLatestVersionAndUpgrade(tc.up) })
				return
			}
			ec, eo := z.loadBoth("load with upgrades at v0", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(tc.up) })
			if ec != nil || eo != nil {
				t.Fatalf("load: ours %v | rootmulti %v", ec, eo)
			}
			for _, n := range sideStores {
				z.same("has "+n, func(s types.CommitMultiStore) any { return storeByName(s, n) != nil })
			}
			z.set("store1", "k", "v")
			z.commit()
			z.same("GetCommitInfo(1)", func(s types.CommitMultiStore) any { return commitInfoOf(s, 1) })
		})
	}
}

// TestRootmultiSideSetInitialVersionThenReloadSameInstance: SetInitialVersion
// after a load, then another load of the same instance before the first
// commit: as SetInitialVersion before the load.
func TestRootmultiSideSetInitialVersionThenReloadSameInstance(t *testing.T) {
	z := newSide(t, pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.same("SetInitialVersion(5)", func(s types.CommitMultiStore) any { return s.SetInitialVersion(5) })
	z.loadBoth("reload same instance", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "k", "v")
	z.acceptedBoth("initial-version-before-load/Commit", func(s types.CommitMultiStore) any {
		id := s.Commit()
		return fmt.Sprintf("%d %X", id.Version, id.Hash)
	})
}

// TestRootmultiSideLoadLatestAfterOlder: after a LoadVersionAndUpgrade of an
// older version (store4 added at 3), loads of the latest version and of 3
// are judged by their own stores, not by those of the version open, and
// read what 3 committed.
func TestRootmultiSideLoadLatestAfterOlder(t *testing.T) {
	po := pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)
	z := newSide(t, po)
	z.fresh([]string{"store1"}, po)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store1", "a", "1")
	z.commit()
	z.set("store1", "b", "2")
	z.commit()
	add4 := &types.StoreUpgrades{Added: []string{"store4"}}
	z.fresh([]string{"store1", "store4"}, po)
	z.loadBoth("upgrade at 3", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(add4) })
	z.set("store4", "c", "3")
	z.commit()

	z.fresh([]string{"store1", "store4"}, po)
	z.want("LoadVersionAndUpgrade(2, add store4)", "<nil>", func(s types.CommitMultiStore) any { return s.LoadVersionAndUpgrade(2, add4) })
	z.want("LoadLatestVersion after loading 2", "<nil>", func(s types.CommitMultiStore) any { return s.LoadLatestVersion() })
	z.want("store4 at the latest version", `"3"`, func(s types.CommitMultiStore) any { return getByName(s, "store4", "c") })
	z.want("LoadVersion(3) after the latest", "<nil>", func(s types.CommitMultiStore) any { return s.LoadVersion(3) })
	z.sameLCID()

	// loaded at 2 again: a load of the latest version that does not fit
	// (store5 mounted without an upgrade) is refused, and 2 stays loaded
	// with its uncommitted writes
	z.fresh([]string{"store1", "store4"}, po)
	z.want("LoadVersionAndUpgrade(2, add store4) again", "<nil>", func(s types.CommitMultiStore) any { return s.LoadVersionAndUpgrade(2, add4) })
	z.set("store1", "w", "uncommitted")
	k5 := z.keys.key("store5", types.StoreTypeIAVL)
	z.o.MountStoreWithDB(k5, types.StoreTypeIAVL, nil)
	z.c.MountStoreWithDB(k5, types.StoreTypeIAVL, nil)
	ec, eo := z.loadBoth("LoadLatestVersion with store5 mounted", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	if ec == nil || eo == nil {
		t.Fatalf("LoadLatestVersion with store5 mounted: ours %v, rootmulti %v; want both refused", ec, eo)
	}
	z.sameLCID()
	z.want("store1's uncommitted write after the refused load", `"uncommitted"`, func(s types.CommitMultiStore) any { return getByName(s, "store1", "w") })
}
