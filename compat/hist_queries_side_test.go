package compat_test

// Historical queries and branches side by side with rootmulti (pruning
// nothing), at every height ours keeps, with small snapshot intervals and
// keep-recent values (views rebuilt from kept snapshots plus the log after
// background rewrites and prunes), store upgrades (add, rename, delete)
// between blocks, and an initial version above 1 in some runs.

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/store/types"
)

// histSideKeys are the keys queried: before the first key written, between
// keys, present ones and after the last.
func histSideKeys() []string {
	ks := []string{"\x00", "a", "k", "zz", "\xff\xff"}
	for i := 0; i < 16; i += 3 {
		ks = append(ks, fmt.Sprintf("k%02d", i), fmt.Sprintf("k%02dx", i))
	}
	return ks
}

// histSideIter lists the pairs of store name in [start, end) of the branch
// of s at height h, or the error or panic on the way.
func histSideIter(s types.CommitMultiStore, h int64, name string, start, end []byte, reverse bool) any {
	c, err := s.CacheMultiStoreWithVersion(h)
	if err != nil {
		return "err: " + err.Error()
	}
	var sk types.StoreKey
	for n, k := range keysByNameOf(s) {
		if n == name {
			sk = k
		}
	}
	if sk == nil {
		return "<no key>"
	}
	kv := c.GetKVStore(sk)
	var it types.Iterator
	if reverse {
		it = kv.ReverseIterator(start, end)
	} else {
		it = kv.Iterator(start, end)
	}
	defer it.Close()
	out := ""
	for ; it.Valid(); it.Next() {
		out += fmt.Sprintf("%q=%q,", it.Key(), it.Value())
	}
	return out
}

// TestHistQueriesSideBySide compares, at every height from -1 to the
// latest plus one and for every store name ever mounted, "/key" queries
// with and without proofs (proofs verified against the height's app
// hash), "/subspace" queries, historical branches' iterators and commit
// infos with rootmulti's, under 13 settings of snapshot interval,
// keep-recent, query views and initial version (8 of them without -short,
// 5 with it, all 13 with MEMIAVL_FULL=1), after upgrades, while running
// and after a reopen.
func TestHistQueriesSideBySide(t *testing.T) {
	type cfg struct {
		interval int64
		keep     int
		views    int
		initial  int64
	}
	var cases []cfg
	for _, iv := range []int64{1, 2, 3} {
		for _, keep := range []int{0, 1, 2} {
			cases = append(cases, cfg{iv, keep, 1 + keep%2, int64(keep * 2)})
		}
	}
	cases = append(cases, cfg{-1, 0, 2, 0}, cfg{-1, 0, 1, 3}, cfg{5, 3, 2, 0}, cfg{4, 1, 1, 2})
	switch size(3, 2, 1) {
	case 1:
		// every interval, keep-recent and view count, one run each
		cases = []cfg{cases[0], cases[4], cases[8], cases[9], cases[12]}
	case 2:
		// and every keep-recent with two of the intervals, and initial
		// version 3 without snapshots
		cases = []cfg{cases[0], cases[2], cases[4], cases[6], cases[8], cases[9], cases[10], cases[12]}
	}
	for ci, tc := range cases {
		t.Run(fmt.Sprintf("i%d-k%d-v%d-init%d", tc.interval, tc.keep, tc.views, tc.initial), func(t *testing.T) {
			r := rand.New(rand.NewSource(int64(ci) + 7))
			z := newSide(t, sideNothing)
			z.cfg.SnapshotInterval = tc.interval
			z.cfg.SnapshotKeepRecent = tc.keep
			z.cfg.QueryViews = tc.views
			// "e" is never written: empty at every height
			mounted := []string{"s1", "s2", "e", "s3"}
			everSeen := map[string]bool{"s1": true, "s2": true, "s3": true, "e": true, "never": true}
			z.fresh(mounted, sideNothing)
			z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			if tc.initial > 1 {
				z.same("SetInitialVersion", func(s types.CommitMultiStore) any { return s.SetInitialVersion(tc.initial) })
			}
			keys := histSideKeys()
			check := func(phase string) {
				// the prune of the last switch runs in the background: wait
				// for it, so that the kept heights do not change under the check
				if phase == "running" {
					cur := z.c.DB().SnapshotVersion()
					for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
						older := 0
						for _, v := range rvSnapshots(t, z.dir) {
							if v < cur {
								older++
							}
						}
						if older <= tc.keep {
							break
						}
						if time.Now().After(deadline) {
							// no prune runs: a reopen prunes nothing and the
							// rewrite finished after the last Commit, which is
							// what switches to it (multitree/doc.go)
							break
						}
					}
				}
				latest := z.c.LastCommitID().Version
				t.Logf("%s: snapshots %v at %v (db snapshot %d)", phase, rvSnapshots(t, z.dir), time.Now().Format("05.000"), z.c.DB().SnapshotVersion())
				// checkHeight returns the differences at height h
				checkHeight := func(h int64) (diffs []string) {
					errorf := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
					_, kerr := z.c.CacheMultiStoreWithVersion(h)
					kept := kerr == nil
					if !kept && h >= 1 && h <= latest {
						t.Logf("%s: height %d not kept by ours: %v", phase, h, kerr)
						return nil
					}
					oci, oerr := z.o.GetCommitInfo(h)
					for n := range everSeen {
						for _, k := range keys {
							for _, prove := range []bool{false, true} {
								q := types.RequestQuery{Path: "/" + n + "/key", Data: []byte(k), Height: h, Prove: prove}
								a, b := z.both(func(s types.CommitMultiStore) any { return queryOf(s, q) })
								// rootmulti panics proving at height 0 a store added by the
								// load's upgrades (no version yet); ours errors: accepted
								if a != b && !(strings.HasPrefix(b, "panic") && strings.HasPrefix(a, "err=") && !strings.HasPrefix(a, "err=<nil>")) {
									errorf("DIFF %s q %s %q h=%d prove=%v: ours %s | rootmulti %s", phase, n, k, h, prove, a, b)
								}
								if prove && oerr == nil && h >= 1 {
									q := types.RequestQuery{Path: "/" + n + "/key", Data: []byte(k), Height: h, Prove: true}
									res, err := z.c.Query(&q)
									if err == nil && res.ProofOps != nil && verifiable(t, res.ProofOps) {
										if verr := verifyProof(n, res, oci.Hash()); verr != nil {
											errorf("%s: proof of %s %q at %d does not verify against the app hash: %v", phase, n, k, h, verr)
										}
									}
								}
							}
						}
						if phase == "after-upgrade" {
							// "/subspace" reads the working state in rootmulti, the
							// last commit in ours (README): a renamed store differs
							continue
						}
						q := types.RequestQuery{Path: "/" + n + "/subspace", Data: []byte("k0"), Height: h}
						if a, b := z.both(func(s types.CommitMultiStore) any { return queryOf(s, q) }); a != b {
							errorf("DIFF %s subspace %s h=%d: ours %s | rootmulti %s", phase, n, h, a, b)
						}
					}
					if !kept {
						return diffs
					}
					for _, n := range mounted {
						for _, bnd := range [][2][]byte{{nil, nil}, {[]byte("k03"), []byte("k09")}, {[]byte("k05"), []byte("k05")}, {[]byte("k09"), []byte("k03")}, {[]byte("zz"), nil}, {nil, []byte("\x00")}, {[]byte("k04x"), []byte("k06x")}} {
							for _, rev := range []bool{false, true} {
								// a store added after h: both panic (rootmulti with a nil
								// dereference, ours with ErrStoreNotAtVersion)
								a, b := z.both(func(s types.CommitMultiStore) any { return histSideIter(s, h, n, bnd[0], bnd[1], rev) })
								if a != b && !(strings.HasPrefix(a, "panic") && strings.HasPrefix(b, "panic")) {
									t.Logf("snapshots now %v at %v", rvSnapshots(t, z.dir), time.Now().Format("05.000"))
									errorf("DIFF %s iter %s h=%d [%q,%q) rev=%v: ours %s | rootmulti %s", phase, n, h, bnd[0], bnd[1], rev, a, b)
								}
							}
						}
					}
					if h >= 1 && h <= latest {
						ci, err := z.c.GetCommitInfo(h)
						if err != nil || oerr != nil || !bytes.Equal(ci.Hash(), oci.Hash()) {
							errorf("%s: commit info %d: %v %v", phase, h, err, oerr)
						}
					}
					return diffs
				}
				for h := int64(-1); h <= latest+1; h++ {
					diffs := checkHeight(h)
					if len(diffs) == 0 {
						continue
					}
					// a prune running beside the check (after a reopen
					// none does until the next switch) may take h away
					// while it is read: what ours then fails is no
					// difference
					if _, err := z.c.CacheMultiStoreWithVersion(h); err != nil && h >= 1 && h <= latest {
						t.Logf("%s: height %d pruned during its check (%d differences dropped): %v", phase, h, len(diffs), err)
						continue
					}
					for _, d := range diffs {
						t.Error(d)
					}
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			next := 0
			const blocks = 14
			for b := 0; b < blocks; b++ {
				if b > 0 && b%4 == 0 {
					// an upgrade: add one, rename one, delete one (names never reused)
					up := &types.StoreUpgrades{}
					next++
					add := fmt.Sprintf("n%d", next)
					up.Added = []string{add}
					var keep []string
					switch {
					case len(mounted) >= 3:
						next++
						rn := fmt.Sprintf("r%d", next)
						up.Renamed = []types.StoreRename{{OldKey: mounted[0], NewKey: rn}}
						up.Deleted = []string{mounted[1]}
						keep = append(keep, mounted[2:]...)
						keep = append(keep, rn)
						everSeen[rn] = true
					default:
						keep = append(keep, mounted...)
					}
					keep = append(keep, add)
					everSeen[add] = true
					mounted = keep
					t.Logf("block %d: upgrade %+v -> %v", b, up, mounted)
					z.fresh(mounted, sideNothing)
					z.loadBoth("upgrade", func(s types.CommitMultiStore) error { return s.LoadLatestVersionAndUpgrade(up) })
					check("after-upgrade")
				}
				for _, n := range mounted {
					if n == "e" || r.Intn(3) == 0 {
						continue // some stores unchanged by some versions
					}
					for i := 0; i < 3; i++ {
						k := []byte(fmt.Sprintf("k%02d", r.Intn(16)))
						if r.Intn(4) == 0 {
							z.c.GetStoreByName(n).(types.KVStore).Delete(k)
							z.o.GetStoreByName(n).(types.KVStore).Delete(k)
						} else {
							z.set(n, string(k), fmt.Sprintf("%s-%d-%d", n, b, r.Intn(1000)))
						}
					}
				}
				z.commit()
				time.Sleep(10 * time.Millisecond) // background rewrite + prune
			}
			check("running")
			// one more block, then reopen: views come from reopened snapshots
			z.set(mounted[0], "k01", "last")
			z.commit()
			z.fresh(mounted, sideNothing)
			z.loadBoth("reload", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
			check("reopened")
		})
	}
}
