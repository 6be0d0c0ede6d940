package multitree_test

// Views of older versions (ViewAt) rebuilt from kept snapshots plus the
// log, after background rewrites and prunes, against a cosmos/iavl
// MutableTree fed the same changes (GetImmutable at each version): Get,
// Has, iterators both ways with bounds, root hashes, proofs; invalid
// versions fail with clear errors; values Get returned stay valid after
// the view is released and the snapshots pruned and unmapped.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"cosmossdk.io/log"
	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// viewIterString lists the pairs of store in [start, end) of vw.
func viewIterString(t *testing.T, vw *multitree.View, store string, start, end []byte, asc bool) string {
	tr := vw.Tree(store)
	if tr == nil {
		return "<nil tree>"
	}
	it := tr.Iterator(start, end, asc)
	defer it.Close()
	out := ""
	for ; it.Valid(); it.Next() {
		out += fmt.Sprintf("%q=%q,", it.Key(), it.Value())
	}
	if err := it.Error(); err != nil {
		out += "err:" + err.Error()
	}
	return out
}

// iavlIterString lists the pairs in [start, end) of an iavl tree.
func iavlIterString(t *testing.T, it *iavl.ImmutableTree, start, end []byte, asc bool) string {
	iter, err := it.Iterator(start, end, asc)
	if err != nil {
		return "err:" + err.Error()
	}
	defer iter.Close()
	out := ""
	for ; iter.Valid(); iter.Next() {
		out += fmt.Sprintf("%q=%q,", iter.Key(), iter.Value())
	}
	return out
}

// TestHistViewsAgainstIAVL compares after every commit each older version's
// view (ViewAt) with a cosmos/iavl tree at that version: root and commit
// info hashes, Get, Has, proofs of present and absent keys, bounded
// iterators both ways; invalid versions fail with ErrVersion; values Get
// returned stay unchanged after prunes and Close.
func TestHistViewsAgainstIAVL(t *testing.T) {
	for _, tc := range []struct {
		interval int64
		keep     int
		cache    int
	}{{1, 0, 0}, {1, 1, 1}, {2, 2, 4}, {3, 0, 2}, {-1, 0, 1}} {
		t.Run(fmt.Sprintf("i%d-k%d-c%d", tc.interval, tc.keep, tc.cache), func(t *testing.T) {
			dir := t.TempDir()
			db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}, SnapshotInterval: tc.interval, SnapshotKeepRecent: tc.keep, ViewCacheSize: tc.cache})
			defer func() { db.Close() }()
			tree := iavl.NewMutableTree(iavldb.NewMemDB(), 0, true, log.NewNopLogger())
			r := rand.New(rand.NewSource(tc.interval*31 + int64(tc.keep)))
			const n = 20
			type kept struct{ key, value, want []byte }
			var held []kept
			for v := 1; v <= n; v++ {
				var pairs []wal.KVPair
				for i := 0; i < 6; i++ {
					k := []byte(fmt.Sprintf("k%02d", r.Intn(30)))
					if r.Intn(4) == 0 {
						pairs = append(pairs, wal.KVPair{Key: k, Delete: true})
						if _, _, err := tree.Remove(k); err != nil {
							t.Fatal(err)
						}
					} else {
						val := []byte(fmt.Sprintf("v%d-%d-%s", v, i, bytes.Repeat([]byte{'x'}, r.Intn(40))))
						pairs = append(pairs, wal.KVPair{Key: k, Value: val})
						if _, err := tree.Set(k, val); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "s", Pairs: pairs}}); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Commit(); err != nil {
					t.Fatal(err)
				}
				if _, _, err := tree.SaveVersion(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
				// every older version still served
				for h := int64(1); h <= int64(v); h++ {
					vw, err := db.ViewAt(h)
					if err != nil {
						if !errors.Is(err, multitree.ErrVersion) {
							t.Fatalf("ViewAt(%d): %v", h, err)
						}
						continue
					}
					it, err := tree.GetImmutable(h)
					if err != nil {
						t.Fatal(err)
					}
					mt := vw.Tree("s")
					ih := it.Hash()
					if !bytes.Equal(mt.RootHash(), ih) {
						t.Fatalf("v%d: root hash at %d %X, iavl %X", v, h, mt.RootHash(), ih)
					}
					if !bytes.Equal(vw.CommitInfo().StoreInfos[0].CommitId.Hash, ih) {
						t.Fatalf("v%d: commit info hash at %d differs", v, h)
					}
					for _, k := range []string{"", "\x00", "a", "k00", "k05", "k05x", "k15", "k29", "k29\x00", "z"} {
						got, err := vw.Get("s", []byte(k))
						if err != nil {
							t.Fatal(err)
						}
						want, _ := it.Get([]byte(k))
						if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
							t.Fatalf("v%d: Get(%q) at %d = %q, iavl %q", v, k, h, got, want)
						}
						has, _ := mt.Has([]byte(k))
						whas, _ := it.Has([]byte(k))
						if has != whas {
							t.Fatalf("v%d: Has(%q) at %d = %v, iavl %v", v, k, h, has, whas)
						}
						if k == "" {
							continue
						}
						var gp, wp []byte
						if want != nil {
							p, err := mt.GetMembershipProof([]byte(k))
							if err != nil {
								t.Fatal(err)
							}
							gp, _ = p.Marshal()
							ip, err := it.GetMembershipProof([]byte(k))
							if err != nil {
								t.Fatal(err)
							}
							wp, _ = ip.Marshal()
						} else {
							p, err := mt.GetNonMembershipProof([]byte(k))
							if err != nil {
								t.Fatal(err)
							}
							gp, _ = p.Marshal()
							ip, err := it.GetNonMembershipProof([]byte(k))
							if err != nil {
								t.Fatal(err)
							}
							wp, _ = ip.Marshal()
						}
						if !bytes.Equal(gp, wp) {
							t.Fatalf("v%d: proof of %q at %d differs from iavl's", v, k, h)
						}
						if got != nil && r.Intn(8) == 0 {
							held = append(held, kept{[]byte(k), got, bytes.Clone(got)})
						}
					}
					for _, b := range [][2][]byte{{nil, nil}, {[]byte("k03"), []byte("k09")}, {[]byte("k05"), []byte("k05")}, {[]byte("k09"), []byte("k03")}, {[]byte("z"), nil}, {nil, []byte("\x00")}, {[]byte("k04x"), []byte("k21x")}} {
						for _, asc := range []bool{true, false} {
							g, w := viewIterString(t, vw, "s", b[0], b[1], asc), iavlIterString(t, it, b[0], b[1], asc)
							if g != w {
								t.Fatalf("v%d: iterator at %d [%q,%q) asc=%v:\n ours %s\n iavl %s", v, h, b[0], b[1], asc, g, w)
							}
						}
					}
					vw.Release()
					// Get after Release
					if _, err := vw.Get("s", []byte("k00")); !errors.Is(err, multitree.ErrReleased) {
						t.Fatalf("Get after Release: %v", err)
					}
				}
			}
			for _, bad := range []int64{-1, math.MinInt64, n + 1, math.MaxInt64} {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("ViewAt(%d) panicked: %v", bad, r)
						}
					}()
					if vw, err := db.ViewAt(bad); !errors.Is(err, multitree.ErrVersion) {
						t.Errorf("ViewAt(%d): %v (view %v)", bad, err, vw)
					}
				}()
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// Get returns copies: they outlive the views, the prunes and
			// the unmapping at Close
			for _, h := range held {
				if !bytes.Equal(h.value, h.want) {
					t.Fatalf("a value Get returned for %q changed after the release: %q, was %q", h.key, h.value, h.want)
				}
			}
			t.Logf("%d values held", len(held))
		})
	}
}
