package compat_test

// TreeStore against iavl.Store (through rootmulti), side by side: a
// deleted key buffer reused by the caller, the contract of a store an
// upgrade removed, an iterator used after its multistore closed.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/store/cachekv"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestTreeStoreDeleteCopiesKey: TreeStore.Delete copies its key, so a
// caller that reuses the buffer after Delete still deletes the key it
// gave, as iavl.Store.Delete (which removes it at the call) does: same
// working hash and app hash. (iavl keeps the buffer in its fast-node
// removals, so its own reads of the two keys go wrong; ours are checked.)
func TestTreeStoreDeleteCopiesKey(t *testing.T) {
	p := newPair(t, smallMount)
	ak := p.keys["a"]
	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v2")}}})
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		buf := []byte("k1")
		s.GetKVStore(ak).Delete(buf)
		buf[1] = '2' // the buffer is reused for the next key
	}
	sameOutcome(t, "WorkingHash after Delete(k1) and reuse of the key buffer", p, func(s types.CommitMultiStore) any {
		return fmt.Sprintf("%X", s.WorkingHash())
	})
	a, b := p.ours.Commit(), p.oracle.Commit()
	if !bytes.Equal(a.Hash, b.Hash) {
		t.Errorf("app hash %X, rootmulti %X", a.Hash, b.Hash)
	}
	// iavl's reads of the two keys go wrong here (its fast-node removal
	// kept the reused buffer); ours read what the tree holds
	if got := p.ours.GetKVStore(ak).Get([]byte("k1")); got != nil {
		t.Errorf("Get k1 after its delete and commit: %q", got)
	}
	if got := p.ours.GetKVStore(ak).Get([]byte("k2")); string(got) != "v2" {
		t.Errorf("Get k2 after the commit: %q, want v2", got)
	}
}

// TestTreeStoreDroppedStoreKeyContract: a mounted store deleted by the
// load's upgrades stays in the multistore, emptied, until the next Commit
// (README "Store upgrades"); as rootmulti's emptied *iavl.Store, it reads
// nil and empty keys (nil, false), deletes them as no-ops, takes empty
// iterator bounds, and its iterators past their end are invalid with nil
// keys and values instead of panicking.
func TestTreeStoreDroppedStoreKeyContract(t *testing.T) {
	z := newSide(t, sideNothing)
	z.loadBoth("load", func(s types.CommitMultiStore) error { return s.LoadLatestVersion() })
	z.set("store3", "k", "v3")
	z.commit()
	z.fresh(sideStores, sideNothing)
	z.loadBoth("delete store3", func(s types.CommitMultiStore) error {
		return s.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Deleted: []string{"store3"}})
	})
	k3 := z.keys["store3"]
	ops := []struct {
		name string
		f    func(s types.KVStore) any
	}{
		{"Get(nil)", func(s types.KVStore) any { return fmt.Sprintf("%q", s.Get(nil)) }},
		{"Get(empty)", func(s types.KVStore) any { return fmt.Sprintf("%q", s.Get([]byte{})) }},
		{"Has(nil)", func(s types.KVStore) any { return s.Has(nil) }},
		{"Has(empty)", func(s types.KVStore) any { return s.Has([]byte{}) }},
		{"Delete(nil)", func(s types.KVStore) any { s.Delete(nil); return "ok" }},
		{"Delete(empty)", func(s types.KVStore) any { s.Delete([]byte{}); return "ok" }},
		{"Iterator(empty, nil)", func(s types.KVStore) any { return rkDump(s.Iterator([]byte{}, nil)) }},
		{"ReverseIterator(nil, empty)", func(s types.KVStore) any { return rkDump(s.ReverseIterator(nil, []byte{})) }},
		{"Set(w) then an iterator past its end", func(s types.KVStore) any {
			s.Set([]byte("w"), []byte("w"))
			it := s.Iterator(nil, nil)
			defer it.Close()
			for it.Valid() {
				it.Next()
			}
			return fmt.Sprintf("valid=%v key=%q value=%q err=%v", it.Valid(), it.Key(), it.Value(), it.Error())
		}},
		{"Next past the end", func(s types.KVStore) any {
			it := s.Iterator(nil, nil)
			defer it.Close()
			for it.Valid() {
				it.Next()
			}
			it.Next()
			return it.Valid()
		}},
	}
	for _, op := range ops {
		z.same("deleted store3 "+op.name, func(s types.CommitMultiStore) any { return op.f(s.GetKVStore(k3)) })
	}
}

// rkChildEnv marks a re-executed test binary that runs the child scenario.
const rkChildEnv = "RK_REVIEW_KV_CHILD"

// TestTreeStoreIteratorOutlivesClose: an iterator of a TreeStore (default
// config, no zero copy) still open when the multistore is closed reads on
// to its end, as rootmulti's does: it holds the snapshot it reads until its
// Close. (Without the hold it would read the unmapped snapshot; a memory
// fault kills the process, which no recover catches: the scenario runs in
// a child process.)
func TestTreeStoreIteratorOutlivesClose(t *testing.T) {
	if os.Getenv(rkChildEnv) != "" {
		rkIteratorChild(t)
		return
	}
	t.Logf("child output:\n%s", runFaultChild(t, "TestTreeStoreIteratorOutlivesClose"))
}

// runFaultChild re-executes the test binary for the test named, with
// rkChildEnv set, and fails if the child died (a memory fault kills the
// process, which no recover catches); it returns the child's output.
func runFaultChild(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), rkChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	s := string(out)
	for _, died := range []string{"unexpected fault address", "fatal error"} {
		if i := strings.Index(s, died); i >= 0 {
			t.Fatalf("the process died instead of a recoverable panic:\n%s", s[max(0, i-600):min(len(s), i+2500)])
		}
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, s)
	}
	return s
}

// TestTreeStoreIteratorPastSwitch: an iterator of a TreeStore (default
// config, copies) kept past the block into which a Commit switched to a
// background rewrite's snapshot gives the value: it holds the old snapshot
// until its Close. The database unmaps a released snapshot on a goroutine
// of its own; without the hold that would race with the iterator's Value,
// whose copy of a 64 MiB value takes long enough to meet it in most runs
// (the copy is made under a fault guard, and the scenario runs in a child
// process all the same).
func TestTreeStoreIteratorPastSwitch(t *testing.T) {
	if os.Getenv(rkChildEnv) == "" {
		t.Logf("child output:\n%s", runFaultChild(t, "TestTreeStoreIteratorPastSwitch"))
		return
	}
	cfg := compat.DefaultConfig()
	cfg.Enable = true
	cfg.SnapshotInterval = 1
	cfg.SnapshotKeepRecent = 0
	cfg.QueryViews = 1
	cfg.AsyncCommitBuffer = 4 // the unmapping goroutine flushes the log first
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, mount{iavl: []string{"a"}}, nil)
	defer ms.Close()
	ak := keys["a"]
	big := bytes.Repeat([]byte{7}, 64<<20)
	ms.GetKVStore(ak).Set([]byte("big"), big)
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms.Commit()
	for attempt := 0; attempt < 6; attempt++ {
		it := ms.GetKVStore(ak).Iterator(nil, nil)
		if !it.Valid() || string(it.Key()) != "big" {
			t.Fatalf("iterator at %q", it.Key())
		}
		// commit blocks until one switches to a background rewrite's snapshot
		snap := ms.DB().SnapshotVersion()
		deadline := time.Now().Add(30 * time.Second)
		for ms.DB().SnapshotVersion() == snap {
			if time.Now().After(deadline) {
				t.Fatal("no switch to a background rewrite's snapshot in 30 s")
			}
			time.Sleep(20 * time.Millisecond)
			ms.GetKVStore(ak).Set([]byte(fmt.Sprint("x", attempt)), []byte("y"))
			ms.Commit()
		}
		got := outcome(func() any { return len(it.Value()) })
		t.Logf("attempt %d: Value of the iterator kept past the switch: %s", attempt, got)
		if got != fmt.Sprint(len(big)) {
			t.Errorf("Value: %s; want the value's %d bytes", got, len(big))
		}
		outcome(func() any { return it.Close() })
	}
}

// pairOnSnapshot returns a pair whose store "a" holds 100 pairs, in our
// multistore read from a snapshot (iterators read its leaves in read-ahead
// batches), and the store's key.
func pairOnSnapshot(t *testing.T) (*pair, types.StoreKey) {
	t.Helper()
	p := newPair(t, smallMount)
	var w [][2][]byte
	for i := 0; i < 100; i++ {
		w = append(w, [2][]byte{[]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint("v", i))})
	}
	p.commit(map[string][][2][]byte{"a": w})
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.commit(nil)
	return p, p.keys["a"]
}

func rkIteratorChild(t *testing.T) {
	p, ak := pairOnSnapshot(t)
	var its []types.Iterator
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		its = append(its, s.GetKVStore(ak).Iterator(nil, nil))
	}
	st := p.ours.GetKVStore(ak)
	it2 := st.Iterator(nil, nil)
	it2.Next() // in the leaves read ahead
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ours, Get after Close: %s", outcome(func() any { return st.Get([]byte("k001")) }))
	want := outcome(func() any { its[1].Next(); return fmt.Sprintf("%q=%q", its[1].Key(), its[1].Value()) })
	got := outcome(func() any { its[0].Next(); return fmt.Sprintf("%q=%q", its[0].Key(), its[0].Value()) })
	t.Logf("ours, open iterator: %s", got)
	if got != want {
		t.Errorf("the open iterator after Close: %s; want %s, as rootmulti's", got, want)
	}
	its[0].Close()
	its[1].Close()
	// it2 reads on from k001 to the end
	rest, failed := readToEnd(it2)
	if failed != "" {
		t.Fatalf("reading an open iterator to its end after Close: %s", failed)
	}
	if len(rest) != 99 || rest[0] != "k001=v1" || rest[98] != "k099=v99" {
		t.Errorf("an open iterator after Close read %d pairs (%v ... %v); want k001=v1 ... k099=v99", len(rest), rest[:min(2, len(rest))], rest[max(0, len(rest)-2):])
	}
	it2.Close()
}

// TestTreeStoreClosedIteratorValid: an iterator of a TreeStore, once
// closed, answers Valid with false whatever happened before its Close (a
// Next that panicked on the released snapshot included); rootmulti's closed
// iavl iterator is logged, not compared (it answers true).
func TestTreeStoreClosedIteratorValid(t *testing.T) {
	p, ak := pairOnSnapshot(t)
	st := p.ours.GetKVStore(ak)
	plain := st.Iterator(nil, nil)  // closed before anything fails
	failed := st.Iterator(nil, nil) // its Next fails, then it is closed
	cached := cachekv.NewStore(st).Iterator(nil, nil)
	oracle := p.oracle.GetKVStore(ak).Iterator(nil, nil)
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	plain.Close()
	if got := outcome(func() any { return plain.Valid() }); got != "false" {
		t.Errorf("plain closed iterator Valid: %s", got)
	}
	t.Logf("Next after Close: %s", outcome(func() any { failed.Next(); return nil }))
	failed.Close()
	oracle.Close()
	t.Logf("rootmulti closed iterator Valid: %s", outcome(func() any { return oracle.Valid() }))
	if got := outcome(func() any { return failed.Valid() }); got != "false" {
		t.Errorf("closed iterator (after a failed Next) Valid: %s; want false", got)
	}
	t.Logf("cachekv iterator Key after Close: %s", outcome(func() any { return string(cached.Key()) }))
	cached.Close()
	var _ types.Iterator = cached
	if got := outcome(func() any { return cached.Valid() }); got != "true" && got != "false" {
		t.Errorf("closed cachekv iterator Valid: %s", got)
	}
}

// TestTreeStoreIteratorValidPastSwitch: an iterator of the working state
// kept past switches to new snapshots reads on to its end: the keys of its
// tree when the first switch replaced it, the write made before that
// switch included, none of the later ones.
func TestTreeStoreIteratorValidPastSwitch(t *testing.T) {
	cfg := compat.DefaultConfig()
	cfg.Enable = true
	cfg.SnapshotInterval = -1 // switches by RewriteSnapshot only
	cfg.SnapshotKeepRecent = 0
	cfg.QueryViews = 1
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, mount{iavl: []string{"a"}}, nil)
	defer ms.Close()
	ak := keys["a"]
	for i := 0; i < 100; i++ {
		ms.GetKVStore(ak).Set(fmt.Appendf(nil, "k%03d", i), []byte("v"))
	}
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms.Commit()
	it := ms.GetKVStore(ak).Iterator(nil, nil)
	defer func() { outcome(func() any { return it.Close() }) }()
	if !it.Valid() || string(it.Key()) != "k000" {
		t.Fatalf("iterator at %q", it.Key())
	}
	for round := 0; round < 3; round++ {
		// a new snapshot, and commits that replace the cached view of
		// the old one
		ms.GetKVStore(ak).Set([]byte("k999"), []byte(fmt.Sprint("v", round)))
		ms.Commit()
		if err := ms.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		ms.Commit()
		ms.Commit()
	}
	got, failed := readToEnd(it)
	if failed != "" {
		t.Fatalf("reading the iterator after the switches: %s", failed)
	}
	if len(got) != 101 || got[0] != "k000=v" || got[99] != "k099=v" || got[100] != "k999=v0" {
		t.Fatalf("read %d pairs after the switches (%v ... %v); want k000=v ... k099=v, k999=v0", len(got), got[:min(2, len(got))], got[max(0, len(got)-2):])
	}
}

// readToEnd reads it to its end as "key=value" pairs; failed is the panic
// that stopped it, "" if none did.
func readToEnd(it types.Iterator) (pairs []string, failed string) {
	res := outcome(func() any {
		for ; it.Valid(); it.Next() {
			pairs = append(pairs, fmt.Sprintf("%s=%s", it.Key(), it.Value()))
		}
		return nil
	})
	if res != "<nil>" {
		failed = res
	}
	return pairs, failed
}
