package memiavl_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// randomEdgeKey returns a key of 0 to 5 bytes of 0x00, 0x01 and 0xff:
// keys that are often prefixes of each other.
func randomEdgeKey(r *rand.Rand) []byte {
	k := make([]byte, r.Intn(6))
	for i := range k {
		k[i] = []byte{0x00, 0x01, 0xff}[r.Intn(3)]
	}
	return k
}

// TestIteratorEdgeKeysAcrossChanges: Tree.Iterator across Set/Remove (and
// saves) between Nexts, with keys that are prefixes of each other (the
// empty key, k and k+0x00, 0xff runs) and empty/nil bounds, on in-memory and
// snapshot trees: a cheap regression for the iterator's reseek, which
// resumes from key+0x00 (ascending) or below key (descending); the existing
// TestIteratorAcrossChanges uses fixed-width keys only.
func TestIteratorEdgeKeysAcrossChanges(t *testing.T) {
	for seed := int64(1); seed <= 100; seed++ {
		for _, asc := range []bool{true, false} {
			r := rand.New(rand.NewSource(seed))
			model := map[string]string{}
			tr, _ := memiavl.New(memiavl.Options{})
			for i := 0; i < 60; i++ {
				k := randomEdgeKey(r)
				model[string(k)] = "v0"
				tr.Set(k, []byte("v0"))
			}
			tr.SaveVersion()
			if seed%2 == 0 {
				dir := filepath.Join(t.TempDir(), "s")
				if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
					t.Fatal(err)
				}
				tr = openSnapshotTree(t, dir)
			}
			var start, end []byte
			switch r.Intn(3) {
			case 0:
				start = randomEdgeKey(r)
			case 1:
				start = []byte{}
			}
			switch r.Intn(3) {
			case 0:
				end = randomEdgeKey(r)
			case 1:
				end = []byte{}
			}
			next := func(cur string, first bool) (string, bool) {
				return modelNext(model, start, end, asc, cur, first)
			}
			it := tr.Iterator(start, end, asc)
			want, ok := next("", true)
			for step := 0; ; step++ {
				if it.Valid() != ok {
					t.Fatalf("seed %d asc %v step %d: valid %v want %v %X", seed, asc, step, it.Valid(), ok, want)
				}
				if !ok {
					break
				}
				if got := string(it.Key()); got != want {
					t.Fatalf("seed %d asc %v step %d: key %X want %X", seed, asc, step, got, want)
				}
				if got := string(it.Value()); got != model[want] {
					t.Fatalf("seed %d step %d: value %q want %q", seed, step, got, model[want])
				}
				cur := want
				for n := r.Intn(4); n > 0; n-- {
					k := randomEdgeKey(r)
					if r.Intn(5) == 0 {
						k = []byte(cur)
					}
					if r.Intn(3) == 0 {
						delete(model, string(k))
						tr.Remove(k)
					} else {
						v := fmt.Sprintf("v%d", step+1)
						model[string(k)] = v
						tr.Set(k, []byte(v))
					}
				}
				if r.Intn(5) == 0 {
					tr.SaveVersion()
				}
				it.Next()
				want, ok = next(cur, false)
			}
			if it.Error() != nil {
				t.Fatal(it.Error())
			}
			it.Close()
		}
	}
}
