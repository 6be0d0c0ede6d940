package compat_test

import (
	"fmt"
	"strings"
	"testing"

	"cosmossdk.io/store/types"
)

// TestIteratorAcrossOutsideWrites: an iterator of an IAVL store stays
// valid across writes to the store outside its domain (the SDK's KVStore
// contract forbids writes within the domain only, and iavl.Store iterates
// correctly), with rootmulti's keys, also once the writes are applied (a
// read applies them) and have changed, in place, nodes the iterator's stack
// holds.
func TestIteratorAcrossOutsideWrites(t *testing.T) {
	t.Run("minimal", func(t *testing.T) {
		p := newPair(t, smallMount)
		p.commit(map[string][][2][]byte{"a": {{[]byte("k35"), []byte("c")}}})
		ak := p.keys["a"]
		sameOutcome(t, "iterator [k10,k20) across sets of k21, k22", p, func(s types.CommitMultiStore) any {
			kv := s.GetKVStore(ak)
			for _, k := range []string{"k10", "k13", "k14"} {
				kv.Set([]byte(k), []byte("w"))
			}
			it := kv.Iterator([]byte("k10"), []byte("k20"))
			defer it.Close()
			out := []string{string(it.Key())}
			it.Next()
			kv.Set([]byte("k21"), []byte("o"))
			kv.Set([]byte("k22"), []byte("o"))
			kv.Get([]byte("k00")) // applies our buffered writes
			for ; it.Valid(); it.Next() {
				out = append(out, string(it.Key()))
			}
			return strings.Join(out, " ")
		})
	})
	// a seed of the randomized interleavings whose reverse prefix iterator
	// repeated a key
	for _, seed := range []int64{218} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { ilkvRun(t, seed, 1500, false, true) })
	}
}
