package compat_test

// With ZeroCopy, historical queries and branches still copy (README:
// "Historical branches and queries always copy"): what they returned
// stays intact after their views are evicted, the snapshots they read are
// rewritten, pruned and unmapped, and the multistore is closed.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
)

// TestHistZeroCopyValuesOutliveViews holds the values, proofs, subspace
// results and branch reads of historical queries across later prunes and
// Close, with ZeroCopy on: none changes.
func TestHistZeroCopyValuesOutliveViews(t *testing.T) {
	cfg := rvConfig(1, 0, 1)
	cfg.ZeroCopy = true
	p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: cfg}
	p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
	p.ours = newOurs(t, p.dir, cfg, p.keys, smallMount, nil)
	defer func() { p.ours.Close() }()
	type held struct {
		what      string
		got, want []byte
	}
	var hs []held
	hold := func(what string, b []byte) {
		if len(b) > 0 {
			hs = append(hs, held{what, b, bytes.Clone(b)})
		}
	}
	big := func(h int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%04d", h)), 2048) }
	for h := 1; h <= 12; h++ {
		p.commit(map[string][][2][]byte{"a": {{[]byte(fmt.Sprintf("k%03d", h)), big(h)}, {[]byte("same"), big(h + 100)}}})
		rvSettle()
		for q := int64(1); q < int64(h); q++ {
			for _, k := range []string{"same", fmt.Sprintf("k%03d", q), "k001"} {
				req := types.RequestQuery{Path: "/a/key", Data: []byte(k), Height: q, Prove: true}
				res, err := p.ours.Query(&req)
				if err != nil {
					continue // not kept
				}
				hold(fmt.Sprintf("query %s@%d value", k, q), res.Value)
				if res.ProofOps != nil {
					for i, op := range res.ProofOps.Ops {
						hold(fmt.Sprintf("query %s@%d proof op %d", k, q, i), op.Data)
					}
				}
			}
			req := types.RequestQuery{Path: "/a/subspace", Data: []byte("k"), Height: q}
			if res, err := p.ours.Query(&req); err == nil {
				hold("subspace", res.Value)
			}
			b, err := p.ours.CacheMultiStoreWithVersion(q)
			if err != nil {
				continue
			}
			kv := b.GetKVStore(p.keys["a"])
			hold(fmt.Sprintf("branch get same@%d", q), kv.Get([]byte("same")))
			it := kv.Iterator(nil, nil)
			for ; it.Valid(); it.Next() {
				hold(fmt.Sprintf("branch iter key@%d", q), it.Key())
				hold(fmt.Sprintf("branch iter value %s@%d", it.Key(), q), it.Value())
			}
			it.Close()
		}
	}
	// more blocks: every view above is evicted, its snapshots pruned
	for h := 13; h <= 20; h++ {
		p.commit(map[string][][2][]byte{"a": {{[]byte("same"), big(h + 200)}}})
		rvSettle()
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if !bytes.Equal(h.got, h.want) {
			t.Fatalf("%s changed after its view was released: %.40q, was %.40q", h.what, h.got, h.want)
		}
	}
	t.Logf("%d slices held", len(hs))
}
