package benchmarks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	storetypes "cosmossdk.io/store/types"
	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// The migration tests build a directory with the reference memiavl itself
// and import it with compat.ImportMemIAVL: the result must have the
// reference's version, app hash and contents.

type migRef struct {
	t      *testing.T
	r      *rand.Rand
	dir    string
	db     *refmemiavl.DB
	stores []string
	keys   map[string][][]byte
}

func migSeed(t *testing.T) *rand.Rand {
	seed := time.Now().UnixNano()
	if s := os.Getenv("MEMIAVL_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with MEMIAVL_SEED=%d)", seed, seed)
	return rand.New(rand.NewSource(seed))
}

func migNewRef(t *testing.T, initial uint32, stores []string, interval uint32) *migRef {
	m := &migRef{t: t, r: migSeed(t), dir: filepath.Join(t.TempDir(), "ref"), stores: stores, keys: map[string][][]byte{}}
	db, err := refmemiavl.Load(m.dir, refmemiavl.Options{
		CreateIfMissing: true, InitialStores: stores, InitialVersion: initial,
		SnapshotInterval: interval, SnapshotKeepRecent: 1, AsyncCommitBuffer: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.db = db
	return m
}

func (m *migRef) key() []byte {
	k := make([]byte, 1+m.r.Intn(40))
	m.r.Read(k)
	if m.r.Intn(3) == 0 {
		k[0] = 'p' // shared prefixes
	}
	return k
}

// block commits one block of random changes to the stores.
func (m *migRef) block(ops int) {
	var css []*refmemiavl.NamedChangeSet
	names := append([]string(nil), m.stores...)
	sort.Strings(names)
	for _, name := range names {
		if m.r.Intn(4) == 0 {
			continue
		}
		var pairs []*refmemiavl.KVPair
		for i := 0; i < 1+m.r.Intn(ops); i++ {
			ks := m.keys[name]
			if len(ks) > 0 && m.r.Intn(5) == 0 {
				j := m.r.Intn(len(ks))
				pairs = append(pairs, &refmemiavl.KVPair{Delete: true, Key: ks[j]})
				ks[j] = ks[len(ks)-1]
				m.keys[name] = ks[:len(ks)-1]
				continue
			}
			k := m.key()
			if len(ks) > 0 && m.r.Intn(3) == 0 {
				k = ks[m.r.Intn(len(ks))]
			} else {
				m.keys[name] = append(ks, k)
			}
			v := make([]byte, m.r.Intn(100))
			m.r.Read(v)
			pairs = append(pairs, &refmemiavl.KVPair{Key: k, Value: v})
		}
		css = append(css, &refmemiavl.NamedChangeSet{Name: name, Changeset: refmemiavl.ChangeSet{Pairs: pairs}})
	}
	if err := m.db.ApplyChangeSets(css); err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.db.Commit(); err != nil {
		m.t.Fatal(err)
	}
}

func (m *migRef) upgrade(ups ...*refmemiavl.TreeNameUpgrade) {
	if err := m.db.ApplyUpgrades(ups); err != nil {
		m.t.Fatal(err)
	}
	for _, u := range ups {
		switch {
		case u.Delete:
			m.stores = migWithout(m.stores, u.Name)
			delete(m.keys, u.Name)
		case u.RenameFrom != "":
			m.stores = append(migWithout(m.stores, u.RenameFrom), u.Name)
			m.keys[u.Name] = m.keys[u.RenameFrom]
			delete(m.keys, u.RenameFrom)
		default:
			m.stores = append(m.stores, u.Name)
		}
	}
}

func migWithout(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func migAppHash(ci *refmemiavl.CommitInfo) []byte {
	out := storetypes.CommitInfo{Version: ci.Version}
	for _, si := range ci.StoreInfos {
		out.StoreInfos = append(out.StoreInfos, storetypes.StoreInfo{
			Name: si.Name, CommitId: storetypes.CommitID{Version: si.CommitId.Version, Hash: si.CommitId.Hash},
		})
	}
	return out.Hash()
}

// closeRef closes the reference and returns its version and app hash.
func (m *migRef) closeRef() (int64, []byte) {
	v, h := m.db.Version(), migAppHash(m.db.LastCommitInfo())
	if err := m.db.Close(); err != nil {
		m.t.Fatal(err)
	}
	m.db = nil
	return v, h
}

func migCurrentVersion(t *testing.T, refDir string) int64 {
	cur, err := os.Readlink(filepath.Join(refDir, "current"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(cur[len("snapshot-"):], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// migCheck imports the closed reference and compares the result with it.
func migCheck(t *testing.T, refDir string, version int64, appHash []byte) {
	t.Helper()
	// this database does not open the reference's directory, and says so
	if db, err := multitree.Open(refDir, multitree.Options{ReadOnly: true}); !errors.Is(err, multitree.ErrReferenceFormat) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("open of the reference directory: %v, want ErrReferenceFormat", err)
	}
	dir := filepath.Join(t.TempDir(), "ours")
	if err := compat.ImportMemIAVL(refDir, dir, multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != version || !bytes.Equal(db.LastCommitInfo().Hash(), appHash) {
		t.Fatalf("imported version %d app hash %X, reference %d %X", db.Version(), db.LastCommitInfo().Hash(), version, appHash)
	}
	ref, err := refmemiavl.Load(refDir, refmemiavl.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	var refNames []string
	for _, nt := range ref.Trees() {
		refNames = append(refNames, nt.Name)
	}
	if fmt.Sprint(refNames) != fmt.Sprint(view.StoreNames()) {
		t.Fatalf("stores %v, reference %v", view.StoreNames(), refNames)
	}
	for _, name := range refNames {
		tr := view.Tree(name)
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
		it := tr.Iterator(nil, nil, true)
		rit := ref.TreeByName(name).Iterator(nil, nil, true)
		n := 0
		for ; rit.Valid(); rit.Next() {
			if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
				t.Fatalf("store %s pair %d: the reference has %X", name, n, rit.Key())
			}
			it.Next()
			n++
		}
		if it.Valid() {
			t.Fatalf("store %s: extra key %X", name, it.Key())
		}
	}
	// the imported database goes on committing
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateMemIAVL(t *testing.T) {
	stores := []string{"acc", "bank", "evm", "staking"}
	for _, initial := range []uint32{0, 100} {
		t.Run(fmt.Sprintf("initial=%d", initial), func(t *testing.T) {
			// explicit snapshot rewrites (the background ones race with Close)
			m := migNewRef(t, initial, stores, 1000)
			for i := 0; i < 23; i++ {
				switch i {
				case 6:
					if err := m.db.RewriteSnapshot(); err != nil {
						t.Fatal(err)
					}
				case 9:
					m.upgrade(&refmemiavl.TreeNameUpgrade{Name: "added"})
				case 14:
					m.upgrade(&refmemiavl.TreeNameUpgrade{Name: "evm", Delete: true})
				case 16:
					if err := m.db.RewriteSnapshot(); err != nil {
						t.Fatal(err)
					}
				case 19:
					m.upgrade(&refmemiavl.TreeNameUpgrade{Name: "late"})
				}
				m.block(25)
			}
			v, h := m.closeRef()
			// the import reads the reference's current snapshot and replays
			// the log entries after it, the addition of "late" among them
			snap := migCurrentVersion(t, m.dir)
			t.Logf("reference at version %d, current snapshot %d", v, snap)
			if want := 16 + int64(max(initial, 1)) - 1; snap != want {
				t.Fatalf("current snapshot %d, want %d", snap, want)
			}
			migCheck(t, m.dir, v, h)
		})
	}
}

func TestMigrateMemIAVLBackgroundSnapshots(t *testing.T) {
	// background rewrites and pruning (which also cuts the log's front):
	// wherever current ends up, the import must reach the same state
	m := migNewRef(t, 0, []string{"a", "b", "c"}, 3)
	for i := 0; i < 30; i++ {
		m.block(20)
	}
	v, h := m.closeRef()
	t.Logf("reference at version %d, current snapshot %d", v, migCurrentVersion(t, m.dir))
	migCheck(t, m.dir, v, h)
}

func TestMigrateMemIAVLSnapshotOnly(t *testing.T) {
	m := migNewRef(t, 0, []string{"a", "b"}, 5)
	for i := 0; i < 7; i++ {
		m.block(30)
	}
	if err := m.db.RewriteSnapshot(); err != nil {
		t.Fatal(err)
	}
	v, h := m.closeRef()
	migCheck(t, m.dir, v, h)
}

func TestMigrateMemIAVLEmpty(t *testing.T) {
	// nothing committed: snapshot-0 without trees and an empty log
	m := migNewRef(t, 0, nil, 5)
	v, h := m.closeRef()
	migCheck(t, m.dir, v, h)
}

// TestMigrateMemIAVLOverEmptyDatabase: a database with nothing committed
// (what a node's first start with this store leaves) is replaced by the
// migration, as by ImportIAVL; one with a committed version is refused
// and left as it was.
func TestMigrateMemIAVLOverEmptyDatabase(t *testing.T) {
	m := migNewRef(t, 0, []string{"a", "b"}, 1000)
	for i := 0; i < 5; i++ {
		if i == 3 {
			if err := m.db.RewriteSnapshot(); err != nil {
				t.Fatal(err)
			}
		}
		m.block(20)
	}
	v, h := m.closeRef()
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := compat.ImportMemIAVL(m.dir, dir, multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err = multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != v || !bytes.Equal(db.LastCommitInfo().Hash(), h) || fmt.Sprint(db.StoreNames()) != "[a b]" {
		t.Fatalf("after the migration over an empty database: version %d app hash %X stores %v, reference %d %X",
			db.Version(), db.LastCommitInfo().Hash(), db.StoreNames(), v, h)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// a database with a committed version
	dir = filepath.Join(t.TempDir(), "memiavl.db")
	db, err = multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: []byte("k"), Value: []byte("v")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	want := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := compat.ImportMemIAVL(m.dir, dir, multitree.Options{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("migration over a database at version 1: %v, want ErrExists", err)
	}
	db, err = multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 1 || !bytes.Equal(db.LastCommitInfo().Hash(), want) {
		t.Fatalf("the refused migration changed the database: version %d", db.Version())
	}
}

func TestMigrateMemIAVLRefusesRenameInLog(t *testing.T) {
	// no background rewrite, so the rename stays in the log
	m := migNewRef(t, 0, []string{"a", "b"}, 1000)
	for i := 0; i < 4; i++ {
		m.block(10)
	}
	m.upgrade(&refmemiavl.TreeNameUpgrade{Name: "c", RenameFrom: "a"})
	m.block(10)
	m.block(10)
	v, h := m.closeRef()

	// into missing parents: the failed migration removes them too, not
	// the directory that existed
	top := t.TempDir()
	dir := filepath.Join(top, "new", "data", "ours")
	err := compat.ImportMemIAVL(m.dir, dir, multitree.Options{})
	if !errors.Is(err, compat.ErrMigrate) {
		t.Fatalf("rename in the log: %v", err)
	}
	t.Log(err)
	if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("a failed migration left a database: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(top, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed migration left the directories it created: %v", err)
	}
	if _, err := os.Stat(top); err != nil {
		t.Fatalf("a failed migration removed a directory it did not create: %v", err)
	}
	// once the reference snapshot is rewritten after the rename, it imports
	db, err := refmemiavl.Load(m.dir, refmemiavl.Options{SnapshotInterval: 1000, AsyncCommitBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	migCheck(t, m.dir, v, h)
}

func TestMigrateMemIAVLCorrupt(t *testing.T) {
	m := migNewRef(t, 0, []string{"a"}, 5)
	for i := 0; i < 6; i++ {
		m.block(30)
	}
	if err := m.db.RewriteSnapshot(); err != nil {
		t.Fatal(err)
	}
	m.closeRef()
	cur, err := os.Readlink(filepath.Join(m.dir, "current"))
	if err != nil {
		t.Fatal(err)
	}
	kvs := filepath.Join(m.dir, cur, "a", "kvs")
	b, err := os.ReadFile(kvs)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // a value byte: the leaf hash no longer matches
	if err := os.WriteFile(kvs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ours")
	if err := compat.ImportMemIAVL(m.dir, dir, multitree.Options{}); !errors.Is(err, compat.ErrMigrate) {
		t.Fatalf("corrupt reference: %v", err)
	}
	if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("a failed migration left a database: %v", err)
	}
}

// TestMigrateMemIAVLRunningNode: a reference directory whose writer is open
// (a running node) is refused, leaving nothing behind, and a reference node
// that opens its directory during a migration fails to lock it; once it
// is closed, the migration goes through.
func TestMigrateMemIAVLRunningNode(t *testing.T) {
	m := migNewRef(t, 0, []string{"a", "b"}, 3)
	for i := 0; i < 5; i++ {
		m.block(20)
	}
	dir := filepath.Join(t.TempDir(), "ours")
	err := compat.ImportMemIAVL(m.dir, dir, multitree.Options{})
	if !errors.Is(err, compat.ErrMigrate) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("migration beside the reference's writer: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused migration left %s: %v", dir, err)
	}
	v, h := m.closeRef()
	migCheck(t, m.dir, v, h)
}

// doneOnceImported is a context that reports itself done once dir holds a
// current snapshot pointer: the migration's import of the reference
// snapshot has finished, and its replay of the reference log has begun.
type doneOnceImported struct {
	context.Context
	dir string
}

func (c doneOnceImported) Err() error {
	if _, err := os.Stat(filepath.Join(c.dir, "current")); err == nil {
		return context.Canceled
	}
	return nil
}

// TestMigrateMemIAVLContextStops: a migration whose context is done during
// the import of the snapshot, or during the replay of the log after it,
// fails with the context's error and leaves no database (nor the directory
// it created); rerun with a live context, it lands on the reference's
// version and app hash.
func TestMigrateMemIAVLContextStops(t *testing.T) {
	m := migNewRef(t, 0, []string{"a", "b"}, 4)
	for i := 0; i < 10; i++ {
		m.block(20)
	}
	v, h := m.closeRef()
	for _, during := range []string{"import", "replay"} {
		dir := filepath.Join(t.TempDir(), "new", "ours")
		var ctx context.Context = doneOnceImported{context.Background(), dir}
		if during == "import" {
			c, cancel := context.WithCancel(context.Background())
			cancel()
			ctx = c
		}
		err := compat.ImportMemIAVLContext(ctx, m.dir, dir, multitree.Options{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped during the %s: %v, want context.Canceled", during, err)
		}
		t.Log(err)
		if during == "replay" && !strings.Contains(err.Error(), "replay of the reference log stopped") {
			t.Fatalf("stopped during the replay: %v", err)
		}
		if _, err := os.Lstat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stopped during the %s: left the directories it created: %v", during, err)
		}
		if err := compat.ImportMemIAVLContext(context.Background(), m.dir, dir, multitree.Options{}); err != nil {
			t.Fatal(err)
		}
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != v || !bytes.Equal(db.LastCommitInfo().Hash(), h) {
			t.Fatalf("after the rerun: version %d app hash %X, reference %d %X", db.Version(), db.LastCommitInfo().Hash(), v, h)
		}
		db.Close()
	}
}

// TestMigrateMemIAVLUpgradeOrder: the reference applies a log entry's store
// upgrades one by one in their order, so one entry can add a store and
// delete it again, or delete one and add it again; the import must reach
// the reference's stores and app hash. Adding an existing store and then
// deleting it leaves the reference an empty store of that name (it deletes
// the first tree of the name, the old one); adding a new one and deleting
// it changes nothing; deleting one and adding it again empties it.
func TestMigrateMemIAVLUpgradeOrder(t *testing.T) {
	for _, initial := range []uint32{0, 100} {
		t.Run(fmt.Sprintf("initial=%d", initial), func(t *testing.T) {
			m := migNewRef(t, initial, []string{"a", "b", "c", "d"}, 1000)
			for i := 0; i < 12; i++ {
				switch i {
				case 5:
					if err := m.db.ApplyUpgrades([]*refmemiavl.TreeNameUpgrade{
						{Name: "b"}, {Name: "b", Delete: true}, // b emptied
						{Name: "x"}, {Name: "x", Delete: true}, // nothing
						{Name: "c", Delete: true}, {Name: "c"}, // c emptied
					}); err != nil {
						t.Fatal(err)
					}
					m.keys["b"], m.keys["c"] = nil, nil
				case 8:
					if err := m.db.ApplyUpgrades([]*refmemiavl.TreeNameUpgrade{
						{Name: "d", Delete: true}, {Name: "e"}, {Name: "d"}, {Name: "d", Delete: true}, // d gone, e added
					}); err != nil {
						t.Fatal(err)
					}
					m.stores = append(migWithout(m.stores, "d"), "e")
					delete(m.keys, "d")
				}
				m.block(20)
			}
			v, h := m.closeRef()
			migCheck(t, m.dir, v, h)
		})
	}
}
