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
// rootmulti's failed load keeps its stores, which read their trees; ours
// read the last committed version until the next load.
func TestBranchBeforeFailedReloadReadsAfterRepair(t *testing.T) {
	p := rfPair(t)
	ob, rb := p.ours.CacheMultiStore(), p.oracle.CacheMultiStore()
	st := p.ours.GetKVStore(p.keys["a"])
	restore := rfReplace(t, filepath.Join(rfSnapDir(p.dir, 10), "metadata"), 10)
	if err := p.ours.LoadLatestVersion(); err == nil {
		t.Fatal("loaded")
	}
	// until the next load, the last committed version of the database
	// the failed reload closed (rootmulti's stores read their trees)
	for _, k := range []string{"k05", "k12", "zy"} {
		o := outcome(func() any { return string(ob.GetKVStore(p.keys["a"]).Get([]byte(k))) })
		r := outcome(func() any { return string(rb.GetKVStore(p.keys["a"]).Get([]byte(k))) })
		if o != r {
			t.Errorf("get %s through a branch taken before the failed reload, before the next load: ours %s | rootmulti %s", k, o, r)
		}
	}
	// a write meanwhile is read back, and discarded by the next load
	if o := outcome(func() any { st.Set([]byte("new"), []byte("1")); return string(st.Get([]byte("new"))) }); o != "1" {
		t.Errorf("a write to a store kept by the failed reload, read back: %s", o)
	}
	restore()
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	if got := st.Get([]byte("new")); got != nil {
		t.Errorf("a write to a store kept by the failed reload, after the next load: %q", got)
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

// TestIteratorDuringFailedReloadOutlivesLoad: an iterator of a store made
// while the store reads the last committed version after a failed reload
// (a copy of a view of the database the reload closed), kept across the
// next load, which releases that view, reads on to its end: it holds the
// view's snapshot until its Close, as an iterator of the working state
// holds its own.
func TestIteratorDuringFailedReloadOutlivesLoad(t *testing.T) {
	p := rfPair(t)
	st := p.ours.GetKVStore(p.keys["a"])
	restore := rfReplace(t, filepath.Join(rfSnapDir(p.dir, 10), "metadata"), 10)
	if err := p.ours.LoadLatestVersion(); err == nil {
		t.Fatal("loaded")
	}
	it := st.Iterator(nil, nil)
	defer it.Close()
	if !it.Valid() || string(it.Key()) != "k01" {
		t.Fatalf("iterator at %q", it.Key())
	}
	restore()
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	got, failed := readToEnd(it)
	if failed != "" {
		t.Fatalf("reading the iterator after the next load: %s", failed)
	}
	if len(got) != 12 || got[0] != "k01=v1" || got[11] != "k12=v12" {
		t.Fatalf("read %v after the next load; want k01=v1 ... k12=v12", got)
	}
}
