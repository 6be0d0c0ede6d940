package memiavl_test

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
)

// TestImportedIAVLContinues imports cosmos/iavl's export stream of a
// random tree (initial versions 0, 5 and 1000) into our importer and into a
// fresh iavl tree, then drives both imported trees on with the campaign's
// workload: the imported snapshot must behave as iavl's imported tree
// through further versions, reloads, copies and rebases.
func TestImportedIAVLContinues(t *testing.T) {
	n := campSeeds(4, 30)
	for seed := int64(0); seed < int64(n); seed++ {
		initial := []int64{0, 5, 1000}[seed%3]
		shape := campShapes[int(seed)%5] // the small shapes
		t.Run(fmt.Sprintf("%s/seed=%d/initial=%d", shape.name, seed, initial), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			campSeq = 0
			src := newIAVL(t, initial)
			for v := 0; v < 5; v++ {
				for i := 0; i < 50; i++ {
					k := campKey(r, shape.keyKind)
					if r.Intn(4) == 0 {
						if _, _, err := src.Remove(k); err != nil {
							t.Fatal(err)
						}
					} else if _, err := src.Set(k, []byte(fmt.Sprint(v, i))); err != nil {
						t.Fatal(err)
					}
				}
				if _, _, err := src.SaveVersion(); err != nil {
					t.Fatal(err)
				}
			}
			nodes := exportIAVL(t, src, src.Version())
			ours := importTree(t, filepath.Join(t.TempDir(), "imported"), src.Version(), nodes)
			ref := importIAVL(t, src.Version(), nodes)
			p := &campPair{t: t, r: r, shape: shape, initial: initial, ours: ours, ref: ref,
				model: map[string][]byte{}, where: "imported from iavl", dir: t.TempDir()}
			it, err := ref.Iterator(nil, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			for ; it.Valid(); it.Next() {
				p.model[string(it.Key())] = append([]byte{}, it.Value()...)
			}
			it.Close()
			p.check(true)
			for v := 0; v < 10; v++ {
				p.version()
				p.save()
				p.check(v%3 == 2)
				if !p.deferred {
					p.move()
				}
			}
		})
	}
}
