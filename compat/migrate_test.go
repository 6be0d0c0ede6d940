package compat_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	gogotypes "github.com/cosmos/gogoproto/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// migChain is an SDK application database: rootmulti over cosmos/iavl in
// goleveldb, keeping every version.
type migChain struct {
	t      *testing.T
	db     dbm.DB
	rs     *rootmulti.Store
	stores []string
	hashes map[int64][]byte
}

func migLoad(t *testing.T, db dbm.DB, stores []string, up *storetypes.StoreUpgrades) *rootmulti.Store {
	t.Helper()
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.SetPruning(pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	for _, name := range stores {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	rs.MountStoreWithDB(storetypes.NewTransientStoreKey("transient"), storetypes.StoreTypeTransient, nil)
	var err error
	if up != nil {
		err = rs.LoadLatestVersionAndUpgrade(up)
	} else {
		err = rs.LoadLatestVersion()
	}
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// migBuild writes blocks of random changes, adding a store half-way.
func migBuild(t *testing.T, db dbm.DB, blocks int) *migChain {
	r := testutil.Rand(t)
	stores := []string{"acc", "bank", "distribution", "gov", "staking"}
	c := &migChain{t: t, db: db, stores: stores, hashes: map[int64][]byte{}}
	c.rs = migLoad(t, db, stores, nil)
	changes := ssBlocks(r, stores, blocks, 30)
	for i, css := range changes {
		if i == blocks/2 {
			c.stores = append(c.stores, "upgrade")
			c.rs = migLoad(t, db, c.stores, &storetypes.StoreUpgrades{Added: []string{"upgrade"}})
		}
		if i > blocks/2 {
			css = append(css, wal.ChangeSet{Name: "upgrade", Pairs: []wal.KVPair{{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}}})
		}
		cid := ssApply(c.rs, css)
		c.hashes[cid.Version] = cid.Hash
	}
	return c
}

// migSameAsRootMulti compares the stores of the database in dir with the
// rootmulti store at version.
func migSameAsRootMulti(t *testing.T, rs *rootmulti.Store, version int64, dir string, stores []string) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	sort.Strings(stores)
	if fmt.Sprint(view.StoreNames()) != fmt.Sprint(stores) || view.Version() != version {
		t.Fatalf("stores %v at %d, want %v at %d", view.StoreNames(), view.Version(), stores, version)
	}
	cms, err := rs.CacheMultiStoreWithVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	keys := rs.StoreKeysByName()
	for _, name := range stores {
		tr := view.Tree(name)
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
		it := tr.Iterator(nil, nil, true)
		rit := cms.GetKVStore(keys[name]).Iterator(nil, nil)
		for ; rit.Valid(); rit.Next() {
			if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
				t.Fatalf("store %s at %d differs at %X", name, version, rit.Key())
			}
			it.Next()
		}
		rit.Close()
		if it.Valid() {
			t.Fatalf("store %s: extra key %X", name, it.Key())
		}
	}
}

// migImport imports every store of the application database ldb at height
// into a new directory, checks that the database opens there at height with
// app hash want, and returns the directory.
func migImport(t *testing.T, ldb dbm.DB, height int64, opts multitree.Options, want []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	if err := compat.ImportIAVL(ldb, height, nil, dir, opts); err != nil {
		t.Fatalf("height %d: %v", height, err)
	}
	db, err := multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != height || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("imported height %d: version %d app hash %X, want %X", height, db.Version(), db.LastCommitInfo().Hash(), want)
	}
	return dir
}

func TestImportIAVLFromGoLevelDB(t *testing.T) {
	home := t.TempDir()
	ldb, err := dbm.NewGoLevelDB("application", home, nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := 80
	c := migBuild(t, ldb, blocks)
	latest := int64(blocks)
	if err := ldb.Close(); err != nil {
		t.Fatal(err)
	}

	// reopen the closed application database, as a node being migrated would
	ldb, err = dbm.NewGoLevelDB("application", home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ldb.Close()
	for _, height := range []int64{latest, int64(blocks/2) - 3} {
		dir := migImport(t, ldb, height, multitree.Options{RewriteConcurrency: 2}, c.hashes[height])
		rs := migLoad(t, ldb, c.stores, nil)
		stores := c.stores
		if height < int64(blocks/2) {
			stores = stores[:len(stores)-1] // before the upgrade
		}
		migSameAsRootMulti(t, rs, height, dir, append([]string(nil), stores...))
	}

	// a subset of the stores: each root hash is checked
	dir := filepath.Join(t.TempDir(), "subset")
	if err := compat.ImportIAVL(ldb, latest, []string{"bank", "upgrade"}, dir, multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	migSameAsRootMulti(t, migLoad(t, ldb, c.stores, nil), latest, dir, []string{"bank", "upgrade"})

	// errors
	for name, f := range map[string]func(dir string) error{
		"future height": func(dir string) error { return compat.ImportIAVL(ldb, latest+1, nil, dir, multitree.Options{}) },
		"height zero":   func(dir string) error { return compat.ImportIAVL(ldb, 0, nil, dir, multitree.Options{}) },
		"unknown store": func(dir string) error {
			return compat.ImportIAVL(ldb, latest, []string{"nope"}, dir, multitree.Options{})
		},
		"store twice": func(dir string) error {
			return compat.ImportIAVL(ldb, latest, []string{"acc", "acc"}, dir, multitree.Options{})
		},
		"store too late": func(dir string) error {
			return compat.ImportIAVL(ldb, 3, []string{"upgrade"}, dir, multitree.Options{})
		},
	} {
		dir := filepath.Join(t.TempDir(), "db")
		if err := f(dir); !errors.Is(err, compat.ErrMigrate) {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "current")); err == nil {
			t.Fatalf("%s: a failed import left a database", name)
		}
	}
	// over an existing database
	if err := compat.ImportIAVL(ldb, latest, nil, dir, multitree.Options{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("import over a database: %v", err)
	}
}

func TestImportIAVLChecksRecordedHashes(t *testing.T) {
	mem := dbm.NewMemDB()
	c := migBuild(t, mem, 10)
	// a commit info that does not match the trees
	key := []byte("s/10")
	bz, err := mem.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	var ci storetypes.CommitInfo
	if err := ci.Unmarshal(bz); err != nil {
		t.Fatal(err)
	}
	ci.StoreInfos[1].CommitId.Hash = bytes.Repeat([]byte{7}, 32)
	bad, err := ci.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Set(key, bad); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	err = compat.ImportIAVL(mem, 10, nil, dir, multitree.Options{})
	if !errors.Is(err, compat.ErrMigrate) {
		t.Fatalf("mismatched commit info: %v", err)
	}
	t.Log(err)
	if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("a failed import left a database: %v", err)
	}
	_ = c
}

// TestImportIAVLRefusesRolledBackHeight: a rollback of rootmulti leaves the
// commit infos of the versions above its target, with every tree of an
// empty store still loadable there; an import at such a height is refused
// (rootmulti's latest version is the target), and nothing is left.
func TestImportIAVLRefusesRolledBackHeight(t *testing.T) {
	mem := dbm.NewMemDB()
	c := migBuild(t, mem, 12)
	if err := c.rs.RollbackToVersion(7); err != nil {
		t.Fatal(err)
	}
	if bz, _ := mem.Get([]byte("s/12")); bz == nil {
		t.Fatal("the rollback removed the commit info of 12: nothing to refuse")
	}
	for _, stores := range [][]string{nil, {"acc"}} {
		dir := filepath.Join(t.TempDir(), "db")
		err := compat.ImportIAVL(mem, 12, stores, dir, multitree.Options{})
		if !errors.Is(err, compat.ErrMigrate) || !strings.Contains(err.Error(), "latest version 7") {
			t.Fatalf("import of the rolled-back height 12 (stores %q): %v", stores, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused import left %s: %v", dir, err)
		}
	}
	migImport(t, mem, 7, multitree.Options{}, c.hashes[7])
}

// TestImportIAVLEmptyStorePruned: a store empty at a height is imported
// empty, from iavl's marker of its empty root (which goleveldb's Get takes
// for absent); once the marker is gone, as pruning removes it, the height
// is refused for that store as for the others.
func TestImportIAVLEmptyStorePruned(t *testing.T) {
	db, err := dbm.NewGoLevelDB("application", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stores := []string{"acc", "empty"}
	rs := migLoad(t, db, stores, nil)
	hashes := map[int64][]byte{}
	for _, css := range ssBlocks(testutil.Rand(t), stores[:1], 5, 10) {
		cid := ssApply(rs, css)
		hashes[cid.Version] = cid.Hash
	}
	migImport(t, db, 3, multitree.Options{}, hashes[3])
	marker := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64([]byte("s/k:empty/s"), 3), 1)
	if err := db.Delete(marker); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	err = compat.ImportIAVL(db, 3, []string{"empty"}, dir, multitree.Options{})
	if !errors.Is(err, compat.ErrMigrate) || !strings.Contains(err.Error(), `store "empty" at height 3: version does not exist`) {
		t.Fatalf("import of an empty store whose version is gone: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused import left %s: %v", dir, err)
	}
}

// legacyAppDB opens a copy of testdata/iavl-v0.20's application database
// (versions 1 to 12 of the stores acc and bank, written by cosmos/iavl
// v0.20) with the commit info of version legacy recorded as rootmulti
// records it, and returns it (closed when t ends) and that commit info.
func legacyAppDB(t *testing.T, stores []string, legacy int64) (dbm.DB, storetypes.CommitInfo) {
	t.Helper()
	home := t.TempDir()
	if err := os.CopyFS(filepath.Join(home, "application.db"), os.DirFS("../testdata/iavl-v0.20/application.db")); err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile("../testdata/iavl-v0.20/hashes")
	if err != nil {
		t.Fatal(err)
	}
	info := storetypes.CommitInfo{Version: legacy}
	for _, name := range stores {
		var hash []byte
		for _, line := range strings.Split(string(recorded), "\n") {
			var n string
			var v int64
			var h []byte
			if _, err := fmt.Sscanf(line, "%s %d %X", &n, &v, &h); err == nil && n == name && v == legacy {
				hash = h
			}
		}
		if hash == nil {
			t.Fatalf("no recorded hash of %s at %d", name, legacy)
		}
		info.StoreInfos = append(info.StoreInfos, storetypes.StoreInfo{Name: name, CommitId: storetypes.CommitID{Version: legacy, Hash: hash}})
	}
	ldb, err := dbm.NewGoLevelDB("application", home, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ldb.Close() })
	bz, err := info.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	latest, err := gogotypes.StdInt64Marshal(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if err := ldb.Set([]byte(fmt.Sprintf("s/%d", legacy)), bz); err != nil {
		t.Fatal(err)
	}
	if err := ldb.Set([]byte("s/latest"), latest); err != nil {
		t.Fatal(err)
	}
	return ldb, info
}

// TestImportIAVLFromLegacyNodes imports an application database whose
// trees were written by cosmos/iavl v0.20 (SDK v0.47 chains: nodes keyed by
// hash), as chains that moved to SDK v0.50 hold it, with versions written by
// iavl v1 on top: testdata/iavl-v0.20 (see its gen/) holds versions 1 to 12
// of two stores; the test records the commit info of 12 as rootmulti did,
// commits 5 more blocks with rootmulti over iavl v1, and imports both
// heights.
func TestImportIAVLFromLegacyNodes(t *testing.T) {
	stores := []string{"acc", "bank"}
	const legacy = 12
	ldb, info := legacyAppDB(t, stores, legacy)
	rs := migLoad(t, ldb, stores, nil)
	keys := rs.StoreKeysByName()
	for _, si := range info.StoreInfos { // iavl v1 reads the v0.20 roots
		if id := rs.GetCommitKVStore(keys[si.Name]).LastCommitID(); !bytes.Equal(id.Hash, si.CommitId.Hash) {
			t.Fatalf("iavl v1 loads %s at %d with hash %X, v0.20 wrote %X", si.Name, legacy, id.Hash, si.CommitId.Hash)
		}
	}
	hashes := map[int64][]byte{legacy: info.Hash()}
	for _, css := range ssBlocks(testutil.Rand(t), stores, 5, 30) {
		cid := ssApply(rs, css)
		hashes[cid.Version] = cid.Hash
	}
	for _, height := range []int64{legacy, legacy + 5} {
		dir := migImport(t, ldb, height, multitree.Options{}, hashes[height])
		migSameAsRootMulti(t, rs, height, dir, append([]string(nil), stores...))
	}
}

// cancelingDB cancels a context at its after'th Get: the reads of iavl's
// exporter reach it while an import runs.
type cancelingDB struct {
	dbm.DB
	gets, after int
	cancel      context.CancelFunc
	mu          sync.Mutex
}

func (d *cancelingDB) Get(key []byte) ([]byte, error) {
	d.mu.Lock()
	if d.gets++; d.gets == d.after {
		d.cancel()
	}
	d.mu.Unlock()
	return d.DB.Get(key)
}

// TestImportIAVLContextStops: an import from iavl whose context is done
// while it reads the trees fails with the context's error and leaves no
// database; a database at version 0 it was to replace stays as it was.
// Then the import with a live context succeeds.
func TestImportIAVLContextStops(t *testing.T) {
	mem := dbm.NewMemDB()
	c := migBuild(t, mem, 20)
	for _, existing := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "db")
		if existing {
			db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"acc"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		src := &cancelingDB{DB: mem, after: 50, cancel: cancel}
		err := compat.ImportIAVLContext(ctx, src, 20, nil, dir, multitree.Options{})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("existing %v: stopped import: %v, want context.Canceled", existing, err)
		}
		if src.gets < 50 {
			t.Fatalf("the import read %d nodes, fewer than the cancel point", src.gets)
		}
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
		switch {
		case existing && err != nil:
			t.Fatalf("the database at version 0 did not stay: %v", err)
		case existing:
			if db.Version() != 0 || !slices.Equal(db.StoreNames(), []string{"acc"}) {
				t.Fatalf("the database at version 0 changed: version %d, stores %v", db.Version(), db.StoreNames())
			}
			db.Close()
		case !errors.Is(err, multitree.ErrNotFound):
			t.Fatalf("a stopped import left a database: %v", err)
		}
		if err := compat.ImportIAVLContext(context.Background(), mem, 20, nil, dir, multitree.Options{}); err != nil {
			t.Fatal(err)
		}
		db, err = multitree.Open(dir, multitree.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != 20 || !bytes.Equal(db.LastCommitInfo().Hash(), c.hashes[20]) {
			t.Fatalf("after the retry: version %d, app hash %X, want %X", db.Version(), db.LastCommitInfo().Hash(), c.hashes[20])
		}
		db.Close()
	}
}
