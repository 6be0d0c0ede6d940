package compat_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"cosmossdk.io/store/types"
)

// TestIteratorWritesBehindCursor: TreeStore.Iterator documents that "writes
// to the store while the iterator is open that fall outside the keys still
// to come do not disturb it", "as with iavl": writes within the domain but
// behind the iterator (keys it has passed, and the current key) included.
// Store iterators stepped across such writes (new keys, updates, deletes,
// the current key deleted or updated), applied by a read or not, must give
// rootmulti's keys and values, and the commit after must give its hash.
func TestIteratorWritesBehindCursor(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			p := newPair(t, smallMount)
			var base [][2][]byte
			for i := 0; i < 40; i++ {
				base = append(base, [2][]byte{[]byte(fmt.Sprintf("k%02d", r.Intn(60))), []byte(fmt.Sprint("b", i))})
			}
			p.commit(map[string][][2][]byte{"a": base})
			ak := p.keys["a"]
			var lo, hi []byte
			if r.Intn(3) != 0 {
				lo = []byte(fmt.Sprintf("k%02d", r.Intn(20)))
			}
			if r.Intn(3) != 0 {
				hi = []byte(fmt.Sprintf("k%02d", 40+r.Intn(20)))
			}
			asc := r.Intn(2) == 0
			// uncommitted writes before the iterator too
			var pre []string
			for i := 0; i < r.Intn(10); i++ {
				pre = append(pre, fmt.Sprintf("k%02d", r.Intn(60)))
			}
			sameOutcome(t, fmt.Sprintf("[%q,%q) asc=%v", lo, hi, asc), p, func(s types.CommitMultiStore) any {
				r := rand.New(rand.NewSource(seed * 1000)) // the same plan for both sides
				kv := s.GetKVStore(ak)
				for _, k := range pre {
					kv.Set([]byte(k), []byte("pre"))
				}
				var it types.Iterator
				if asc {
					it = kv.Iterator(lo, hi)
				} else {
					it = kv.ReverseIterator(lo, hi)
				}
				var out []string
				var passed []string
				for step := 0; it.Valid() && step < 100; step++ {
					cur := string(it.Key())
					out = append(out, fmt.Sprintf("%s=%s", cur, it.Value()))
					passed = append(passed, cur)
					for n := r.Intn(3); n > 0; n-- {
						var k string
						switch r.Intn(3) {
						case 0:
							k = cur
						case 1:
							k = passed[r.Intn(len(passed))]
						default:
							// a key behind the cursor, not necessarily present
							k = passed[r.Intn(len(passed))] + "\x00"
							if asc && k >= cur {
								k = cur
							}
						}
						if r.Intn(3) == 0 {
							kv.Delete([]byte(k))
							out = append(out, "del "+k)
						} else {
							kv.Set([]byte(k), []byte(fmt.Sprint("w", step)))
							out = append(out, "set "+k)
						}
					}
					if r.Intn(2) == 0 {
						out = append(out, fmt.Sprintf("get=%q", kv.Get([]byte("k30"))))
					}
					it.Next()
				}
				out = append(out, fmt.Sprint("valid=", it.Valid()))
				it.Close()
				full := kv.Iterator(nil, nil)
				for ; full.Valid(); full.Next() {
					out = append(out, fmt.Sprintf("%s=%s", full.Key(), full.Value()))
				}
				full.Close()
				out = append(out, fmt.Sprint(s.Commit()))
				return strings.Join(out, " ")
			})
		})
	}
}
