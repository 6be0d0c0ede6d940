package compat_test

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// migSrc is a rootmulti source chain with configurable options.
type migSrc struct {
	db       dbm.DB
	rs       *rootmulti.Store
	keys     keyring
	names    []string
	pruning  pruningtypes.PruningOptions
	noFast   bool
	valueLen func(r *rand.Rand) int
	keyLen   func(r *rand.Rand) int
}

func (s *migSrc) load(t *testing.T, names []string, up *storetypes.StoreUpgrades) {
	t.Helper()
	s.names = names
	rs := rootmulti.NewStore(s.db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.SetPruning(s.pruning)
	rs.SetIAVLDisableFastNode(s.noFast)
	mountAll(rs, s.keys, mount{iavl: names, transient: "tstore", memory: "mstore"})
	var err error
	if up != nil {
		err = rs.LoadLatestVersionAndUpgrade(up)
	} else {
		err = rs.LoadLatestVersion()
	}
	if err != nil {
		t.Fatalf("rootmulti load: %v", err)
	}
	s.rs = rs
}

// migBlock writes a random block (deterministic in seed) to cms.
func migBlock(cms storetypes.CommitMultiStore, keys keyring, names []string, seed int64, klen, vlen func(*rand.Rand) int) storetypes.CommitID {
	r := rand.New(rand.NewSource(seed))
	for _, n := range names {
		st := cms.GetKVStore(keys[n])
		for i := 0; i < 1+r.Intn(8); i++ {
			kl := 4
			if klen != nil {
				kl = klen(r)
			}
			k := make([]byte, kl)
			r.Read(k)
			k[0] = byte('a' + r.Intn(4))
			if r.Intn(5) == 0 {
				st.Delete(k)
				continue
			}
			vl := 10
			if vlen != nil {
				vl = vlen(r)
			}
			v := make([]byte, vl)
			r.Read(v)
			st.Set(k, v)
		}
	}
	cms.GetKVStore(keys["tstore"]).Set([]byte("t"), []byte("x"))
	return cms.Commit()
}

// migSideBySide imports the source at its latest version, checks app hash and
// contents, and continues both for n blocks with the same writes.
func migSideBySide(t *testing.T, s *migSrc, n int) string {
	t.Helper()
	h := s.rs.LastCommitID().Version
	want := s.rs.LastCommitID().Hash
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	if err := compat.ImportIAVL(histReadOnly{s.db}, h, nil, dir, multitree.Options{RewriteConcurrency: 2}); err != nil {
		t.Fatalf("import at %d: %v", h, err)
	}
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != h || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("imported %d %X, want %d %X", db.Version(), db.LastCommitInfo().Hash(), h, want)
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range s.names {
		tr := view.Tree(name)
		if tr == nil {
			t.Fatalf("store %q missing", name)
		}
		it := tr.Iterator(nil, nil, true)
		rit := s.rs.GetKVStore(s.keys[name]).Iterator(nil, nil)
		for ; rit.Valid(); rit.Next() {
			if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
				t.Fatalf("store %q differs at %X", name, rit.Key())
			}
			it.Next()
		}
		rit.Close()
		if it.Valid() {
			t.Fatalf("store %q extra key %X", name, it.Key())
		}
	}
	view.Release()
	db.Close()

	ms := newOurs(t, dir, testConfig(), s.keys, mount{iavl: s.names, transient: "tstore", memory: "mstore"}, nil)
	defer ms.Close()
	if id := ms.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, want) {
		t.Fatalf("ours LastCommitID %v", id)
	}
	for i := 0; i < n; i++ {
		seed := int64(1000 + i)
		a := migBlock(s.rs, s.keys, s.names, seed, s.keyLen, s.valueLen)
		b := migBlock(ms, s.keys, s.names, seed, s.keyLen, s.valueLen)
		if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
			t.Fatalf("block %d: rootmulti %d %X, ours %d %X", i, a.Version, a.Hash, b.Version, b.Hash)
		}
	}
	return dir
}

func migLevelDB(t *testing.T) dbm.DB {
	db, err := dbm.NewGoLevelDB("application", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMigrateNoFastPrunedNames: goleveldb sources written with iavl fast
// nodes disabled and enabled, pruned so that only the latest version is
// kept, with store names that overlap as prefixes ("a", "a/b"), non-ASCII
// and 119-byte names, a store added late and one deleted: the import at the
// latest version has the source's app hash and contents, and our multistore
// continues with rootmulti's app hashes.
func TestMigrateNoFastPrunedNames(t *testing.T) {
	for _, noFast := range []bool{true, false} {
		s := &migSrc{db: migLevelDB(t), keys: keyring{}, noFast: noFast,
			pruning: pruningtypes.NewCustomPruningOptions(0, 1)}
		long := strings.Repeat("n", 119)
		base := []string{"acc", "08-wasm", "a/b", "a", "ünï", long, "old"}
		s.load(t, base, nil)
		for i := 0; i < 6; i++ {
			migBlock(s.rs, s.keys, s.names, int64(i), nil, nil)
		}
		after := []string{"acc", "08-wasm", "a/b", "a", "ünï", long, "late"}
		s.load(t, after, &storetypes.StoreUpgrades{Added: []string{"late"}, Deleted: []string{"old"}})
		for i := 6; i < 12; i++ {
			migBlock(s.rs, s.keys, s.names, int64(i), nil, nil)
		}
		s.load(t, after, nil)
		migBlock(s.rs, s.keys, s.names, 99, nil, nil)
		migSideBySide(t, s, 5)
	}
}

// TestMigrateHugeInitialVersion: a chain whose initial version is above
// 2^32 (iavl versions are int64) imports and continues.
func TestMigrateHugeInitialVersion(t *testing.T) {
	s := &migSrc{db: dbm.NewMemDB(), keys: keyring{}, pruning: pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)}
	s.load(t, []string{"acc", "bank"}, nil)
	if err := s.rs.SetInitialVersion(1<<32 + 5); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		migBlock(s.rs, s.keys, s.names, int64(i), nil, nil)
	}
	migSideBySide(t, s, 3)
}

// TestMigrateLegacyContinue: trees written by iavl v0.20 (testdata),
// imported at 12 and continued side by side with rootmulti over iavl v1
// (TestImportIAVLFromLegacyNodes only compares contents).
func TestMigrateLegacyContinue(t *testing.T) {
	stores := []string{"acc", "bank"}
	ldb, _ := legacyAppDB(t, stores, 12)
	s := &migSrc{db: ldb, keys: keyring{}, pruning: pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)}
	s.load(t, stores, nil)
	migSideBySide(t, s, 6)
}

type migHideDB struct {
	dbm.DB
	hide map[string]bool
	bad  map[string][]byte
}

func (d migHideDB) Get(k []byte) ([]byte, error) {
	if d.hide[string(k)] {
		return nil, nil
	}
	if v, ok := d.bad[string(k)]; ok {
		return v, nil
	}
	return d.DB.Get(k)
}

// TestMigrateFuzzNodes: a source whose iavl nodes are damaged (bit
// flips, cut short, replaced by garbage) must fail the import with an error
// and leave nothing, never panic (the exporter runs in iavl's goroutine,
// where a panic would end the process) nor import wrong data.
func TestMigrateFuzzNodes(t *testing.T) {
	s := &migSrc{db: dbm.NewMemDB(), keys: keyring{}, pruning: pruningtypes.NewPruningOptions(pruningtypes.PruningNothing)}
	s.load(t, []string{"acc"}, nil)
	for i := 0; i < 12; i++ {
		migBlock(s.rs, s.keys, s.names, int64(i), nil, nil)
	}
	h := s.rs.LastCommitID().Version
	var nodes [][]byte
	it, _ := s.db.Iterator([]byte("s/k:acc/s"), []byte("s/k:acc/t"))
	for ; it.Valid(); it.Next() {
		nodes = append(nodes, bytes.Clone(it.Key()))
	}
	it.Close()
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 400; iter++ {
		d := migHideDB{DB: s.db, hide: map[string]bool{}, bad: map[string][]byte{}}
		for j := 0; j < 1+r.Intn(3); j++ {
			k := nodes[r.Intn(len(nodes))]
			v, _ := s.db.Get(k)
			v = bytes.Clone(v)
			switch r.Intn(3) {
			case 0:
				if len(v) > 0 {
					v[r.Intn(len(v))] ^= byte(1 + r.Intn(255))
				}
			case 1:
				v = v[:r.Intn(len(v)+1)]
			case 2:
				v = make([]byte, r.Intn(60))
				r.Read(v)
			}
			d.bad[string(k)] = v
		}
		dir := filepath.Join(t.TempDir(), "x.db")
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic: %v", p)
				}
			}()
			if err := compat.ImportIAVL(d, h, nil, dir, multitree.Options{}); err != nil {
				if _, serr := os.Stat(dir); serr == nil {
					t.Fatalf("a failed import (%v) left %s", err, dir)
				}
			} else {
				histVerifyHash(t, dir, h, s.rs.LastCommitID().Hash)
			}
		}()
	}
}

func histVerifyHash(t *testing.T, dir string, h int64, want []byte) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != h || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("imported %d %X, want %d %X", db.Version(), db.LastCommitInfo().Hash(), h, want)
	}
}
