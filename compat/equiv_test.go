package compat_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// chain drives rootmulti over cosmos/iavl (the oracle) and our multistore
// with the same random blocks and compares everything observable.
type chain struct {
	t      *testing.T
	r      *rand.Rand
	gen    *testutil.KeyGen
	keys   keyring
	m      mount
	odb    dbm.DB
	oracle *rootmulti.Store
	ours   *compat.MultiStore
	dir    string
	cfg    compat.Config
	known  map[string][][]byte // keys ever written per store, to pick from
	hashes map[int64][]byte    // app hash per version
	listen types.StoreKey      // a store with an ADR-038 listener on both sides
	ops    int
	stats  struct{ queries, proofs, verified, notKept, historical int }
}

func newChain(t *testing.T, m mount, cfg compat.Config) *chain {
	c := &chain{
		t: t, r: testutil.Rand(t), keys: keyring{}, m: m, odb: dbm.NewMemDB(),
		dir: t.TempDir(), cfg: cfg, known: map[string][][]byte{}, hashes: map[int64][]byte{},
	}
	c.gen = testutil.NewKeyGen(c.r)
	c.oracle = newOracle(t, c.odb, c.keys, m, nil)
	c.ours = newOurs(t, c.dir, c.cfg, c.keys, m, nil)
	c.listen = c.keys[m.iavl[0]]
	c.addListeners()
	t.Cleanup(func() { c.ours.Close() })
	return c
}

func (c *chain) addListeners() {
	c.oracle.AddListeners([]types.StoreKey{c.listen})
	c.ours.AddListeners([]types.StoreKey{c.listen})
}

// reload reopens both multistores (with upgrades and a new mount set when up
// is set).
func (c *chain) reload(m mount, up *types.StoreUpgrades) {
	if err := c.ours.Close(); err != nil {
		c.t.Fatal(err)
	}
	c.m = m
	c.oracle = newOracle(c.t, c.odb, c.keys, m, up)
	c.ours = newOurs(c.t, c.dir, c.cfg, c.keys, m, up)
	c.addListeners()
	if up != nil {
		for _, r := range up.Renamed {
			c.known[r.NewKey] = c.known[r.OldKey]
			delete(c.known, r.OldKey)
		}
	}
	c.compareLastCommit()
}

func (c *chain) compareLastCommit() {
	a, b := c.ours.LastCommitID(), c.oracle.LastCommitID()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		c.t.Fatalf("LastCommitID %d %X, rootmulti %d %X", a.Version, a.Hash, b.Version, b.Hash)
	}
	if c.ours.LatestVersion() != c.oracle.LatestVersion() {
		c.t.Fatalf("LatestVersion %d, rootmulti %d", c.ours.LatestVersion(), c.oracle.LatestVersion())
	}
}

// allStores returns the names of the mounted stores of every type.
func (c *chain) allStores() []string {
	names := append([]string(nil), c.m.iavl...)
	return append(names, c.m.transient, c.m.memory)
}

func (c *chain) pickStore() string {
	names := c.allStores()
	return names[c.r.Intn(len(names))]
}

// pickKey returns a key written before (possibly deleted since) or a new one.
func (c *chain) pickKey(store string) []byte {
	if ks := c.known[store]; len(ks) > 0 && c.r.Intn(4) != 0 {
		return ks[c.r.Intn(len(ks))]
	}
	return c.gen.Key()
}

func (c *chain) value() []byte {
	if c.r.Intn(50) == 0 {
		return []byte{}
	}
	return append(c.gen.Value(100), 'v')
}

// ms is a pair of multistores of the same kind: two branches, or the two
// roots.
type ms struct{ ours, oracle types.MultiStore }

// randomOps applies n random operations to both and compares every read.
// root says b holds the multistores themselves rather than branches.
func (c *chain) randomOps(b ms, n int, depth int, root bool) {
	t := c.t
	for i := 0; i < n; i++ {
		c.ops++
		name := c.pickStore()
		key := c.keys[name]
		os, rs := b.ours.GetKVStore(key), b.oracle.GetKVStore(key)
		switch p := c.r.Intn(100); {
		case p < 40:
			k, v := c.pickKey(name), c.value()
			os.Set(k, v)
			rs.Set(k, v)
			c.known[name] = append(c.known[name], k)
		case p < 55:
			k := c.pickKey(name)
			os.Delete(k)
			rs.Delete(k)
		case p < 70:
			k := c.pickKey(name)
			a, e := os.Get(k), rs.Get(k)
			if !bytes.Equal(a, e) || (a == nil) != (e == nil) {
				t.Fatalf("op %d: Get(%s, %X) = %X, rootmulti %X", c.ops, name, k, a, e)
			}
			if os.Has(k) != rs.Has(k) {
				t.Fatalf("op %d: Has(%s, %X) differs", c.ops, name, k)
			}
		case p < 85:
			c.compareIteration(name, os, rs)
		case p < 92 && depth < 3:
			// a nested branch, written back or dropped
			nested := ms{b.ours.CacheMultiStore(), b.oracle.CacheMultiStore()}
			c.randomOps(nested, c.r.Intn(10), depth+1, false)
			if c.r.Intn(3) != 0 {
				nested.ours.(types.CacheMultiStore).Write()
				nested.oracle.(types.CacheMultiStore).Write()
			}
		default:
			// delete while iterating a branch, which cachekv allows
			if root {
				continue
			}
			c.deleteRange(name, os, rs)
		}
	}
}

func (c *chain) bounds(name string) (start, end []byte) {
	if c.r.Intn(3) != 0 {
		start = c.pickKey(name)
	}
	if c.r.Intn(3) != 0 {
		end = c.pickKey(name)
	}
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		start, end = end, start
	}
	return start, end
}

func (c *chain) compareIteration(name string, os, rs types.KVStore) {
	start, end := c.bounds(name)
	var oi, ri types.Iterator
	if c.r.Intn(2) == 0 {
		oi, ri = os.Iterator(start, end), rs.Iterator(start, end)
	} else {
		oi, ri = os.ReverseIterator(start, end), rs.ReverseIterator(start, end)
	}
	defer oi.Close()
	defer ri.Close()
	limit := 1 + c.r.Intn(50)
	for n := 0; n < limit; n++ {
		if oi.Valid() != ri.Valid() {
			c.t.Fatalf("op %d: iterator over %s [%X, %X) valid %v, rootmulti %v at step %d", c.ops, name, start, end, oi.Valid(), ri.Valid(), n)
		}
		if !ri.Valid() {
			break
		}
		if !bytes.Equal(oi.Key(), ri.Key()) || !bytes.Equal(oi.Value(), ri.Value()) {
			c.t.Fatalf("op %d: iterator over %s at step %d: %X=%X, rootmulti %X=%X", c.ops, name, n, oi.Key(), oi.Value(), ri.Key(), ri.Value())
		}
		oi.Next()
		ri.Next()
	}
	// (cachekv's iterator reports an error once exhausted, so compare)
	if a, b := oi.Error(), ri.Error(); (a == nil) != (b == nil) {
		c.t.Fatalf("iterator error %v, rootmulti %v", a, b)
	}
}

// deleteRange deletes a few keys of a range while iterating it.
func (c *chain) deleteRange(name string, os, rs types.KVStore) {
	start, end := c.bounds(name)
	oi, ri := os.Iterator(start, end), rs.Iterator(start, end)
	for n := 0; n < 5 && ri.Valid(); n++ {
		if !oi.Valid() || !bytes.Equal(oi.Key(), ri.Key()) {
			c.t.Fatalf("op %d: delete-range iteration over %s differs", c.ops, name)
		}
		os.Delete(oi.Key())
		rs.Delete(ri.Key())
		oi.Next()
		ri.Next()
	}
	oi.Close()
	ri.Close()
}

// block runs one block: random operations in a branch that is written (or,
// rarely, dropped), a few direct writes, then the working hash and commit.
func (c *chain) block(nops int) {
	t := c.t
	branch := ms{c.ours.CacheMultiStore(), c.oracle.CacheMultiStore()}
	c.randomOps(branch, c.r.Intn(nops+1), 0, false)
	if c.r.Intn(20) != 0 {
		branch.ours.(types.CacheMultiStore).Write()
		branch.oracle.(types.CacheMultiStore).Write()
	}
	if c.r.Intn(5) == 0 {
		c.randomOps(ms{c.ours, c.oracle}, c.r.Intn(5), 0, true)
	}
	if a, b := c.ours.WorkingHash(), c.oracle.WorkingHash(); !bytes.Equal(a, b) {
		t.Fatalf("working hash at version %d: %X, rootmulti %X", c.ours.LatestVersion()+1, a, b)
	}
	a, b := c.ours.Commit(), c.oracle.Commit()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		t.Fatalf("commit: version %d app hash %X, rootmulti version %d %X", a.Version, a.Hash, b.Version, b.Hash)
	}
	c.hashes[a.Version] = a.Hash
	c.compareLastCommit()
	c.compareListeners()
}

func (c *chain) compareListeners() {
	a, b := c.ours.PopStateCache(), c.oracle.PopStateCache()
	if len(a) != len(b) {
		c.t.Fatalf("PopStateCache: %d pairs, rootmulti %d", len(a), len(b))
	}
	for i := range a {
		if a[i].String() != b[i].String() {
			c.t.Fatalf("PopStateCache[%d] = %v, rootmulti %v", i, a[i], b[i])
		}
	}
}

// guaranteed reports whether version must still be kept by our store: the
// versions since the previous snapshot interval always are.
func (c *chain) guaranteed(version int64) bool {
	return version >= c.ours.LatestVersion()-c.cfg.SnapshotInterval
}

// queries compares random "/key" and "/subspace" queries at the latest and
// older heights and verifies our proofs against the app hashes.
func (c *chain) queries(n int) {
	t := c.t
	latest := c.ours.LatestVersion()
	for i := 0; i < n; i++ {
		name := c.m.iavl[c.r.Intn(len(c.m.iavl))]
		var height int64
		switch p := c.r.Intn(10); {
		case p < 3:
			height = 0
		case p < 5:
			height = latest
		case p < 7:
			height = latest - 1
		default:
			height = 1 + c.r.Int63n(latest)
		}
		path := fmt.Sprintf("/%s/key", name)
		data := c.pickKey(name)
		if c.r.Intn(5) == 0 {
			path = fmt.Sprintf("/%s/subspace", name)
			data = data[:1+c.r.Intn(min(2, len(data)))]
		}
		prove := c.r.Intn(3) != 0
		ra, ea := c.ours.Query(&types.RequestQuery{Path: path, Data: data, Height: height, Prove: prove})
		rb, eb := c.oracle.Query(&types.RequestQuery{Path: path, Data: data, Height: height, Prove: prove})
		if err := sameResponse(ra, ea, rb, eb); err != nil {
			if (ea == nil && ra.Log == "version does not exist") || (ea != nil && eb == nil) {
				// a version we no longer keep (rootmulti here prunes nothing)
				if c.guaranteed(height) {
					t.Fatalf("query %s at kept height %d: %v %v", path, height, ra, ea)
				}
				c.stats.notKept++
				continue
			}
			t.Fatalf("query %s %X height %d prove %v: %v", path, data, height, prove, err)
		}
		c.stats.queries++
		if ea == nil && prove && ra.ProofOps != nil {
			c.stats.proofs++
			if verifiable(t, ra.ProofOps) {
				if err := verifyProof(name, ra, c.hashes[ra.Height]); err != nil {
					t.Fatalf("proof of %s/%X at height %d: %v", name, data, ra.Height, err)
				}
				c.stats.verified++
			}
		}
	}
}

// historical compares a branch of an older kept version with rootmulti's.
func (c *chain) historical() {
	t := c.t
	latest := c.ours.LatestVersion()
	height := latest - c.r.Int63n(min(latest, c.cfg.SnapshotInterval))
	oa, err := c.ours.CacheMultiStoreWithVersion(height)
	if err != nil {
		t.Fatalf("CacheMultiStoreWithVersion(%d), latest %d: %v", height, latest, err)
	}
	ob, err := c.oracle.CacheMultiStoreWithVersion(height)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.ours.GetCommitInfo(height)
	if err != nil {
		t.Fatal(err)
	}
	c.stats.historical++
	stores := map[string]bool{}
	for _, si := range info.StoreInfos {
		stores[si.Name] = true
	}
	for _, name := range c.m.iavl {
		if !stores[name] {
			continue // added after height
		}
		key := c.keys[name]
		os, rs := oa.GetKVStore(key), ob.GetKVStore(key)
		for i := 0; i < 10; i++ {
			k := c.pickKey(name)
			if a, b := os.Get(k), rs.Get(k); !bytes.Equal(a, b) || (a == nil) != (b == nil) {
				t.Fatalf("version %d: Get(%s, %X) = %X, rootmulti %X", height, name, k, a, b)
			}
		}
		c.compareIteration(name, os, rs)
		// writes to the branch stay in the branch
		k := c.gen.Key()
		os.Set(k, []byte("x"))
		if !bytes.Equal(os.Get(k), []byte("x")) {
			t.Fatal("write to a historical branch not visible in the branch")
		}
	}
}

func TestBlocksAgainstRootMulti(t *testing.T) {
	t.Run("default", func(t *testing.T) { runBlocks(t, testConfig(), scale(500, 80)) })
	t.Run("zero-copy,async", func(t *testing.T) {
		cfg := testConfig()
		cfg.ZeroCopy, cfg.AsyncCommitBuffer, cfg.Fsync, cfg.SnapshotInterval = true, 8, "none", 7
		runBlocks(t, cfg, scale(300, 40))
	})
}

func runBlocks(t *testing.T, cfg compat.Config, blocks int) {
	m := mount{iavl: []string{"acc", "bank", "staking", "gov", "distr"}, transient: "transient", memory: "memory"}
	c := newChain(t, m, cfg)
	for v := 1; v <= blocks; v++ {
		switch {
		case v == blocks/2:
			// a chain upgrade: a store added, one renamed, one deleted
			up := &types.StoreUpgrades{
				Added:   []string{"ibc"},
				Renamed: []types.StoreRename{{OldKey: "gov", NewKey: "gov2"}},
				Deleted: []string{"distr"},
			}
			// the deleted store must stay mounted for rootmulti to delete
			// it; it is not used in the upgrade's block
			c.reload(mount{iavl: []string{"acc", "bank", "staking", "gov2", "distr", "ibc"}, transient: "transient", memory: "memory"}, up)
			c.m.iavl = []string{"acc", "bank", "staking", "gov2", "ibc"}
			c.block(40)
			c.queries(6)
			c.reload(c.m, nil)
			continue
		case c.r.Intn(60) == 0:
			c.reload(c.m, nil)
		}
		c.block(40)
		c.queries(6)
		if c.r.Intn(5) == 0 {
			c.historical()
		}
	}
	// the app hash history matches where both still have it
	for v := int64(1); v <= int64(blocks); v++ {
		info, err := c.ours.GetCommitInfo(v)
		if err != nil {
			if c.guaranteed(v) {
				t.Fatalf("GetCommitInfo(%d): %v", v, err)
			}
			continue
		}
		if !bytes.Equal(info.Hash(), c.hashes[v]) {
			t.Fatalf("commit info of %d hashes to %X, committed %X", v, info.Hash(), c.hashes[v])
		}
	}
	t.Logf("%d blocks, %d operations; queries: %d equal to rootmulti's (%d with proofs, %d verified against the app hash), %d at versions no longer kept; %d historical branches compared",
		blocks, c.ops, c.stats.queries, c.stats.proofs, c.stats.verified, c.stats.notKept, c.stats.historical)
}
