package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// edgeQuery runs q on both and compares the responses (sameResponse); it
// returns our response and error for further checks.
func edgeQuery(t *testing.T, p *pair, q types.RequestQuery) (*types.ResponseQuery, error) {
	t.Helper()
	qa, qb := q, q
	var ra, rb *types.ResponseQuery
	var ea, eb error
	pa := outcome(func() any { ra, ea = p.ours.Query(&qa); return nil })
	pb := outcome(func() any { rb, eb = p.oracle.Query(&qb); return nil })
	if strings.HasPrefix(pa, "panic") || strings.HasPrefix(pb, "panic") {
		if pa != pb {
			t.Errorf("query %s %q height %d prove %v: %s, rootmulti %s", q.Path, q.Data, q.Height, q.Prove, pa, pb)
		}
		return nil, fmt.Errorf("panicked")
	}
	if err := sameResponse(ra, ea, rb, eb); err != nil {
		t.Errorf("query %s %q height %d prove %v: %v", q.Path, q.Data, q.Height, q.Prove, err)
	}
	return ra, ea
}

// sameErrText compares two errors by presence and message.
func sameErrText(what string, a, b error) error {
	if (a == nil) != (b == nil) {
		return fmt.Errorf("%s: error %v, rootmulti %v", what, a, b)
	}
	if a != nil && a.Error() != b.Error() {
		return fmt.Errorf("%s: error %q, rootmulti %q", what, a.Error(), b.Error())
	}
	return nil
}

// sameOutcome runs f on both multistores and compares the outcomes (result or
// panic message).
func sameOutcome(t *testing.T, what string, p *pair, f func(s types.CommitMultiStore) any) {
	t.Helper()
	got := outcome(func() any { return f(p.ours) })
	want := outcome(func() any { return f(p.oracle) })
	if got != want {
		t.Errorf("%s: %s, rootmulti %s", what, got, want)
	}
}

// TestEdgeQueryBeforeFirstCommit: ABCI queries of a freshly created,
// never-committed multistore.
func TestEdgeQueryBeforeFirstCommit(t *testing.T) {
	p := newPair(t, smallMount)
	for _, q := range []types.RequestQuery{
		{Path: "/a/key", Data: []byte("k")},
		{Path: "/a/key", Data: []byte("k"), Height: 1},
		{Path: "/a/key", Data: []byte("k"), Height: -1},
		{Path: "/a/key", Data: []byte("k"), Height: -1, Prove: true},
		{Path: "/a/subspace", Data: []byte("k")},
	} {
		edgeQuery(t, p, q)
	}
	// with a proof at height 0 rootmulti panics (iavl finds no tree of
	// version 0); ours returns rootmulti's error for an empty proof
	_, err := p.ours.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("k"), Prove: true})
	if err == nil || !strings.Contains(err.Error(), "proof is unexpectedly empty") {
		t.Fatalf("proven query at height 0 of a new store: %v", err)
	}
}

// TestEdgeQueryHeightsAndProofs: /key queries at every height form, present,
// absent, leftmost/rightmost-absent, empty-valued and large-valued keys, with
// and without proofs; proofs must verify against the app hash of their
// height.
func TestEdgeQueryHeightsAndProofs(t *testing.T) {
	p := newPair(t, smallMount)
	big := bytes.Repeat([]byte("B"), 1<<20)
	hashes := map[int64][]byte{}
	id := p.commit(map[string][][2][]byte{"a": {
		{[]byte("m1"), []byte("v1")}, {[]byte("m3"), []byte("v3")}, {[]byte("m5"), []byte("v5")},
		{[]byte("empty"), []byte{}}, {[]byte("big"), big}, {[]byte{0xff, 0xff}, []byte("ff")},
	}})
	hashes[id.Version] = id.Hash
	id = p.commit(map[string][][2][]byte{"a": {{[]byte("m2"), []byte("v2")}}, "b": {{[]byte("x"), []byte("y")}}})
	hashes[id.Version] = id.Hash
	// a third commit with no changes at all
	id = p.commit(nil)
	hashes[id.Version] = id.Hash
	p.sameLastCommit()

	keys := [][]byte{
		[]byte("m1"), []byte("m2"), []byte("m4"), []byte("a"), []byte("zz"), []byte("empty"),
		[]byte("big"), {0xff, 0xff}, {0xff, 0xff, 0x00}, {0x00}, bytes.Repeat([]byte("k"), 5000),
	}
	for _, store := range []string{"a", "b"} {
		for _, h := range []int64{0, 1, 2, 3, 4, 100, -1} {
			for _, k := range keys {
				for _, prove := range []bool{false, true} {
					res, err := edgeQuery(t, p, types.RequestQuery{Path: "/" + store + "/key", Data: k, Height: h, Prove: prove})
					if err != nil || !prove || res.ProofOps == nil {
						continue
					}
					if !verifiable(t, res.ProofOps) {
						continue
					}
					if err := verifyProof(store, res, hashes[res.Height]); err != nil {
						t.Errorf("proof of %s/%q at %d: %v", store, k, res.Height, err)
					}
				}
			}
		}
	}
}

// TestEdgeEmptyValueAcrossSnapshot: a pair with an empty value read back
// through every path after commits, a snapshot rewrite and a reopen:
// Get must stay a non-nil empty slice and Has true, as with iavl.
func TestEdgeEmptyValueAcrossSnapshot(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("e"), []byte{}}, {[]byte("f"), []byte("x")}}})
	p.commit(map[string][][2][]byte{"b": {{[]byte("e"), []byte{}}}})
	check := func(stage string) {
		t.Helper()
		ak := p.keys["a"]
		for name, f := range map[string]func(s types.CommitMultiStore) any{
			"root get": func(s types.CommitMultiStore) any {
				v := s.GetKVStore(ak).Get([]byte("e"))
				return fmt.Sprintf("%v %d %v", v == nil, len(v), s.GetKVStore(ak).Has([]byte("e")))
			},
			"branch get": func(s types.CommitMultiStore) any {
				v := s.CacheMultiStore().GetKVStore(ak).Get([]byte("e"))
				return fmt.Sprintf("%v %d", v == nil, len(v))
			},
			"historical get": func(s types.CommitMultiStore) any {
				b, err := s.CacheMultiStoreWithVersion(1)
				if err != nil {
					return err
				}
				v := b.GetKVStore(ak).Get([]byte("e"))
				return fmt.Sprintf("%v %d %v", v == nil, len(v), b.GetKVStore(ak).Has([]byte("e")))
			},
			"iterator value": func(s types.CommitMultiStore) any {
				it := s.GetKVStore(ak).Iterator(nil, nil)
				defer it.Close()
				var out []string
				for ; it.Valid(); it.Next() {
					out = append(out, fmt.Sprintf("%s:%v", it.Key(), it.Value() == nil))
				}
				return out
			},
			"historical iterator value": func(s types.CommitMultiStore) any {
				b, err := s.CacheMultiStoreWithVersion(2)
				if err != nil {
					return err
				}
				it := b.GetKVStore(ak).ReverseIterator(nil, nil)
				defer it.Close()
				var out []string
				for ; it.Valid(); it.Next() {
					out = append(out, fmt.Sprintf("%s:%v", it.Key(), it.Value() == nil))
				}
				return out
			},
		} {
			sameOutcome(t, stage+": "+name, p, f)
		}
		for _, h := range []int64{1, 2} {
			edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("e"), Height: h})
			edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("e"), Height: h, Prove: true})
		}
		edgeQuery(t, p, types.RequestQuery{Path: "/a/subspace", Data: []byte("e")})
	}
	check("in memory")
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after snapshot rewrite")
	p.commit(map[string][][2][]byte{"b": {{[]byte("z"), []byte("z")}}})
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
	p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
	check("after reopen")
}

// TestEdgeKVStoreEdges: empty keys and odd iterator bounds on the root
// store, a branch and a historical branch.
func TestEdgeKVStoreEdges(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v2")}, {[]byte("k3"), []byte("v3")}}})
	ak := p.keys["a"]
	dump := func(it types.Iterator) any {
		defer it.Close()
		var out []string
		for ; it.Valid(); it.Next() {
			out = append(out, string(it.Key()))
		}
		return out
	}
	ops := map[string]func(s types.KVStore) any{
		"get empty key":     func(s types.KVStore) any { return s.Get([]byte{}) == nil },
		"has empty key":     func(s types.KVStore) any { return s.Has([]byte{}) },
		"delete absent key": func(s types.KVStore) any { s.Delete([]byte("nope")); return s.Has([]byte("nope")) },
		"iter empty start":  func(s types.KVStore) any { return dump(s.Iterator([]byte{}, nil)) },
		"iter empty end":    func(s types.KVStore) any { return dump(s.Iterator(nil, []byte{})) },
		"riter empty start": func(s types.KVStore) any { return dump(s.ReverseIterator([]byte{}, nil)) },
		"iter start>end":    func(s types.KVStore) any { return dump(s.Iterator([]byte("k3"), []byte("k1"))) },
		"riter start>end":   func(s types.KVStore) any { return dump(s.ReverseIterator([]byte("k3"), []byte("k1"))) },
		"iter start==end":   func(s types.KVStore) any { return dump(s.Iterator([]byte("k2"), []byte("k2"))) },
		"riter nil nil":     func(s types.KVStore) any { return dump(s.ReverseIterator(nil, nil)) },
		"iter domain": func(s types.KVStore) any {
			it := s.Iterator([]byte("k1"), nil)
			defer it.Close()
			a, b := it.Domain()
			return fmt.Sprintf("%q %q", a, b)
		},
		"exhausted iterator": func(s types.KVStore) any {
			it := s.Iterator([]byte("k3"), nil)
			defer it.Close()
			it.Next()
			return fmt.Sprintf("%v %v", it.Valid(), it.Error())
		},
		"key of exhausted iterator": func(s types.KVStore) any {
			it := s.Iterator([]byte("zz"), nil)
			defer it.Close()
			return it.Key()
		},
	}
	for name, f := range ops {
		sameOutcome(t, "root: "+name, p, func(s types.CommitMultiStore) any { return f(s.GetKVStore(ak)) })
		sameOutcome(t, "branch: "+name, p, func(s types.CommitMultiStore) any { return f(s.CacheMultiStore().GetKVStore(ak)) })
		sameOutcome(t, "historical: "+name, p, func(s types.CommitMultiStore) any {
			b, err := s.CacheMultiStoreWithVersion(1)
			if err != nil {
				return err
			}
			return f(b.GetKVStore(ak))
		})
	}
	// deleting the empty key directly on the root store, then committing
	sameOutcome(t, "delete empty key then commit", p, func(s types.CommitMultiStore) any {
		s.GetKVStore(ak).Delete([]byte{})
		id := s.Commit()
		return fmt.Sprintf("%d %X", id.Version, id.Hash)
	})
}

// TestEdgeCommitInfoAndVersions: GetCommitInfo, CacheMultiStoreWithVersion
// and LoadVersion at zero, negative, future and kept versions.
func TestEdgeCommitInfoAndVersions(t *testing.T) {
	p := newPair(t, smallMount)
	// on an empty database
	for _, v := range []int64{0, 1, -1} {
		_, ea := p.ours.GetCommitInfo(v)
		_, eb := p.oracle.GetCommitInfo(v)
		if err := sameErrText(fmt.Sprintf("empty db: GetCommitInfo(%d)", v), ea, eb); err != nil {
			t.Error(err)
		}
		_, ea = p.ours.CacheMultiStoreWithVersion(v)
		_, eb = p.oracle.CacheMultiStoreWithVersion(v)
		if (ea == nil) != (eb == nil) {
			t.Errorf("empty db: CacheMultiStoreWithVersion(%d): %v, rootmulti %v", v, ea, eb)
		}
	}
	for i := 0; i < 3; i++ {
		p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
	}
	for _, v := range []int64{0, -1, 1, 3, 4, 10} {
		ia, ea := p.ours.GetCommitInfo(v)
		ib, eb := p.oracle.GetCommitInfo(v)
		if err := sameErrText(fmt.Sprintf("GetCommitInfo(%d)", v), ea, eb); err != nil {
			t.Error(err)
		} else if ea == nil && !bytes.Equal(ia.Hash(), ib.Hash()) {
			t.Errorf("GetCommitInfo(%d) hash %X, rootmulti %X", v, ia.Hash(), ib.Hash())
		}
		_, ea = p.ours.CacheMultiStoreWithVersion(v)
		_, eb = p.oracle.CacheMultiStoreWithVersion(v)
		if err := sameErrText(fmt.Sprintf("CacheMultiStoreWithVersion(%d)", v), ea, eb); err != nil {
			t.Error(err)
		}
	}
}

// TestEdgeLoadVersionZeroOnNonEmpty: LoadVersion(0) of a database with
// versions loads the latest (rootmulti's stores load their latest too, but
// it reports version 0; see README).
func TestEdgeLoadVersionZeroOnNonEmpty(t *testing.T) {
	p := newPair(t, smallMount)
	var last types.CommitID
	for i := 0; i < 3; i++ {
		last = p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
	}
	ea, eb := p.ours.LoadVersion(0), p.oracle.LoadVersion(0)
	if err := sameErrText("LoadVersion(0)", ea, eb); err != nil {
		t.Fatal(err)
	}
	if a := p.ours.LastCommitID(); a.Version != last.Version || !bytes.Equal(a.Hash, last.Hash) {
		t.Errorf("LastCommitID after LoadVersion(0): %d %X, want the latest %d %X", a.Version, a.Hash, last.Version, last.Hash)
	}
	for i := 0; i < 3; i++ {
		k := fmt.Appendf(nil, "k%d", i)
		sameOutcome(t, fmt.Sprintf("Get(%s) after LoadVersion(0)", k), p, func(s types.CommitMultiStore) any {
			return fmt.Sprintf("%q", s.GetKVStore(p.keys["a"]).Get(k))
		})
	}
}

// TestEdgeLoadFutureVersion: LoadVersion of a version not committed yet.
func TestEdgeLoadFutureVersion(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	ea, eb := p.ours.LoadVersion(5), p.oracle.LoadVersion(5)
	if (ea == nil) != (eb == nil) {
		t.Fatalf("LoadVersion(5): %v, rootmulti %v", ea, eb)
	}
	if ea != nil && ea.Error() != eb.Error() {
		t.Logf("(message) LoadVersion(5): %q, rootmulti %q", ea, eb)
	}
}

// TestEdgeOnlyTransientStores: a multistore with no IAVL store at all.
func TestEdgeOnlyTransientStores(t *testing.T) {
	m := mount{transient: "t", memory: "m"}
	p := newPair(t, m)
	for i := 0; i < 2; i++ {
		if a, b := p.ours.WorkingHash(), p.oracle.WorkingHash(); !bytes.Equal(a, b) {
			t.Errorf("WorkingHash %X, rootmulti %X", a, b)
		}
		p.ours.GetKVStore(p.keys["t"]).Set([]byte("k"), []byte("v"))
		p.oracle.GetKVStore(p.keys["t"]).Set([]byte("k"), []byte("v"))
		a, b := p.ours.Commit(), p.oracle.Commit()
		if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
			t.Errorf("commit %d %X, rootmulti %d %X", a.Version, a.Hash, b.Version, b.Hash)
		}
		p.sameLastCommit()
	}
}

// TestEdgeSetInitialVersionEdges: SetInitialVersion after writes of the
// working version, and with 0 / 1.
func TestEdgeSetInitialVersionEdges(t *testing.T) {
	for _, tc := range []struct {
		name        string
		v           int64
		writeBefore bool
	}{
		{"after writes", 10, true},
		{"zero", 0, false},
		{"one", 1, false},
		{"one after writes", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, smallMount)
			if tc.writeBefore {
				p.ours.GetKVStore(p.keys["a"]).Set([]byte("g"), []byte("genesis"))
				p.oracle.GetKVStore(p.keys["a"]).Set([]byte("g"), []byte("genesis"))
			}
			ea, eb := p.ours.SetInitialVersion(tc.v), p.oracle.SetInitialVersion(tc.v)
			if err := sameErrText("SetInitialVersion", ea, eb); err != nil {
				t.Error(err)
			}
			p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
			p.sameLastCommit()
		})
	}
}

// TestEdgeStoreUpgradeEdges: store upgrades rootmulti handles that the
// randomized test does not exercise.
func TestEdgeStoreUpgradeEdges(t *testing.T) {
	type step struct {
		name  string
		mount mount
		up    *types.StoreUpgrades
	}
	base := mount{iavl: []string{"a", "b"}}
	for _, tc := range []step{
		{"delete a mounted store that never existed", mount{iavl: []string{"a", "b", "x"}}, &types.StoreUpgrades{Deleted: []string{"x"}}},
		{"add a store that exists", base, &types.StoreUpgrades{Added: []string{"b"}}},
		{"rename from a store that does not exist", mount{iavl: []string{"a", "b", "c"}}, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "nope", NewKey: "c"}}}},
		{"rename into an existing store", base, &types.StoreUpgrades{Renamed: []types.StoreRename{{OldKey: "a", NewKey: "b"}}}},
		{"add and query before commit", mount{iavl: []string{"a", "b", "c"}}, &types.StoreUpgrades{Added: []string{"c"}}},
		{"delete and query before commit", base, &types.StoreUpgrades{Deleted: []string{"b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, mount{iavl: []string{"a", "b"}})
			p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("a1")}}, "b": {{[]byte("k2"), []byte("b2")}}})
			p.commit(map[string][][2][]byte{"a": {{[]byte("k3"), []byte("a3")}}})
			if err := p.ours.Close(); err != nil {
				t.Fatal(err)
			}
			ours, err := compat.NewMultiStore(p.dir, log.NewNopLogger(), p.cfg)
			if err != nil {
				t.Fatal(err)
			}
			p.ours = ours
			oracle := rootmulti.NewStore(p.odb, log.NewNopLogger(), metrics.NewNoOpMetrics())
			p.oracle = oracle
			mountAll(ours, p.keys, tc.mount)
			mountAll(oracle, p.keys, tc.mount)
			ea, eb := ours.LoadLatestVersionAndUpgrade(tc.up), oracle.LoadLatestVersionAndUpgrade(tc.up)
			if (ea == nil) != (eb == nil) {
				t.Fatalf("load: %v, rootmulti %v", ea, eb)
			}
			if ea != nil {
				return
			}
			if a, b := ours.WorkingHash(), oracle.WorkingHash(); !bytes.Equal(a, b) {
				t.Errorf("working hash %X, rootmulti %X", a, b)
			}
			for _, name := range tc.mount.iavl {
				key := p.keys[name]
				if ours.GetCommitKVStore(key) == nil || oracle.GetCommitKVStore(key) == nil {
					continue
				}
				sameOutcome(t, "LastCommitID of "+name, p, func(s types.CommitMultiStore) any {
					id := s.GetCommitKVStore(key).LastCommitID()
					return fmt.Sprintf("%d %X", id.Version, id.Hash)
				})
				sameOutcome(t, "WorkingHash of "+name, p, func(s types.CommitMultiStore) any {
					return fmt.Sprintf("%X", s.GetCommitKVStore(key).WorkingHash())
				})
				for _, h := range []int64{0, 1, 2, 3} {
					edgeQuery(t, p, types.RequestQuery{Path: "/" + name + "/key", Data: []byte("k1"), Height: h})
				}
			}
			// every mounted store answers until the commit, those the
			// upgrades removed from their committed versions, with
			// proofs, and with an empty subspace (with a proof at
			// height 0 of an added store rootmulti panics: see
			// TestEdgeQueryBeforeFirstCommit)
			for _, name := range tc.mount.iavl {
				for _, h := range []int64{0, 1, 2, 3} {
					for _, prove := range []bool{false, true} {
						if !prove || h > 0 {
							edgeQuery(t, p, types.RequestQuery{Path: "/" + name + "/key", Data: []byte("k1"), Height: h, Prove: prove})
						}
					}
				}
				edgeQuery(t, p, types.RequestQuery{Path: "/" + name + "/subspace", Data: []byte("k")})
			}
			p.commit(map[string][][2][]byte{"a": {{[]byte("k4"), []byte("a4")}}})
			p.sameLastCommit()
			for _, name := range tc.mount.iavl {
				if ours.GetCommitKVStore(p.keys[name]) == nil {
					continue
				}
				for _, h := range []int64{0, 2, 3} {
					edgeQuery(t, p, types.RequestQuery{Path: "/" + name + "/key", Data: []byte("k1"), Height: h})
				}
			}
			for _, name := range tc.mount.iavl { // the removed ones: gone
				edgeQuery(t, p, types.RequestQuery{Path: "/" + name + "/key", Data: []byte("k1"), Height: 2})
			}
		})
	}
}

// TestEdgeRollbackEdges: RollbackToVersion to the latest and a future
// version.
func TestEdgeRollbackEdges(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 0; i < 3; i++ {
		p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
	}
	for _, v := range []int64{3, 7} {
		ea, eb := p.ours.RollbackToVersion(v), p.oracle.RollbackToVersion(v)
		if (ea == nil) != (eb == nil) {
			t.Errorf("RollbackToVersion(%d): %v, rootmulti %v", v, ea, eb)
		}
		a, b := p.ours.LastCommitID(), p.oracle.LastCommitID()
		if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
			t.Errorf("after RollbackToVersion(%d): LastCommitID %d %X, rootmulti %d %X", v, a.Version, a.Hash, b.Version, b.Hash)
		}
	}
}

// TestEdgeTreeStoreMethods: the CommitKVStore of an IAVL store as rootmulti
// returns it (iavl.Store).
func TestEdgeTreeStoreMethods(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	ak := p.keys["a"]
	// GetPruning differs: iavl.Store panics, ours returns PruningUndefined
	sameOutcome(t, "store Query /key", p, func(s types.CommitMultiStore) any {
		res, err := s.GetCommitKVStore(ak).(types.Queryable).Query(&types.RequestQuery{Path: "/key", Data: []byte("k"), Prove: true})
		if err != nil {
			return err
		}
		return fmt.Sprintf("%d %q %d", res.Height, res.Value, len(res.ProofOps.GetOps()))
	})
	sameOutcome(t, "GetStoreByName transient is queryable", p, func(s types.CommitMultiStore) any {
		_, ok := s.(interface{ GetStoreByName(string) types.Store }).GetStoreByName("t").(types.Queryable)
		return ok
	})
}

// TestEdgeLoadOlderVersionReads: after LoadVersion of an older version (as
// an export at a past height does), queries and historical branches of the
// versions after it, and the default query height.
func TestEdgeLoadOlderVersionReads(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 1; i <= 5; i++ {
		p.commit(map[string][][2][]byte{"a": {{[]byte("k"), fmt.Appendf(nil, "v%d", i)}}})
	}
	if err := p.ours.LoadVersion(2); err != nil {
		t.Fatal(err)
	}
	if err := p.oracle.LoadVersion(2); err != nil {
		t.Fatal(err)
	}
	p.sameLastCommit()
	read := func(s types.CommitMultiStore, h int64) any {
		b, err := s.CacheMultiStoreWithVersion(h)
		if err != nil {
			return "error"
		}
		return string(b.GetKVStore(p.keys["a"]).Get([]byte("k")))
	}
	for _, h := range []int64{0, 1, 2} {
		edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("k"), Height: h})
		edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("k"), Height: h, Prove: true})
		sameOutcome(t, fmt.Sprintf("CacheMultiStoreWithVersion(%d) read", h), p, func(s types.CommitMultiStore) any { return read(s, h) })
	}
	// the versions after it are not readable until committed again
	// (rootmulti still serves them; see README)
	for _, h := range []int64{3, 4, 5} {
		res, err := p.ours.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("k"), Height: h})
		if err != nil || res.Log != "version does not exist" || res.Value != nil {
			t.Errorf("query at %d after LoadVersion(2): %v %+v", h, err, res)
		}
		if got := read(p.ours, h); got != "error" {
			t.Errorf("CacheMultiStoreWithVersion(%d) after LoadVersion(2): %v", h, got)
		}
	}
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v3")}}})
	p.sameLastCommit()
	edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("k"), Height: 3, Prove: true})
	sameOutcome(t, "CacheMultiStoreWithVersion(3) read after its re-commit", p, func(s types.CommitMultiStore) any { return read(s, 3) })
}

// TestEdgeLoadOlderVersionAndUpgrade: LoadVersionAndUpgrade of an older
// version adding a store, then re-committing the next version with the same
// writes to the existing stores.
func TestEdgeLoadOlderVersionAndUpgrade(t *testing.T) {
	p := newPair(t, mount{iavl: []string{"a", "b"}})
	for i := 1; i <= 3; i++ {
		p.commit(map[string][][2][]byte{"a": {{[]byte("k"), fmt.Appendf(nil, "v%d", i)}}})
	}
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	m := mount{iavl: []string{"a", "b", "c"}}
	up := &types.StoreUpgrades{Added: []string{"c"}}
	ours, err := compat.NewMultiStore(p.dir, log.NewNopLogger(), p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.ours = ours
	p.oracle = rootmulti.NewStore(p.odb, log.NewNopLogger(), metrics.NewNoOpMetrics())
	mountAll(p.ours, p.keys, m)
	mountAll(p.oracle, p.keys, m)
	ea, eb := p.ours.LoadVersionAndUpgrade(2, up), p.oracle.LoadVersionAndUpgrade(2, up)
	if (ea == nil) != (eb == nil) {
		t.Fatalf("LoadVersionAndUpgrade: %v, rootmulti %v", ea, eb)
	}
	p.sameLastCommit()
	// rootmulti commits version 3 again with the new store; ours refuses
	// another content for a logged version (see README)
	p.oracle.GetKVStore(p.keys["a"]).Set([]byte("k"), []byte("v3"))
	p.oracle.Commit()
	p.ours.GetKVStore(p.keys["a"]).Set([]byte("k"), []byte("v3"))
	got := outcome(func() any { return p.ours.Commit() })
	if !strings.HasPrefix(got, "panic") || !strings.Contains(got, "different content") {
		t.Fatalf("re-commit of version 3 with an added store: %s", got)
	}
}

// TestEdgeSubspaceReadsCommitted documents (and pins) the deliberate
// "/subspace" difference: ours reads the last committed version, rootmulti
// the working state; both agree once committed.
func TestEdgeSubspaceReadsCommitted(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte{0xff, 0x01}, []byte("x")}, {[]byte{0xff, 0xff}, []byte{}}, {[]byte("p1"), []byte("y")}}})
	for _, d := range [][]byte{{0xff}, {0xff, 0xff}, []byte("p"), {0x00}} {
		edgeQuery(t, p, types.RequestQuery{Path: "/a/subspace", Data: d})
	}
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		s.GetKVStore(p.keys["a"]).Set([]byte("p2"), []byte("uncommitted"))
	}
	ra, _ := p.ours.Query(&types.RequestQuery{Path: "/a/subspace", Data: []byte("p")})
	rb, _ := p.oracle.Query(&types.RequestQuery{Path: "/a/subspace", Data: []byte("p")})
	if bytes.Contains(ra.Value, []byte("uncommitted")) || !bytes.Contains(rb.Value, []byte("uncommitted")) {
		t.Fatalf("documented /subspace behaviour changed: ours %q, rootmulti %q", ra.Value, rb.Value)
	}
	// "/key" reads committed versions on both
	for _, h := range []int64{0, 1} {
		edgeQuery(t, p, types.RequestQuery{Path: "/a/key", Data: []byte("p2"), Height: h})
	}
}

// TestEdgeListenersOrdering: ADR-038 listeners on several stores written
// directly, through branches and through nested branches; PopStateCache
// order and content.
func TestEdgeListenersOrdering(t *testing.T) {
	p := newPair(t, mount{iavl: []string{"a", "b", "c"}, transient: "t", memory: "m"})
	keys := []types.StoreKey{p.keys["c"], p.keys["a"], p.keys["t"], p.keys["m"]}
	p.ours.AddListeners(keys)
	p.oracle.AddListeners(keys)
	p.ours.AddListeners(keys[:1]) // twice: no duplicate listener
	p.oracle.AddListeners(keys[:1])
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		for _, name := range []string{"c", "b", "a", "t", "m"} {
			s.GetKVStore(p.keys[name]).Set([]byte("z"), []byte(name))
			s.GetKVStore(p.keys[name]).Delete([]byte("absent"))
		}
		br := s.CacheMultiStore()
		br.GetKVStore(p.keys["a"]).Set([]byte("b1"), []byte("1"))
		nested := br.CacheMultiStore()
		nested.GetKVStore(p.keys["c"]).Set([]byte("n1"), []byte("2"))
		nested.GetKVStore(p.keys["a"]).Delete([]byte("z"))
		nested.Write()
		br.Write()
		if b, err := s.CacheMultiStoreWithVersion(s.LatestVersion()); err == nil {
			_ = b.GetKVStore(p.keys["a"]).Get([]byte("z"))
		}
	}
	a, b := p.ours.PopStateCache(), p.oracle.PopStateCache()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("PopStateCache:\n %v\nrootmulti:\n %v", a, b)
	}
	for _, k := range []types.StoreKey{p.keys["a"], p.keys["b"], p.keys["t"]} {
		if p.ours.ListeningEnabled(k) != p.oracle.ListeningEnabled(k) {
			t.Errorf("ListeningEnabled(%s) differs", k.Name())
		}
	}
	a1, b1 := p.ours.Commit(), p.oracle.Commit()
	if !bytes.Equal(a1.Hash, b1.Hash) {
		t.Fatal("commit differs")
	}
	if a, b := p.ours.PopStateCache(), p.oracle.PopStateCache(); len(a) != len(b) {
		t.Fatalf("PopStateCache after commit: %d, rootmulti %d", len(a), len(b))
	}
}

// TestEdgeInitialVersionThenReload: SetInitialVersion after the load, then a
// reload before the first commit (rootmulti keeps its initial version).
func TestEdgeInitialVersionThenReload(t *testing.T) {
	p := newPair(t, smallMount)
	ea, eb := p.ours.SetInitialVersion(50), p.oracle.SetInitialVersion(50)
	if err := sameErrText("SetInitialVersion", ea, eb); err != nil {
		t.Fatal(err)
	}
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	if err := p.oracle.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	// rootmulti's trees forget the initial version on the reload and save
	// version 1 under a multistore version 50, so its app hash is not
	// compared; ours commits every store at 50, which a fresh rootmulti
	// with the initial version set before the writes agrees with
	p.ours.GetKVStore(p.keys["a"]).Set([]byte("k"), []byte("v"))
	id := p.ours.Commit()
	if id.Version != 50 {
		t.Fatalf("first commit after a reload: version %d", id.Version)
	}
	if v := p.ours.GetCommitKVStore(p.keys["a"]).LastCommitID().Version; v != 50 {
		t.Fatalf("store a committed at %d", v)
	}
	q := newPair(t, smallMount)
	if err := q.oracle.SetInitialVersion(50); err != nil {
		t.Fatal(err)
	}
	q.oracle.GetKVStore(q.keys["a"]).Set([]byte("k"), []byte("v"))
	if want := q.oracle.Commit(); want.Version != 50 || !bytes.Equal(id.Hash, want.Hash) {
		t.Fatalf("first commit %d %X, rootmulti without the reload %d %X", id.Version, id.Hash, want.Version, want.Hash)
	}
}

// TestEdgeEmptyFirstCommitsAndInitialWorkingHash: commits with no writes at
// all (empty trees) and the working hash under an initial version.
func TestEdgeEmptyFirstCommitsAndInitialWorkingHash(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 0; i < 2; i++ {
		if a, b := p.ours.WorkingHash(), p.oracle.WorkingHash(); !bytes.Equal(a, b) {
			t.Errorf("empty working hash %X, rootmulti %X", a, b)
		}
		p.commit(nil)
		p.sameLastCommit()
	}
	q := newPair(t, smallMount)
	if err := q.ours.SetInitialVersion(7); err != nil {
		t.Fatal(err)
	}
	if err := q.oracle.SetInitialVersion(7); err != nil {
		t.Fatal(err)
	}
	for _, s := range []types.CommitMultiStore{q.ours, q.oracle} {
		s.GetKVStore(q.keys["a"]).Set([]byte("k"), []byte("v"))
	}
	if a, b := q.ours.WorkingHash(), q.oracle.WorkingHash(); !bytes.Equal(a, b) {
		t.Errorf("working hash under initial version %X, rootmulti %X", a, b)
	}
	sameOutcome(t, "store WorkingHash under initial version", q, func(s types.CommitMultiStore) any {
		return fmt.Sprintf("%X", s.GetCommitKVStore(q.keys["a"]).WorkingHash())
	})
	q.commit(nil)
	q.sameLastCommit()
}

// TestEdgeSnapshotHeights: state-sync Snapshot of height 0 and a future
// height.
func TestEdgeSnapshotHeights(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	for _, h := range []uint64{0, 5} {
		var ba, bb bytes.Buffer
		ea := p.ours.Snapshot(h, protoio.NewDelimitedWriter(&ba))
		eb := p.oracle.Snapshot(h, protoio.NewDelimitedWriter(&bb))
		if err := sameErrText(fmt.Sprintf("Snapshot(%d)", h), ea, eb); err != nil {
			t.Error(err)
		}
	}
}

// TestEdgeTreeShapeEdges: writes whose hash effect depends on iavl's exact
// tree algorithm: rewriting a key with its current value, inserting and
// deleting the same new key in one block (rotations not undone), deleting
// absent keys, emptying a store and refilling it; queries with proofs at
// every height.
func TestEdgeTreeShapeEdges(t *testing.T) {
	p := newPair(t, smallMount)
	hashes := map[int64][]byte{}
	ak, bk := p.keys["a"], p.keys["b"]
	block := func(f func(s types.KVStore, b types.KVStore)) {
		t.Helper()
		f(p.ours.GetKVStore(ak), p.ours.GetKVStore(bk))
		f(p.oracle.GetKVStore(ak), p.oracle.GetKVStore(bk))
		if a, b := p.ours.WorkingHash(), p.oracle.WorkingHash(); !bytes.Equal(a, b) {
			t.Fatalf("working hash %X, rootmulti %X", a, b)
		}
		a, b := p.ours.Commit(), p.oracle.Commit()
		if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
			t.Fatalf("commit %d: %X, rootmulti %X", a.Version, a.Hash, b.Hash)
		}
		hashes[a.Version] = a.Hash
	}
	block(func(s, b types.KVStore) {
		for i := 0; i < 64; i++ {
			s.Set(fmt.Appendf(nil, "k%03d", i*2), []byte("v"))
		}
		b.Set([]byte("only"), []byte("x"))
	})
	block(func(s, b types.KVStore) { s.Set([]byte("k010"), []byte("v")) }) // same value
	block(func(s, b types.KVStore) {
		for i := 0; i < 20; i++ {
			k := fmt.Appendf(nil, "k%03d", i*2+1)
			s.Set(k, []byte("tmp"))
			s.Delete(k)
		}
		s.Delete([]byte("absent"))
		b.Delete([]byte("absent"))
	})
	block(func(s, b types.KVStore) {
		for i := 0; i < 64; i++ {
			s.Delete(fmt.Appendf(nil, "k%03d", i*2))
		}
		b.Delete([]byte("only"))
	})
	block(func(s, b types.KVStore) {
		s.Set([]byte("k000"), []byte("back"))
		b.Set([]byte("only"), []byte("back"))
		b.Delete([]byte("only"))
		b.Set([]byte("only"), []byte("again"))
	})
	for h := int64(1); h <= 5; h++ {
		for _, store := range []string{"a", "b"} {
			for _, k := range []string{"k000", "k010", "k011", "k127", "only", "zzz"} {
				res, err := edgeQuery(t, p, types.RequestQuery{Path: "/" + store + "/key", Data: []byte(k), Height: h, Prove: true})
				if err == nil && res.ProofOps != nil && verifiable(t, res.ProofOps) {
					if err := verifyProof(store, res, hashes[h]); err != nil {
						t.Errorf("proof %s/%s at %d: %v", store, k, h, err)
					}
				}
			}
		}
	}
}

// TestEdgeRollbackAcrossUpgrade: a rollback to before the upgrade that
// added a mounted store is refused before anything is discarded, and the
// multistore goes on as if it had not been asked (rootmulti fails it
// halfway, with some stores rolled back on disk); a rollback to the
// upgrade's version or later matches rootmulti's.
func TestEdgeRollbackAcrossUpgrade(t *testing.T) {
	for _, target := range []int64{3, 4, 5, 6} {
		t.Run(fmt.Sprint(target), func(t *testing.T) {
			p := newPair(t, smallMount)
			for i := 1; i <= 4; i++ {
				p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
			}
			if err := p.ours.Close(); err != nil {
				t.Fatal(err)
			}
			m := mount{iavl: []string{"a", "b", "c"}, transient: "t", memory: "m"}
			up := &types.StoreUpgrades{Added: []string{"c"}}
			p.oracle = newOracle(t, p.odb, p.keys, m, up)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, m, up)
			for i := 5; i <= 7; i++ {
				p.commit(map[string][][2][]byte{"c": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
			}
			err := p.ours.RollbackToVersion(target)
			if target < 5 {
				if !errors.Is(err, multitree.ErrVersion) || !strings.Contains(err.Error(), "mounted store c") {
					t.Fatalf("rollback to %d, before store c was added: %v", target, err)
				}
				p.sameLastCommit()
				p.commit(map[string][][2][]byte{"a": {{[]byte("x"), []byte("y")}}, "c": {{[]byte("x"), []byte("y")}}})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.oracle.RollbackToVersion(target); err != nil {
				t.Fatal(err)
			}
			p.sameLastCommit()
			p.commit(map[string][][2][]byte{"a": {{[]byte("x"), []byte("y")}}, "c": {{[]byte("x"), []byte("y")}}})
		})
	}
	// a rollback to a version no longer kept is refused and leaves the
	// multistore loaded
	p := newPair(t, smallMount)
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	p.cfg.SnapshotInterval, p.cfg.SnapshotKeepRecent = -1, 0
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
	for i := 1; i <= 4; i++ {
		p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
	}
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.commit(map[string][][2][]byte{"a": {{[]byte("k5"), []byte("v")}}})
	if err := p.ours.Close(); err != nil { // joins the prune of snapshot 0
		t.Fatal(err)
	}
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
	if err := p.ours.RollbackToVersion(2); !errors.Is(err, multitree.ErrVersion) {
		t.Fatalf("rollback to 2, before the only kept snapshot: %v", err)
	}
	p.sameLastCommit()
	p.commit(map[string][][2][]byte{"a": {{[]byte("k6"), []byte("v")}}})
}

// TestEdgeRollbackRefusals: a rollback to a future version is refused
// without unloading the multistore (its working writes stay); one on a
// multistore never loaded fails without creating a database.
func TestEdgeRollbackRefusals(t *testing.T) {
	p := newPair(t, smallMount)
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	p.ours.GetKVStore(p.keys["a"]).Set([]byte("w"), []byte("working"))
	if err := p.ours.RollbackToVersion(5); !errors.Is(err, multitree.ErrVersion) {
		t.Fatalf("rollback to a future version: %v", err)
	}
	if v := p.ours.GetKVStore(p.keys["a"]).Get([]byte("w")); string(v) != "working" {
		t.Fatalf("working write after a refused rollback: %q", v)
	}

	dir := filepath.Join(t.TempDir(), "db")
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	mountAll(ms, keyring{}, smallMount)
	if err := ms.RollbackToVersion(5); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("rollback of a multistore never loaded, without a database: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the failed rollback created %s: %v", dir, err)
	}
}

// TestEdgeRollbackAfterOlderLoad: after LoadVersion of an older version,
// a rollback to a later version still on disk works as in rootmulti; a
// rollback to the loaded version while the working version's upgrades add
// a mounted store is refused and leaves the multistore loaded.
func TestEdgeRollbackAfterOlderLoad(t *testing.T) {
	p := newPair(t, smallMount)
	for i := 1; i <= 4; i++ {
		p.commit(map[string][][2][]byte{"a": {{fmt.Appendf(nil, "k%d", i), []byte("v")}}})
	}
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		if err := s.LoadVersion(2); err != nil {
			t.Fatal(err)
		}
	}
	ea, eb := p.ours.RollbackToVersion(3), p.oracle.RollbackToVersion(3)
	if ea != nil || eb != nil {
		t.Fatalf("rollback to 3 after loading 2: %v, rootmulti %v", ea, eb)
	}
	p.sameLastCommit()
	p.commit(map[string][][2][]byte{"a": {{[]byte("x"), []byte("y")}}})

	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	m := mount{iavl: []string{"a", "b", "c"}, transient: "t", memory: "m"}
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, m, &types.StoreUpgrades{Added: []string{"c"}})
	v := p.ours.LastCommitID().Version
	if err := p.ours.RollbackToVersion(v); !errors.Is(err, multitree.ErrVersion) || !strings.Contains(err.Error(), "mounted store c") {
		t.Fatalf("rollback to %d with store c added by the working version: %v", v, err)
	}
	if p.ours.DB() == nil {
		t.Fatal("the refused rollback unloaded the multistore")
	}
	p.ours.GetKVStore(p.keys["c"]).Set([]byte("k"), []byte("v"))
	if id := p.ours.Commit(); id.Version != v+1 {
		t.Fatalf("commit after the refused rollback: %v", id)
	}
}

// TestVersionsBeforeInitialVersion: versions before a chain's initial
// version were never committed, and CacheMultiStoreWithVersion and
// GetCommitInfo refuse them with rootmulti's error text for such versions.
func TestVersionsBeforeInitialVersion(t *testing.T) {
	p := newPair(t, smallMount)
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		if err := s.SetInitialVersion(4); err != nil {
			t.Fatal(err)
		}
	}
	id := p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	if id.Version != 4 {
		t.Fatalf("first version %d", id.Version)
	}
	for _, v := range []int64{1, 3} {
		_, ea := p.ours.CacheMultiStoreWithVersion(v)
		_, eb := p.oracle.CacheMultiStoreWithVersion(v)
		if err := sameErrText(fmt.Sprintf("CacheMultiStoreWithVersion(%d)", v), ea, eb); err != nil {
			t.Error(err)
		}
		_, ea = p.ours.GetCommitInfo(v)
		_, eb = p.oracle.GetCommitInfo(v)
		if err := sameErrText(fmt.Sprintf("GetCommitInfo(%d)", v), ea, eb); err != nil {
			t.Error(err)
		}
	}
}

// TestFailedLoadKeepsStore: after a load that fails (a version the database
// does not have, an upgrade that adds an existing store), the multistore
// still reads and commits as rootmulti does.
func TestFailedLoadKeepsStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(s types.CommitMultiStore) error
	}{
		{"LoadVersion(future)", func(s types.CommitMultiStore) error { return s.LoadVersion(5) }},
		{"LoadLatestVersionAndUpgrade(add existing)", func(s types.CommitMultiStore) error {
			return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Added: []string{"b"}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, smallMount)
			p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
			ea, eb := tc.load(p.ours), tc.load(p.oracle)
			if ea == nil || eb == nil {
				t.Fatalf("load: %v, rootmulti %v", ea, eb)
			}
			sameOutcome(t, "Get after the failed load", p, func(s types.CommitMultiStore) any {
				return fmt.Sprintf("%q", s.GetKVStore(p.keys["a"]).Get([]byte("k")))
			})
			sameOutcome(t, "Set+Commit after the failed load", p, func(s types.CommitMultiStore) any {
				s.GetKVStore(p.keys["a"]).Set([]byte("k2"), []byte("v2"))
				id := s.Commit()
				return fmt.Sprintf("%d %X", id.Version, id.Hash)
			})
			a, b := p.ours.LastCommitID(), p.oracle.LastCommitID()
			if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
				t.Errorf("LastCommitID %v, rootmulti %v", a, b)
			}
		})
	}
}
