package compat_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"cosmossdk.io/store/gaskv"
	"cosmossdk.io/store/prefix"
	"cosmossdk.io/store/types"
)

// TestBranchIteratorsAcrossOutsideWrites: iterators of cache branches
// (CacheMultiStore, nested, prefix and gas wrappers over them), whose
// parent iterators are store iterators, kept open while the store under
// them changes outside their domain, as the SDK's KVStore contract allows
// ("no writes may happen within a domain while an iterator exists over
// it"): another branch written back, the store written directly (and the
// writes applied by a read), the branch's own outside writes written back,
// a nested branch written into its parent. Every step, read and the final
// commit hash must be rootmulti's (over cosmos/iavl).
func TestBranchIteratorsAcrossOutsideWrites(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { ibRun(t, seed) })
	}
}

type ibSide struct {
	ms  types.CommitMultiStore
	cms types.CacheMultiStore // the branch the iterators read
	nst types.CacheMultiStore // a branch nested in it
	its []types.Iterator
	gas types.GasMeter
}

func ibRun(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	p := newPair(t, smallMount)
	key := func() []byte { return []byte(fmt.Sprintf("k%02d", r.Intn(40))) }
	var base [][2][]byte
	for i := 0; i < 30; i++ {
		base = append(base, [2][]byte{key(), []byte(fmt.Sprint("b", i))})
	}
	p.commit(map[string][][2][]byte{"a": base, "b": base[:10]})
	ak := p.keys["a"]
	sides := []*ibSide{{ms: p.ours}, {ms: p.oracle}}
	for _, s := range sides {
		s.cms = s.ms.CacheMultiStore()
		s.nst = s.cms.CacheMultiStore()
		s.gas = types.NewInfiniteGasMeter()
	}
	// the union of the iterators' domains on store a: writes avoid it
	type dom struct{ lo, hi []byte }
	var doms []dom
	inDomain := func(k []byte) bool {
		for _, d := range doms {
			if (d.lo == nil || bytes.Compare(k, d.lo) >= 0) && (d.hi == nil || bytes.Compare(k, d.hi) < 0) {
				return true
			}
		}
		return false
	}
	outsideKey := func() []byte {
		for i := 0; i < 20; i++ {
			if k := key(); !inDomain(k) {
				return k
			}
		}
		return nil
	}
	// keys written into the branch and into the nested one, not yet
	// written back: a write-back that would write one within a domain
	// opened since is skipped
	cmsKeys, nstKeys := map[string]bool{}, map[string]bool{}
	anyIn := func(keys map[string]bool) bool {
		for k := range keys {
			if inDomain([]byte(k)) {
				return true
			}
		}
		return false
	}
	var log []string
	do := func(what string, f func(s *ibSide) any) {
		t.Helper()
		log = append(log, what)
		got := outcome(func() any { return f(sides[0]) })
		want := outcome(func() any { return f(sides[1]) })
		if got != want {
			t.Fatalf("seed %d: %s:\n ours      %s\n rootmulti %s\nops:\n  %s", seed, what, got, want, strings.Join(log, "\n  "))
		}
	}
	step := func(it types.Iterator, n int) string {
		var out []string
		for i := 0; i < n; i++ {
			if !it.Valid() {
				out = append(out, "end")
				break
			}
			out = append(out, fmt.Sprintf("%q=%q", it.Key(), it.Value()))
			it.Next()
		}
		return strings.Join(out, " ")
	}
	for op := 0; op < 120; op++ {
		switch x := r.Intn(14); {
		case x < 2 && len(doms) < 4: // open an iterator on the branch or the nested one
			lo, hi := key(), key()
			if bytes.Compare(lo, hi) > 0 {
				lo, hi = hi, lo
			}
			if r.Intn(5) == 0 {
				hi = nil
			}
			if r.Intn(5) == 0 {
				lo = nil
			}
			if lo == nil && hi == nil {
				hi = []byte("k10")
			}
			asc, nested, wrap := r.Intn(2) == 0, r.Intn(3) == 0, r.Intn(3)
			doms = append(doms, dom{lo, hi})
			do(fmt.Sprintf("open [%q,%q) asc=%v nested=%v wrap=%d", lo, hi, asc, nested, wrap), func(s *ibSide) any {
				br := s.cms
				if nested {
					br = s.nst
				}
				var kv types.KVStore = br.GetKVStore(ak)
				plo, phi := lo, hi
				switch wrap {
				case 1:
					kv = gaskv.NewStore(kv, s.gas, types.KVGasConfig())
				case 2:
					// a prefix store over "k": its domain on the store is the same
					kv = prefix.NewStore(kv, []byte("k"))
					if plo != nil {
						plo = plo[1:]
					}
					if phi != nil {
						phi = phi[1:]
					}
				}
				var it types.Iterator
				if asc {
					it = kv.Iterator(plo, phi)
				} else {
					it = kv.ReverseIterator(plo, phi)
				}
				s.its = append(s.its, it)
				return step(it, 0) + fmt.Sprintf(" gas=%d", s.gas.GasConsumed())
			})
		case x < 6: // step
			if len(doms) == 0 {
				continue
			}
			i, n := r.Intn(len(doms)), 1+r.Intn(3)
			do(fmt.Sprintf("step %d of iterator %d", n, i), func(s *ibSide) any {
				return step(s.its[i], n) + fmt.Sprintf(" gas=%d", s.gas.GasConsumed())
			})
		case x < 8: // a sibling branch writes outside the domains and is written back
			k := outsideKey()
			if k == nil {
				continue
			}
			del := r.Intn(3) == 0
			do(fmt.Sprintf("sibling branch writes %q del=%v", k, del), func(s *ibSide) any {
				c := s.ms.CacheMultiStore()
				if del {
					c.GetKVStore(ak).Delete(k)
				} else {
					c.GetKVStore(ak).Set(k, []byte("sib"))
				}
				c.Write()
				return nil
			})
		case x < 9: // the store written directly, then read (applies our buffer)
			k := outsideKey()
			if k == nil {
				continue
			}
			do(fmt.Sprintf("store sets %q, reads k05", k), func(s *ibSide) any {
				kv := s.ms.GetKVStore(ak)
				kv.Set(k, []byte("direct"))
				return fmt.Sprintf("%q", kv.Get([]byte("k05")))
			})
		case x < 11: // the branch (or the nested one) writes outside the domains
			k := outsideKey()
			if k == nil {
				continue
			}
			nested := r.Intn(2) == 0
			if nested {
				nstKeys[string(k)] = true
			} else {
				cmsKeys[string(k)] = true
			}
			do(fmt.Sprintf("branch writes %q nested=%v", k, nested), func(s *ibSide) any {
				br := s.cms
				if nested {
					br = s.nst
				}
				kv := br.GetKVStore(ak)
				if r := k[len(k)-1]; r%3 == 0 {
					kv.Delete(k)
				} else {
					kv.Set(k, []byte("br"))
				}
				return fmt.Sprintf("%q", kv.Get(k))
			})
		case x < 12: // the nested branch written into the branch
			if anyIn(nstKeys) {
				continue
			}
			for k := range nstKeys {
				cmsKeys[k] = true
			}
			nstKeys = map[string]bool{}
			do("nested.Write", func(s *ibSide) any { s.nst.Write(); return nil })
		case x < 13: // the branch written back into the store
			if anyIn(cmsKeys) {
				continue
			}
			cmsKeys = map[string]bool{}
			do("branch.Write", func(s *ibSide) any { s.cms.Write(); return nil })
		default: // a fresh full iteration of the store and the branch
			do("full iterations", func(s *ibSide) any {
				a := s.ms.GetKVStore(ak).Iterator(nil, nil)
				defer a.Close()
				b := s.cms.GetKVStore(ak).ReverseIterator(nil, nil)
				defer b.Close()
				return step(a, 100) + " | " + step(b, 100)
			})
		}
	}
	do("close and commit", func(s *ibSide) any {
		for _, it := range s.its {
			it.Close()
		}
		s.nst.Write()
		s.cms.Write()
		return s.ms.Commit()
	})
}
