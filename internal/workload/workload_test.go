package workload

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

func mustNew(t *testing.T, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDeterministic(t *testing.T) {
	a := mustNew(t, Config{Seed: 7, Scale: 0.05})
	b := mustNew(t, Config{Seed: 7, Scale: 0.05})
	// b generates in another order: a block depends only on its version
	for _, v := range []int64{300, 1, 2, 150, 51} {
		if !reflect.DeepEqual(a.Block(v), b.Block(v)) {
			t.Fatalf("version %d differs between two generators of the same config", v)
		}
	}
	c := mustNew(t, Config{Seed: 8, Scale: 0.05})
	if reflect.DeepEqual(a.Block(2), c.Block(2)) {
		t.Fatal("different seeds gave the same block")
	}
}

func TestBadScale(t *testing.T) {
	for _, s := range []float64{-1, 2e6} {
		if _, err := New(Config{Scale: s}); err == nil {
			t.Errorf("scale %v accepted", s)
		}
	}
}

// TestConsistent applies blocks to a map and checks that every update and
// delete touches a live key, every insert a new one, that changesets are
// sorted and unique, and that sizes are in the documented ranges.
func TestConsistent(t *testing.T) {
	g := mustNew(t, Config{Seed: 1, Scale: 0.02})
	blocks := int64(450)
	if testing.Short() {
		blocks = 260
	}
	state := map[string]map[string][]byte{}
	for _, s := range g.Stores() {
		state[s] = map[string][]byte{}
	}
	var sets, dels, upds int
	for v := int64(1); v <= blocks; v++ {
		css := g.Block(v)
		if len(css) != len(g.Stores()) {
			t.Fatalf("version %d: %d changesets", v, len(css))
		}
		for ci, cs := range css {
			if cs.Name != g.Stores()[ci] {
				t.Fatalf("version %d: changeset %d is %q", v, ci, cs.Name)
			}
			st := state[cs.Name]
			for i, p := range cs.Pairs {
				if i > 0 && bytes.Compare(cs.Pairs[i-1].Key, p.Key) >= 0 {
					t.Fatalf("version %d store %s: keys not sorted and unique at %d", v, cs.Name, i)
				}
				checkSizes(t, cs.Name, p)
				_, had := st[string(p.Key)]
				switch {
				case p.Delete && !had:
					t.Fatalf("version %d store %s: delete of absent key %x", v, cs.Name, p.Key)
				case p.Delete:
					delete(st, string(p.Key))
					dels++
				case had:
					st[string(p.Key)] = p.Value
					upds++
				default:
					st[string(p.Key)] = p.Value
					sets++
				}
			}
		}
	}
	if dels == 0 || upds == 0 || sets == 0 {
		t.Fatalf("inserts %d, updates %d, deletes %d: want all three", sets, upds, dels)
	}
	t.Logf("%d blocks: %d inserts, %d updates, %d deletes; live keys bank %d staking %d lockup %d",
		blocks, sets, upds, dels, len(state[Bank]), len(state[Staking]), len(state[Lockup]))
}

func checkSizes(t *testing.T, store string, p wal.KVPair) {
	t.Helper()
	k, v := len(p.Key), len(p.Value)
	bad := false
	switch store {
	case Bank:
		bad = k < 25 || k > 95 || p.Key[0] != 0x02 || (!p.Delete && (v < 40 || v > 80))
	case Staking:
		bad = (k != 43 && k != 22) || (!p.Delete && (v < 100 || v > 400))
	case Lockup:
		bad = (k != 9 && k != 17) || (!p.Delete && k == 9 && (v < 180 || v > 230))
	}
	if bad {
		t.Fatalf("store %s: key %d bytes, value %d bytes out of range", store, k, v)
	}
}

func TestDefaultBlockSize(t *testing.T) {
	g := mustNew(t, Config{})
	for _, v := range []int64{2, 60, 250} {
		n := g.Pairs(v)
		if n < 2000 || n > 5000 {
			t.Errorf("version %d has %d pairs, want a few thousand", v, n)
		}
	}
	if n := g.Pairs(1); n < 100_000 {
		t.Errorf("genesis has %d pairs", n)
	}
}

func BenchmarkBlock(b *testing.B) {
	g, _ := New(Config{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		g.Block(int64(2 + i%500))
	}
}
