package multitree_test

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

var fullRun = flag.Bool("multitree.full", false, "run the randomized tests at their largest size, even with -short (as MEMIAVL_FULL=1)")

// scale returns full unless the run is -short without -multitree.full or
// MEMIAVL_FULL=1.
func scale(full, short int) int { return size(full, full, short) }

// size returns the size of a test that has three: full with
// -multitree.full or MEMIAVL_FULL=1 (testutil.Full), short under -short,
// plain otherwise.
func size(full, plain, short int) int { return testutil.Size(*fullRun, full, plain, short) }

// oracle is the SDK's rootmulti store over cosmos/iavl in memory.
type oracle struct {
	db     dbm.DB
	rs     *rootmulti.Store
	stores []string
}

func newOracle(t testing.TB, stores []string) *oracle {
	o := &oracle{db: dbm.NewMemDB()}
	o.load(t, stores, nil)
	return o
}

// load (re)creates the rootmulti store with the given mounts and upgrades.
func (o *oracle) load(t testing.TB, stores []string, up *storetypes.StoreUpgrades) {
	t.Helper()
	rs := rootmulti.NewStore(o.db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.SetPruning(pruningtypes.NewCustomPruningOptions(20, 10))
	for _, s := range stores {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(s), storetypes.StoreTypeIAVL, nil)
	}
	var err error
	if up != nil {
		err = rs.LoadLatestVersionAndUpgrade(up)
	} else {
		err = rs.LoadLatestVersion()
	}
	if err != nil {
		t.Fatal(err)
	}
	o.rs, o.stores = rs, append([]string(nil), stores...)
}

func (o *oracle) store(name string) storetypes.KVStore {
	return o.rs.GetCommitKVStore(o.rs.StoreKeysByName()[name]).(storetypes.KVStore)
}

// chain drives the database and the oracle with the same random blocks.
type chain struct {
	t      *testing.T
	r      *rand.Rand
	gen    *testutil.KeyGen
	db     *multitree.DB
	dir    string
	opts   multitree.Options
	o      *oracle
	keys   map[string][][]byte
	gone   [][]byte // recently deleted keys, of any store (see compareData)
	hashes map[int64][]byte
	// catch-up rounds that rebased, and rebases that failed, in databases
	// already closed
	rebased, rebaseErrs int64
	// versions committed by a snapshot, in databases already closed
	snapshotCommits int64
	// maxLogged, if not 0, is the largest log entry of the databases
	// (multitree.SetMaxLoggedEntry): larger versions commit by a snapshot
	maxLogged int
}

// attach makes c use db, whose background rewrites wait for a few commits
// after writing so that their catch-up rebases.
func (c *chain) attach(db *multitree.DB) {
	multitree.DelayRewrites(db, 3)
	if c.maxLogged > 0 {
		multitree.SetMaxLoggedEntry(db, c.maxLogged)
	}
	c.db = db
}

// close closes c's database and counts its rebases.
func (c *chain) close() {
	rebased, _, failed := multitree.RebaseCounts(c.db)
	c.rebased += rebased
	c.rebaseErrs += failed
	c.snapshotCommits += multitree.SnapshotCommits(c.db)
	if err := c.db.Close(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chain) block(nops int) {
	var css []wal.ChangeSet
	for _, name := range c.o.stores {
		if c.r.Intn(3) == 0 {
			continue // untouched store this block
		}
		cs := wal.ChangeSet{Name: name}
		st := c.o.store(name)
		for i := 0; i < c.r.Intn(nops+1); i++ {
			keys := c.keys[name]
			switch p := c.r.Intn(10); {
			case p < 6 || len(keys) == 0:
				k, v := c.gen.Key(), c.gen.Value(200)
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: v})
				st.Set(k, v)
				c.keys[name] = append(keys, k)
			case p < 8:
				k := keys[c.r.Intn(len(keys))]
				v := c.gen.Value(200)
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: v})
				st.Set(k, v)
			default:
				j := c.r.Intn(len(keys))
				k := keys[j]
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k})
				st.Delete(k)
				keys[j] = keys[len(keys)-1]
				c.keys[name] = keys[:len(keys)-1]
				if len(c.gone) < 256 {
					c.gone = append(c.gone, k)
				} else {
					c.gone[c.r.Intn(len(c.gone))] = k
				}
			}
		}
		css = append(css, cs)
	}
	c.commit(css)
}

// commit applies css, whose changes the oracle's stores already hold, and
// commits both, checking the working and the committed app hash.
func (c *chain) commit(css []wal.ChangeSet) {
	t := c.t
	if err := c.db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	working := c.db.WorkingCommitInfo().Hash()
	if want := c.o.rs.WorkingHash(); !bytes.Equal(working, want) {
		t.Fatalf("working hash at %d: %X, rootmulti %X", c.db.WorkingVersion(), working, want)
	}
	info, err := c.db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	cid := c.o.rs.Commit()
	if info.Version != cid.Version || !bytes.Equal(info.Hash(), cid.Hash) {
		t.Fatalf("version %d app hash %X, rootmulti version %d %X", info.Version, info.Hash(), cid.Version, cid.Hash)
	}
	c.hashes[info.Version] = info.Hash()
}

func (c *chain) upgrade(up *storetypes.StoreUpgrades, stores []string) {
	var wu wal.Upgrades
	wu.Added = up.Added
	wu.Deleted = up.Deleted
	for _, r := range up.Renamed {
		wu.Renamed = append(wu.Renamed, wal.RenamedStore{OldName: r.OldKey, NewName: r.NewKey})
		c.keys[r.NewKey] = c.keys[r.OldKey]
		delete(c.keys, r.OldKey)
	}
	for _, d := range up.Deleted {
		delete(c.keys, d)
	}
	if err := c.db.ApplyUpgrades(wu); err != nil {
		c.t.Fatal(err)
	}
	c.o.load(c.t, stores, up)
}

func (c *chain) reopen() {
	c.close()
	db, err := multitree.Open(c.dir, c.opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.attach(db)
	if got, want := db.LastCommitInfo().Hash(), c.hashes[db.Version()]; !bytes.Equal(got, want) {
		c.t.Fatalf("reopened at %d with hash %X, want %X", db.Version(), got, want)
	}
}

// compareData checks every pair of every store against the oracle.
func (c *chain) compareData(view *multitree.View) {
	t := c.t
	names := view.StoreNames()
	if fmt.Sprint(names) != fmt.Sprint(sorted(c.o.stores)) {
		t.Fatalf("stores %v, rootmulti %v", names, sorted(c.o.stores))
	}
	for _, name := range names {
		tr := view.Tree(name)
		it := tr.Iterator(nil, nil, true)
		oit := c.o.store(name).Iterator(nil, nil)
		for ; oit.Valid(); oit.Next() {
			if !it.Valid() || !bytes.Equal(it.Key(), oit.Key()) || !bytes.Equal(it.Value(), oit.Value()) {
				t.Fatalf("store %s differs at key %X", name, oit.Key())
			}
			it.Next()
		}
		oit.Close()
		if it.Valid() {
			t.Fatalf("store %s has extra key %X", name, it.Key())
		}
		// point reads, of present keys and of deleted ones: a read that
		// takes a shortcut past the tree must not find an older value
		read := func(k []byte) {
			got, err := tr.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			want := c.o.store(name).Get(k)
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("store %s: Get(%X) = %X, rootmulti %X", name, k, got, want)
			}
			if has, err := tr.Has(k); err != nil || has != (want != nil) {
				t.Fatalf("store %s: Has(%X) = %v, %v", name, k, has, err)
			}
		}
		for _, k := range c.gone {
			read(k)
		}
		for i := 0; i < len(c.keys[name]); i += 5 {
			read(c.keys[name][i])
		}
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestAppHashAgainstRootMulti(t *testing.T) {
	r := testutil.Rand(t)
	stores := []string{"acc", "bank", "staking", "gov", "lockup", "distribution"}
	dir := t.TempDir()
	opts := multitree.Options{SnapshotInterval: 37, SnapshotKeepRecent: 2, AsyncCommitBuffer: 8 * r.Intn(2)}
	copts := opts
	copts.CreateIfMissing, copts.InitialStores = true, stores
	db, err := multitree.Open(dir, copts)
	if err != nil {
		t.Fatal(err)
	}
	c := &chain{t: t, r: r, gen: testutil.NewKeyGen(r), dir: dir, opts: opts, o: newOracle(t, stores),
		keys: map[string][][]byte{}, hashes: map[int64][]byte{}}
	c.attach(db)
	versions := scale(2000, 300)
	for v := 1; v <= versions; v++ {
		if v == versions/2 {
			up := &storetypes.StoreUpgrades{
				Added:   []string{"ibc", "upgrade"},
				Renamed: []storetypes.StoreRename{{OldKey: "gov", NewKey: "gov2"}},
				Deleted: []string{"distribution"},
			}
			c.upgrade(up, []string{"acc", "bank", "staking", "gov2", "lockup", "ibc", "upgrade"})
		}
		c.block(30)
		// rewrites run beside the commits and catch up, at most 12
		// versions behind (so that they switch on any machine)
		multitree.WaitRewriteBehind(c.db, 12)
		if r.Intn(150) == 0 || v == versions/2+1 {
			c.reopen()
		}
		if v%100 == 0 {
			view, err := c.db.View()
			if err != nil {
				t.Fatal(err)
			}
			c.compareData(view)
			view.Release()
		}
		if r.Intn(40) == 0 {
			// a historical view of a random kept version
			target := int64(1 + r.Intn(v))
			view, err := c.db.ViewAt(target)
			if err == nil {
				if !bytes.Equal(view.CommitInfo().Hash(), c.hashes[target]) {
					t.Fatalf("ViewAt(%d) hash differs", target)
				}
				view.Release()
			}
		}
	}
	// load random target versions read-only beside the writer
	for i := 0; i < 10; i++ {
		target := int64(1 + r.Intn(versions))
		ro, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: target})
		if err != nil {
			continue // older than every kept snapshot
		}
		if ro.Version() != target || !bytes.Equal(ro.LastCommitInfo().Hash(), c.hashes[target]) {
			t.Fatalf("TargetVersion %d opened at %d with another hash", target, ro.Version())
		}
		ro.Close()
	}
	c.close()
	// rewrites catch up by rebasing, except across the store upgrades,
	// where they replay the log
	if c.rebased == 0 || c.rebaseErrs != 0 {
		t.Fatalf("%d catch-up rounds rebased, %d rebases failed", c.rebased, c.rebaseErrs)
	}
	t.Logf("%d catch-up rounds rebased", c.rebased)
}
