package compat_test

import (
	"path/filepath"
	"testing"
)

// TestBranchBeforeFailedReloadReadsAfterRepair: a branch of the working
// state taken before a reload that failed (the load and its fallback: the
// current snapshot's metadata damaged), read after the next load succeeds
// (the file repaired). A reload keeps the IAVL stores of the load before it
// (compat/README.md), so the branch reads the reloaded state, as a branch
// taken before a successful reload, or before Close and a load, does; it
// must not go on reading the database the failed reload closed.
// rootmulti's failed load keeps its stores, which read their trees.
func TestBranchBeforeFailedReloadReadsAfterRepair(t *testing.T) {
	p := rfPair(t)
	ob, rb := p.ours.CacheMultiStore(), p.oracle.CacheMultiStore()
	restore := rfReplace(t, filepath.Join(rfSnapDir(p.dir, 10), "metadata"), 10)
	if err := p.ours.LoadLatestVersion(); err == nil {
		t.Fatal("loaded")
	}
	restore()
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	if err := p.oracle.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k03", "k11", "zz"} {
		o := outcome(func() any { return string(ob.GetKVStore(p.keys["a"]).Get([]byte(k))) })
		r := outcome(func() any { return string(rb.GetKVStore(p.keys["a"]).Get([]byte(k))) })
		if o != r {
			t.Errorf("get %s through a branch taken before the failed reload: ours %s | rootmulti %s", k, o, r)
		}
	}
}
