package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/rootmulti"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/spf13/viper"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

var smallMount = mount{iavl: []string{"a", "b"}, transient: "t", memory: "m"}

// listenedValueIs reports, under a fault guard (the value may be a slice
// of an unmapped snapshot), whether the change set's pair of key holds
// want: "true", "false", "no <key>", or the panic.
func listenedValueIs(changes []*types.StoreKVPair, key string, want []byte) string {
	return outcome(func() any {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		for _, kv := range changes {
			if string(kv.Key) == key {
				return bytes.Equal(kv.Value, want)
			}
		}
		return "no " + key
	})
}

// outcome runs f and describes its result or panic, to compare behaviours.
func outcome(f func() any) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("panic: %v", r)
		}
	}()
	return fmt.Sprintf("%v", f())
}

// pair is our multistore and rootmulti side by side.
type pair struct {
	t      *testing.T
	keys   keyring
	odb    dbm.DB
	oracle *rootmulti.Store
	dir    string
	cfg    compat.Config
	ours   *compat.MultiStore
}

func newPair(t *testing.T, m mount) *pair {
	p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
	p.oracle = newOracle(t, p.odb, p.keys, m, nil)
	p.ours = newOurs(t, p.dir, p.cfg, p.keys, m, nil)
	t.Cleanup(func() { p.ours.Close() })
	return p
}

// commitRandom writes n random pairs to every IAVL store of both and
// commits, returning the writes so that they can be replayed.
func (p *pair) commitRandom(r *rand.Rand, stores []string, n int) (types.CommitID, map[string][][2][]byte) {
	writes := map[string][][2][]byte{}
	for _, name := range stores {
		for i := 0; i < n; i++ {
			k := fmt.Appendf(nil, "k%03d", r.Intn(200))
			v := fmt.Appendf(nil, "v%d", r.Int())
			writes[name] = append(writes[name], [2][]byte{k, v})
		}
	}
	return p.commit(writes), writes
}

func (p *pair) commit(writes map[string][][2][]byte) types.CommitID {
	t := p.t
	for name, ws := range writes {
		key := p.keys[name]
		for _, w := range ws {
			p.ours.GetKVStore(key).Set(w[0], w[1])
			p.oracle.GetKVStore(key).Set(w[0], w[1])
		}
	}
	a, b := p.ours.Commit(), p.oracle.Commit()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		t.Fatalf("commit %v, rootmulti %v", a, b)
	}
	return a
}

func (p *pair) sameLastCommit() {
	a, b := p.ours.LastCommitID(), p.oracle.LastCommitID()
	if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		p.t.Fatalf("LastCommitID %v, rootmulti %v", a, b)
	}
}

func TestStoreContracts(t *testing.T) {
	p := newPair(t, smallMount)
	p.sameLastCommit()
	a := p.keys["a"]
	os, rs := p.ours.GetKVStore(a), p.oracle.GetKVStore(a)
	cases := map[string]func(s types.KVStore) any{
		"set nil key":    func(s types.KVStore) any { s.Set(nil, []byte("v")); return nil },
		"set empty key":  func(s types.KVStore) any { s.Set([]byte{}, []byte("v")); return nil },
		"set nil value":  func(s types.KVStore) any { s.Set([]byte("k"), nil); return nil },
		"set huge key":   func(s types.KVStore) any { s.Set(make([]byte, types.MaxKeyLength+1), []byte("v")); return nil },
		"get nil key":    func(s types.KVStore) any { return s.Get(nil) },
		"has nil key":    func(s types.KVStore) any { return s.Has(nil) },
		"delete nil key": func(s types.KVStore) any { s.Delete(nil); return nil },
		"empty value": func(s types.KVStore) any {
			s.Set([]byte("e"), []byte{})
			return fmt.Sprintf("%v %v", s.Get([]byte("e")) != nil, s.Has([]byte("e")))
		},
		"absent": func(s types.KVStore) any {
			return fmt.Sprintf("%v %v", s.Get([]byte("zz")) == nil, s.Has([]byte("zz")))
		},
		"store type": func(s types.KVStore) any { return s.GetStoreType() },
	}
	for name, f := range cases {
		if got, want := outcome(func() any { return f(os) }), outcome(func() any { return f(rs) }); got != want {
			t.Errorf("%s: %s, rootmulti %s", name, got, want)
		}
	}
	for _, f := range []func(types.CommitMultiStore) any{
		func(s types.CommitMultiStore) any { return s.GetKVStore(types.NewKVStoreKey("nope")) },
		func(s types.CommitMultiStore) any { return s.GetStore(types.NewKVStoreKey("nope")) },
		func(s types.CommitMultiStore) any { return s.GetCommitKVStore(types.NewKVStoreKey("nope")) == nil },
		func(s types.CommitMultiStore) any { return s.GetStoreType() },
		func(s types.CommitMultiStore) any { return s.GetPruning().Validate() },
		func(s types.CommitMultiStore) any { return s.GetCommitKVStore(p.keys["t"]).GetStoreType() },
		func(s types.CommitMultiStore) any { return s.GetCommitKVStore(p.keys["m"]).GetStoreType() },
		func(s types.CommitMultiStore) any {
			s.MountStoreWithDB(p.keys["a"], types.StoreTypeIAVL, nil)
			return nil
		},
	} {
		if got, want := outcome(func() any { return f(p.ours) }), outcome(func() any { return f(p.oracle) }); got != want {
			t.Errorf("%s, rootmulti %s", got, want)
		}
	}
	mustPanic(t, func() { p.ours.GetCommitKVStore(a).Commit() })
	// (rootmulti's message names the key's address)
	mustPanic(t, func() { p.ours.MountStoreWithDB(types.NewKVStoreKey("a"), types.StoreTypeIAVL, nil) })
	mustPanic(t, func() { p.ours.MountStoreWithDB(nil, types.StoreTypeIAVL, nil) })

	p.commit(map[string][][2][]byte{"a": {{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v2")}}})
	p.commit(map[string][][2][]byte{"b": {{[]byte("k1"), []byte("v1")}}})
	p.sameLastCommit()
	for _, name := range []string{"a", "b"} {
		oc, rc := p.ours.GetCommitKVStore(p.keys[name]), p.oracle.GetCommitKVStore(p.keys[name])
		if a, b := oc.LastCommitID(), rc.LastCommitID(); a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
			t.Errorf("store %s LastCommitID %v, iavl %v", name, a, b)
		}
		oc.(types.KVStore).Set([]byte("w"), []byte("w"))
		rc.(types.KVStore).Set([]byte("w"), []byte("w"))
		if a, b := oc.WorkingHash(), rc.WorkingHash(); !bytes.Equal(a, b) {
			t.Errorf("store %s WorkingHash %X, iavl %X", name, a, b)
		}
	}

	// queries: every path form and error rootmulti knows
	for _, q := range []types.RequestQuery{
		{Path: "a/key", Data: []byte("k1")},
		{Path: "/nope/key", Data: []byte("k1")},
		{Path: "/t/key", Data: []byte("k1")},
		{Path: "/m/key", Data: []byte("k1"), Prove: true},
		{Path: "/a/unknown", Data: []byte("k1")},
		{Path: "/a/key"},
		{Path: "/a/key", Prove: true},
		{Path: "/a", Data: []byte("k1")},
		{Path: "/store/a/key", Data: []byte("k1"), Prove: true},
		{Path: "/a/key", Data: []byte("k1"), Prove: true},
		{Path: "/a/key", Data: []byte("k0"), Prove: true},
		{Path: "/a/key", Data: []byte("k1"), Height: 1, Prove: true},
		{Path: "/a/key", Data: []byte("k2"), Height: 2},
		{Path: "/a/key", Data: []byte("k1"), Height: 5},
		{Path: "/a/key", Data: []byte("k1"), Height: 5, Prove: true},
		{Path: "/b/key", Data: []byte("k1"), Height: 1, Prove: true}, // empty store
		{Path: "/a/subspace", Data: []byte("k")},
		{Path: "/a/subspace", Data: []byte("x"), Prove: true},
		{Path: "/a/subspace"},
	} {
		qa, qb := q, q
		ra, ea := p.ours.Query(&qa)
		rb, eb := p.oracle.Query(&qb)
		if err := sameResponse(ra, ea, rb, eb); err != nil {
			t.Errorf("query %+v: %v", q, err)
		}
	}
}

func TestLastCommitIDBeforeLoadAndReopen(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	for i := 0; i < 7; i++ {
		p.commitRandom(r, []string{"a", "b"}, 5)
	}
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	ours, err := compat.NewMultiStore(p.dir, nil, p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	oracle := rootmulti.NewStore(p.odb, nil, nil)
	if a, b := ours.LastCommitID(), oracle.LastCommitID(); a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		t.Fatalf("before load: %v, rootmulti %v", a, b)
	}
	if ours.GetCommitKVStore(p.keys["a"]) != nil {
		t.Fatal("a store before load")
	}
	mountAll(ours, p.keys, smallMount)
	if err := ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	if ours.LastCommitID().Version != 7 || !bytes.Equal(ours.LastCommitID().Hash, p.oracle.LastCommitID().Hash) {
		t.Fatalf("after load: %v, want %v", ours.LastCommitID(), p.oracle.LastCommitID())
	}
	// a version the database does not have
	empty, err := compat.NewMultiStore(t.TempDir(), nil, p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.LoadVersion(3); err == nil {
		t.Fatal("loading a version of an empty database succeeded")
	}
	// a mounted store missing from a database with versions, without a
	// store upgrade, is the error rootmulti returns
	ours.Close()
	m := mount{iavl: []string{"a", "b", "c"}}
	extra, _ := compat.NewMultiStore(p.dir, nil, p.cfg)
	mountAll(extra, p.keys, m)
	oextra := rootmulti.NewStore(p.odb, log.NewNopLogger(), nil)
	mountAll(oextra, p.keys, m)
	ea, eb := extra.LoadLatestVersion(), oextra.LoadLatestVersion()
	if ea == nil || eb == nil || !strings.Contains(eb.Error(), ea.Error()) {
		t.Fatalf("load with an unknown store: %v, rootmulti %v", ea, eb)
	}
}

// TestInitialVersion: an initial version set before or after the load,
// the smallest one other than the default (2) and a larger one, gives
// rootmulti's commits, and no version before it exists.
func TestInitialVersion(t *testing.T) {
	for _, c := range []struct {
		initial    int64
		beforeLoad bool
	}{{100, true}, {100, false}, {2, true}} {
		initial, beforeLoad := c.initial, c.beforeLoad
		t.Run(fmt.Sprint("initial=", initial, "/beforeLoad=", beforeLoad), func(t *testing.T) {
			keys := keyring{}
			oracle := newOracle(t, dbm.NewMemDB(), keys, smallMount, nil)
			if err := oracle.SetInitialVersion(initial); err != nil {
				t.Fatal(err)
			}
			ours, err := compat.NewMultiStore(t.TempDir(), nil, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer ours.Close()
			mountAll(ours, keys, smallMount)
			if beforeLoad {
				if err := ours.SetInitialVersion(initial); err != nil {
					t.Fatal(err)
				}
			}
			if err := ours.LoadLatestVersion(); err != nil {
				t.Fatal(err)
			}
			if !beforeLoad {
				if err := ours.SetInitialVersion(initial); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 3; i++ {
				for _, s := range []types.CommitMultiStore{ours, oracle} {
					s.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%d", i), []byte("v"))
				}
				a, b := ours.Commit(), oracle.Commit()
				if a.Version != initial+int64(i) || a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
					t.Fatalf("commit %v, rootmulti %v", a, b)
				}
			}
			// versions before the initial one do not exist
			for _, v := range []int64{1, initial / 2, initial - 1} {
				_, ea := ours.CacheMultiStoreWithVersion(v)
				_, eb := oracle.CacheMultiStoreWithVersion(v)
				if ea == nil || eb == nil {
					t.Fatalf("CacheMultiStoreWithVersion(%d): %v, rootmulti %v", v, ea, eb)
				}
				q := types.RequestQuery{Path: "/a/key", Data: []byte("k0"), Height: v, Prove: v == initial/2}
				qa, qb := q, q
				ra, ea := ours.Query(&qa)
				rb, eb := oracle.Query(&qb)
				if err := sameResponse(ra, ea, rb, eb); err != nil {
					t.Fatalf("query at %d: %v", v, err)
				}
			}
			q := types.RequestQuery{Path: "/a/key", Data: []byte("k0"), Prove: true}
			qa, qb := q, q
			ra, ea := ours.Query(&qa)
			rb, eb := oracle.Query(&qb)
			if err := sameResponse(ra, ea, rb, eb); err != nil || ra.Height != initial+1 {
				t.Fatalf("query at height 0: %v (height %d)", err, ra.Height)
			}
		})
	}
}

func TestLoadOlderVersionAndRollback(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	var history []map[string][][2][]byte
	var ids []types.CommitID
	for i := 0; i < 12; i++ {
		id, w := p.commitRandom(r, []string{"a", "b"}, 8)
		history = append(history, w)
		ids = append(ids, id)
	}
	// LoadVersion of an older version: committing the same blocks again
	// gives the same hashes
	if err := p.ours.LoadVersion(9); err != nil {
		t.Fatal(err)
	}
	if err := p.oracle.LoadVersion(9); err != nil {
		t.Fatal(err)
	}
	p.sameLastCommit()
	for v := 10; v <= 12; v++ {
		if id := p.commit(history[v-1]); !bytes.Equal(id.Hash, ids[v-1].Hash) {
			t.Fatalf("re-committed version %d with another hash", v)
		}
	}
	// different content for a committed version is refused
	if err := p.ours.LoadVersion(10); err != nil {
		t.Fatal(err)
	}
	p.ours.GetKVStore(p.keys["a"]).Set([]byte("other"), []byte("x"))
	r1 := mustPanic(t, func() { p.ours.Commit() })
	if err, ok := r1.(error); !ok || !errors.Is(err, multitree.ErrConflict) {
		t.Fatalf("conflicting re-commit panicked with %v", r1)
	}

	// rollback discards the later versions on both
	if err := p.ours.RollbackToVersion(8); err != nil {
		t.Fatal(err)
	}
	if err := p.oracle.RollbackToVersion(8); err != nil {
		t.Fatal(err)
	}
	p.sameLastCommit()
	for i := 0; i < 5; i++ {
		p.commitRandom(r, []string{"a", "b"}, 8)
	}
	if p.ours.LastCommitID().Version != 13 {
		t.Fatalf("version %d after rollback and 5 commits", p.ours.LastCommitID().Version)
	}
	if err := p.ours.RollbackToVersion(0); err == nil {
		t.Fatal("rollback to 0 succeeded")
	}
}

// TestBufferedWrites checks that writes to the tree stores, which are
// applied to the database in batches, are seen by every read of the working
// version, by WorkingHash and by Commit, land in the database, and are
// discarded by a reload, as with rootmulti.
func TestBufferedWrites(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	p.commitRandom(r, []string{"a", "b"}, 20)
	both := func(name string, f func(s types.KVStore) any) {
		t.Helper()
		ours, oracle := p.ours.GetKVStore(p.keys[name]), p.oracle.GetKVStore(p.keys[name])
		if got, want := outcome(func() any { return f(ours) }), outcome(func() any { return f(oracle) }); got != want {
			t.Fatalf("store %s: %s, rootmulti %s", name, got, want)
		}
	}
	dump := func(s types.KVStore) any {
		it := s.Iterator(nil, nil)
		defer it.Close()
		var b strings.Builder
		for ; it.Valid(); it.Next() {
			fmt.Fprintf(&b, "%s=%s ", it.Key(), it.Value())
		}
		return b.String()
	}
	for round := 0; round < 30; round++ {
		// writes to both stores, then one kind of read (or none)
		for i, n := 0, r.Intn(40); i < n; i++ {
			name := []string{"a", "b"}[r.Intn(2)]
			k := fmt.Appendf(nil, "k%03d", r.Intn(200))
			if r.Intn(4) == 0 {
				both(name, func(s types.KVStore) any { s.Delete(k); return nil })
			} else {
				v := fmt.Appendf(nil, "w%d", r.Int())
				both(name, func(s types.KVStore) any { s.Set(k, v); return nil })
			}
		}
		k := fmt.Appendf(nil, "k%03d", r.Intn(200))
		name := []string{"a", "b"}[r.Intn(2)]
		switch r.Intn(6) {
		case 0:
			both(name, func(s types.KVStore) any { return fmt.Sprintf("%q", s.Get(k)) })
		case 1:
			both(name, func(s types.KVStore) any { return s.Has(k) })
		case 2:
			both(name, dump)
		case 3:
			both(name, func(s types.KVStore) any {
				it := s.ReverseIterator(nil, k)
				defer it.Close()
				if !it.Valid() {
					return "none"
				}
				return fmt.Sprintf("%s=%s", it.Key(), it.Value())
			})
		case 4:
			if a, b := p.ours.WorkingHash(), p.oracle.WorkingHash(); !bytes.Equal(a, b) {
				t.Fatalf("working hash %X, rootmulti %X", a, b)
			}
		}
		if r.Intn(3) == 0 {
			a, b := p.ours.Commit(), p.oracle.Commit()
			if a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
				t.Fatalf("commit %v, rootmulti %v", a, b)
			}
			// committed writes are in the database itself
			for _, name := range []string{"a", "b"} {
				want := p.oracle.GetKVStore(p.keys[name]).Get(k)
				got, err := p.ours.DB().Get(name, k)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("database %s/%s = %q, %v; rootmulti %q", name, k, got, err, want)
				}
			}
		}
	}
	// uncommitted writes are discarded by a reload
	if a, b := p.ours.Commit(), p.oracle.Commit(); !bytes.Equal(a.Hash, b.Hash) {
		t.Fatalf("commit %v, rootmulti %v", a, b)
	}
	p.ours.GetKVStore(p.keys["a"]).Set([]byte("k000"), []byte("discarded"))
	p.ours.GetKVStore(p.keys["b"]).Delete([]byte("k001"))
	if err := p.ours.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	both("a", dump)
	both("b", dump)
	p.commitRandom(r, []string{"a", "b"}, 5)
}

// TestSnapshotHeightHeldUntilPruned: the SDK's snapshot manager has its
// extensions (wasm's) read the snapshot's height through
// CacheMultiStoreWithVersion after Snapshot returns, however many blocks
// commit and snapshots switch meanwhile, until it calls
// PruneSnapshotHeight; until then those reads must work (an
// ErrVersionReleased panic on the manager's goroutine would end the node),
// and after it the version is given up like any other.
func TestSnapshotHeightHeldUntilPruned(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	cfg := p.cfg
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = 4, 0, 2
	p.ours.Close()
	p.ours = newOurs(t, p.dir, cfg, p.keys, smallMount, nil)
	for i := 0; i < 3; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	var sink bytes.Buffer
	if err := p.ours.Snapshot(3, protoio.NewDelimitedWriter(&sink)); err != nil {
		t.Fatal(err)
	}
	branch, err := p.ours.CacheMultiStoreWithVersion(3)
	if err != nil {
		t.Fatal(err)
	}
	store := branch.GetKVStore(p.keys["a"])
	var want [][]byte
	for it := store.Iterator(nil, nil); it.Valid(); it.Next() {
		want = append(want, bytes.Clone(it.Key()))
	}
	it := store.Iterator(nil, nil)
	if !it.Valid() {
		t.Fatal("empty iterator")
	}
	got := [][]byte{bytes.Clone(it.Key())}
	for i := 0; i < 20; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cfg.QueryViews+2; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	// held: the iteration goes on, and a new branch of the height opens
	for it.Next(); it.Valid(); it.Next() {
		got = append(got, bytes.Clone(it.Key()))
	}
	it.Close()
	if len(got) != len(want) {
		t.Fatalf("the held height iterated %d keys, %d before the switch", len(got), len(want))
	}
	if _, err := p.ours.CacheMultiStoreWithVersion(3); err != nil {
		t.Fatalf("a branch of the held height: %v", err)
	}
	// given up: as any evicted version
	p.ours.PruneSnapshotHeight(3)
	for i := 0; i < cfg.QueryViews; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	rec := mustPanic(t, func() { store.Get([]byte("k001x")) })
	if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
		t.Fatalf("read of a pruned snapshot height panicked with %v", rec)
	}
}

// TestHistoricalBranchLifetime checks that a historical branch holds no view
// between reads: once its version is evicted and unmapped, reads fail with
// ErrVersionReleased instead of touching unmapped memory.
func TestHistoricalBranchLifetime(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	cfg := p.cfg
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = 4, 0, 2
	p.ours.Close()
	p.ours = newOurs(t, p.dir, cfg, p.keys, smallMount, nil)
	for i := 0; i < 3; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	branch, err := p.ours.CacheMultiStoreWithVersion(2)
	if err != nil {
		t.Fatal(err)
	}
	store := branch.GetKVStore(p.keys["a"])
	it := store.Iterator(nil, nil)
	if !it.Valid() {
		t.Fatal("empty iterator")
	}
	for i := 0; i < 20; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Version 2's view was evicted long ago, but its snapshot stays mapped
	// while any cached view still reads it: when no background rewrite
	// switched before RewriteSnapshot, the cached views of the versions
	// committed before it do. QueryViews commits evict all of them.
	for i := 0; i < cfg.QueryViews; i++ {
		p.commitRandom(r, []string{"a", "b"}, 50)
	}
	rec := mustPanic(t, func() { store.Get([]byte("k001x")) })
	if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
		t.Fatalf("read of an evicted version panicked with %v", rec)
	}
	rec = mustPanic(t, func() {
		for ; it.Valid(); it.Next() {
		}
	})
	if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
		t.Fatalf("iteration of an evicted version panicked with %v", rec)
	}
	it.Close()
	// the snapshots before the current one are removed in the background
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := p.ours.CacheMultiStoreWithVersion(2); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("version 2 still served long after its snapshot was dropped")
		}
		// the branch put version 2's view in the cache: evict it, or
		// the next branch is served from it whether or not its
		// snapshot is still there
		for i := 0; i < cfg.QueryViews; i++ {
			p.commitRandom(r, []string{"a"}, 1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// a branch of a store added later panics on use, as rootmulti's
	latest := p.ours.LatestVersion()
	b2, err := p.ours.CacheMultiStoreWithVersion(latest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b2.GetKVStore(p.keys["a"]).Get([]byte("k001")), p.oracle.GetKVStore(p.keys["a"]).Get([]byte("k001"))) {
		t.Fatal("latest branch differs")
	}
	b2.GetKVStore(p.keys["a"]).Set([]byte("new"), []byte("x"))
	rec = mustPanic(t, func() { b2.Write() })
	if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrReadOnlyVersion) {
		t.Fatalf("write of a historical branch panicked with %v", rec)
	}
}

// TestConcurrentQueries reads historical branches and queries from several
// goroutines while blocks are committed (run with -race).
func TestConcurrentQueries(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	p.commitRandom(r, []string{"a", "b"}, 50)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				v := p.ours.LatestVersion() - int64(n%3)
				if v < 1 {
					v = 1
				}
				func() {
					defer func() {
						if rec := recover(); rec != nil {
							if err, ok := rec.(error); !ok || !errors.Is(err, compat.ErrVersionReleased) {
								errs <- fmt.Errorf("goroutine %d: %v", g, rec)
							}
						}
					}()
					b, err := p.ours.CacheMultiStoreWithVersion(v)
					if err != nil {
						return
					}
					s := b.GetKVStore(p.keys["a"])
					s.Get([]byte("k001"))
					it := s.Iterator(nil, nil)
					for i := 0; i < 20 && it.Valid(); i++ {
						it.Next()
					}
					it.Close()
				}()
			}
		}(g)
	}
	for i := 0; i < 40; i++ {
		p.commitRandom(r, []string{"a", "b"}, 20)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestTracing(t *testing.T) {
	p := newPair(t, smallMount)
	var ta, tb bytes.Buffer
	p.ours.SetTracer(&ta)
	p.oracle.SetTracer(&tb)
	p.ours.SetTracingContext(types.TraceContext{"blockHeight": 1})
	p.oracle.SetTracingContext(types.TraceContext{"blockHeight": 1})
	if !p.ours.TracingEnabled() {
		t.Fatal("tracing not enabled")
	}
	for _, s := range []types.MultiStore{p.ours, p.oracle} {
		kv := s.GetKVStore(p.keys["a"])
		kv.Set([]byte("k"), []byte("v"))
		kv.Get([]byte("k"))
		kv.Delete([]byte("k"))
		branch := s.CacheMultiStore()
		branch.GetKVStore(p.keys["b"]).Set([]byte("x"), []byte("y"))
		branch.Write()
	}
	if ta.Len() == 0 || ta.String() != tb.String() {
		t.Fatalf("trace:\n%s\nrootmulti:\n%s", ta.String(), tb.String())
	}
}

func TestStateSyncSnapshot(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	for i := 0; i < 6; i++ {
		p.commitRandom(r, []string{"a", "b"}, 40)
	}
	height := uint64(5)
	var sa, sb bytes.Buffer
	for _, x := range []struct {
		s   types.CommitMultiStore
		buf *bytes.Buffer
	}{{p.ours, &sa}, {p.oracle, &sb}} {
		w := protoio.NewDelimitedWriter(x.buf)
		if err := x.s.Snapshot(height, w); err != nil {
			t.Fatal(err)
		}
	}
	if sa.Len() == 0 || !bytes.Equal(sa.Bytes(), sb.Bytes()) {
		t.Fatalf("snapshot streams differ: %d bytes, rootmulti %d", sa.Len(), sb.Len())
	}
	want, err := p.ours.GetCommitInfo(int64(height))
	if err != nil {
		t.Fatal(err)
	}
	// restore rootmulti's stream into a new multistore
	restored, err := compat.NewMultiStore(t.TempDir(), nil, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	mountAll(restored, p.keys, smallMount)
	if err := restored.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	rd := protoio.NewDelimitedReader(bytes.NewReader(sb.Bytes()), 64<<20)
	if _, err := restored.Restore(height, snapshottypes.CurrentFormat, rd); err != nil {
		t.Fatal(err)
	}
	if id := restored.LastCommitID(); id.Version != int64(height) || !bytes.Equal(id.Hash, want.Hash()) {
		t.Fatalf("restored at %v, want version %d hash %X", id, height, want.Hash())
	}
	if got := restored.GetKVStore(p.keys["a"]).Get([]byte("k001")); !bytes.Equal(got, mustGetAt(t, p.oracle, p.keys["a"], int64(height), []byte("k001"))) {
		t.Fatal("restored store differs")
	}
	restored.GetKVStore(p.keys["a"]).Set([]byte("after"), []byte("restore"))
	if id := restored.Commit(); id.Version != int64(height)+1 {
		t.Fatalf("first commit after restore is %d", id.Version)
	}
}

func mustGetAt(t *testing.T, s types.MultiStore, key types.StoreKey, version int64, k []byte) []byte {
	b, err := s.CacheMultiStoreWithVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return b.GetKVStore(key).Get(k)
}

// TestCloseLeavesNoGoroutines checks that the database's background work
// ends with Close.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	r := testutil.Rand(t)
	cfg := testConfig()
	cfg.AsyncCommitBuffer, cfg.Fsync, cfg.SnapshotInterval = 4, "grouped", 3
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, smallMount, nil)
	for i := 0; i < 20; i++ {
		ms.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%d", r.Intn(100)), []byte("v"))
		ms.Commit()
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestCloseBesideQueries closes the multistore while other goroutines open
// historical branches, query with proofs and write state-sync snapshots (the
// SDK's snapshot manager runs on a goroutine of its own that nothing joins
// before an app closes): no data race (run with -race), nothing but the
// errors of a closed store, and no file of the database left mapped or open
// once the goroutines are done.
func TestCloseBesideQueries(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := 0; round < rounds; round++ {
		dir := t.TempDir()
		keys := keyring{}
		cfg := testConfig()
		cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = 2, 2, 2
		ms := newOurs(t, dir, cfg, keys, smallMount, nil)
		r := rand.New(rand.NewSource(int64(round)))
		for v := 0; v < 12; v++ {
			for i := 0; i < 200; i++ {
				ms.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%04d", r.Intn(2000)), fmt.Appendf(nil, "v%d", r.Int()))
			}
			ms.Commit()
		}
		closed := func(x any) bool {
			err, ok := x.(error)
			return ok && (errors.Is(err, compat.ErrNotLoaded) || errors.Is(err, multitree.ErrClosed) ||
				errors.Is(err, compat.ErrVersionReleased))
		}
		// errors count only for calls that ended before Close began
		var closing atomic.Bool
		stop := make(chan struct{})
		errs := make(chan error, 3)
		var wg sync.WaitGroup
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					h := int64(7 + (n+g)%5) // rebuilt from a snapshot and the log: slow to open
					var err error
					func() {
						defer func() {
							if x := recover(); x != nil && !closed(x) {
								err = fmt.Errorf("panic: %v", x)
							}
						}()
						switch g {
						case 0:
							b, berr := ms.CacheMultiStoreWithVersion(h)
							if berr == nil {
								b.GetKVStore(keys["a"]).Get([]byte("k0001"))
							} else if !closed(berr) {
								err = berr
							}
						case 1:
							// a proven query of a store it cannot read
							// reports an empty proof, as rootmulti's
							_, err = ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("k0001"), Height: h, Prove: true})
						case 2:
							serr := ms.Snapshot(uint64(h), protoio.NewDelimitedWriter(io.Discard))
							if serr != nil && !closed(serr) {
								err = serr
							}
						}
					}()
					if err != nil && !closing.Load() {
						errs <- fmt.Errorf("goroutine %d, height %d: %w", g, h, err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(5+round) * time.Millisecond)
		closing.Store(true)
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if m, fds := mappedFiles(t, dir); m > 0 || fds > 0 {
			t.Fatalf("round %d: %d mappings and %d descriptors of the closed database remain", round, m, fds)
		}
	}
}

// TestZeroCopyListenerAcrossSwitch: with zero-copy reads, a value a block
// read from the snapshot and wrote under another key reaches the state
// listener (ADR-038) as a slice of the snapshot; BaseApp pops the change set
// after Commit, which may switch to a background rewrite's snapshot. The
// snapshot the block read from stays mapped until the next Commit ends, and
// is unmapped after it.
func TestZeroCopyListenerAcrossSwitch(t *testing.T) {
	keys := keyring{}
	cfg := testConfig()
	cfg.ZeroCopy, cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = true, 4, 0, 1
	dir := t.TempDir()
	ms := newOurs(t, dir, cfg, keys, mount{iavl: []string{"a"}}, nil)
	defer ms.Close()
	key := keys["a"]
	ms.AddListeners([]types.StoreKey{key})
	want := bytes.Repeat([]byte("value-of-k1 "), 400)
	st := ms.GetKVStore(key)
	st.Set([]byte("k1"), bytes.Clone(want))
	for i := 0; i < 200; i++ {
		st.Set(fmt.Appendf(nil, "f%04d", i), bytes.Repeat([]byte{byte(i)}, 100))
	}
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil { // k1 is read from snapshot 1
		t.Fatal(err)
	}
	old := filepath.Join(dir, "snapshot-00000000000000000001")
	mapped := func() bool {
		n, _ := mappedFiles(t, old)
		return n > 0
	}
	if !mapped() {
		t.Fatalf("%s is not mapped", old)
	}
	// commit until a Commit switches to the background rewrite of version
	// 5, each block copying k1's value (a slice of snapshot 1) to k2
	ms.PopStateCache()
	var changes []*types.StoreKVPair
	for v, deadline := 2, time.Now().Add(time.Minute); ms.DB().SnapshotVersion() == 1; v++ {
		if time.Now().After(deadline) {
			t.Fatal("no background rewrite was switched to")
		}
		if v > 5 {
			time.Sleep(time.Millisecond)
		}
		st = ms.GetKVStore(key)
		st.Set([]byte("k2"), st.Get([]byte("k1")))
		ms.Commit()
		changes = ms.PopStateCache()
	}
	// the unmapping of snapshot 1 would have happened by now
	for deadline := time.Now().Add(time.Second); mapped() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := listenedValueIs(changes, "k2", want); got != "true" {
		t.Fatalf("the listener's value of k2 after the switching Commit, equal to k1's: %s", got)
	}
	ms.Commit()
	for deadline := time.Now().Add(10 * time.Second); mapped(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s still mapped after the Commit that followed the switch", old)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mappedFiles counts the process's mappings and open descriptors of files
// under dir.
func mappedFiles(t *testing.T, dir string) (maps, fds int) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, dir) {
			maps++
		}
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir) {
			fds++
		}
	}
	return maps, fds
}

func TestConfig(t *testing.T) {
	if err := compat.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*compat.Config){
		func(c *compat.Config) { c.SnapshotInterval = 0 },
		func(c *compat.Config) { c.SnapshotKeepRecent = -1 },
		func(c *compat.Config) { c.AsyncCommitBuffer = -1 },
		func(c *compat.Config) { c.Fsync = "sometimes" },
		func(c *compat.Config) { c.QueryViews = 0 },
		func(c *compat.Config) { c.RewriteConcurrency = -2 },
		func(c *compat.Config) { c.RewriteRateLimit = -1 },
		func(c *compat.Config) { c.RewriteRateLimit = multitree.MinRewriteRateLimit - 1 },
		func(c *compat.Config) { c.OpenCheck = "sometimes" },
	} {
		c := compat.DefaultConfig()
		bad(&c)
		if err := c.Validate(); !errors.Is(err, compat.ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
		if _, err := compat.NewMultiStore(t.TempDir(), nil, c); err == nil {
			t.Errorf("NewMultiStore accepted %+v", c)
		}
	}
	for in, want := range map[string]wal.SyncPolicy{"": wal.SyncEveryCommit, " ": wal.SyncEveryCommit, "Grouped ": wal.SyncGrouped, "none": wal.SyncNone} {
		if got, err := compat.ParseFsync(in); err != nil || got != want {
			t.Errorf("ParseFsync(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]multitree.OpenCheck{"": multitree.OpenCheckBackground, " SYNC": multitree.OpenCheckSync, "none": multitree.OpenCheckNone} {
		if got, err := compat.ParseOpenCheck(in); err != nil || got != want {
			t.Errorf("ParseOpenCheck(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	c, err := compat.ConfigFromAppOptions(mapOptions{
		compat.FlagEnable: true, compat.FlagSnapshotInterval: "500", compat.FlagSnapshotKeepRecent: int64(3),
		compat.FlagAsyncCommitBuffer: 10, compat.FlagFsync: "grouped", compat.FlagZeroCopy: "true",
		compat.FlagRewriteRateLimit: "50000000", compat.FlagOpenCheck: "Sync",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := compat.DefaultConfig()
	want.Enable, want.SnapshotInterval, want.SnapshotKeepRecent, want.AsyncCommitBuffer, want.Fsync, want.ZeroCopy = true, 500, 3, 10, "grouped", true
	want.RewriteRateLimit, want.OpenCheck = 50_000_000, "Sync"
	if c != want {
		t.Fatalf("config %+v, want %+v", c, want)
	}
	// errors name the key as the section's other errors do, as app.toml
	// spells it under [memiavl]
	if _, err := compat.ConfigFromAppOptions(mapOptions{compat.FlagSnapshotInterval: "often"}); !errors.Is(err, compat.ErrInvalidConfig) ||
		!strings.HasPrefix(err.Error(), "compat: invalid memiavl config: snapshot-interval: ") {
		t.Fatalf("bad interval: %v", err)
	}
	if _, err := compat.ConfigFromAppOptions(mapOptions{compat.FlagSnapshotInterval: 0}); !errors.Is(err, compat.ErrInvalidConfig) ||
		!strings.HasPrefix(err.Error(), "compat: invalid memiavl config: snapshot-interval ") {
		t.Fatalf("zero interval: %v", err)
	}
	// the app.toml template renders a section that reads back as the config
	cfg := compat.DefaultConfig()
	cfg.Enable, cfg.SnapshotInterval, cfg.Fsync, cfg.ZeroCopy, cfg.QueryViews = true, 250, "none", true, 3
	cfg.RewriteRateLimit, cfg.OpenCheck = 8<<20, "none"
	var out bytes.Buffer
	tmpl := template.Must(template.New("app").Parse(compat.ConfigTemplate))
	if err := tmpl.Execute(&out, struct{ MemIAVL compat.Config }{cfg}); err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(&out); err != nil {
		t.Fatalf("rendered template is not TOML: %v\n%s", err, out.String())
	}
	back, err := compat.ConfigFromAppOptions(v)
	if err != nil {
		t.Fatal(err)
	}
	if back != cfg {
		t.Fatalf("config read back as %+v, want %+v", back, cfg)
	}
}

type mapOptions map[string]any

func (m mapOptions) Get(key string) any { return m[key] }

// TestLoadVersionWithAsyncLog loads versions just committed in the same
// process while the asynchronous log may not have written them yet: the
// loads must succeed, as they do with rootmulti.
func TestLoadVersionWithAsyncLog(t *testing.T) {
	cfg := testConfig()
	cfg.AsyncCommitBuffer, cfg.Fsync, cfg.SnapshotInterval = 8, "none", 1000
	keys := keyring{}
	ms := newOurs(t, t.TempDir(), cfg, keys, smallMount, nil)
	defer ms.Close()
	for round := 0; round < 3; round++ {
		var last int64
		for i := 0; i < 5; i++ {
			ms.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%d-%d", round, i), []byte("v"))
			last = ms.Commit().Version
		}
		if err := ms.LoadVersion(last); err != nil {
			t.Fatalf("round %d: LoadVersion(%d): %v", round, last, err)
		}
		if got := ms.LastCommitID().Version; got != last {
			t.Fatalf("round %d: version %d after LoadVersion(%d)", round, got, last)
		}
		if v := ms.GetKVStore(keys["a"]).Get(fmt.Appendf(nil, "k%d-4", round)); string(v) != "v" {
			t.Fatalf("round %d: value %q after the load", round, v)
		}
	}
}

// TestResultsAreTheCallers changes what the multistore hands out (commit
// infos, commit IDs, working hashes), as a caller may, and checks that the
// multistore's later answers do not change, as rootmulti's, which builds
// them afresh on each call, do not. (The stores' commit IDs are changed on
// ours only: an iavl store's shares its tree's root hash.)
func TestResultsAreTheCallers(t *testing.T) {
	p := newPair(t, smallMount)
	scribble := func(s types.CommitMultiStore) {
		if info, err := getCommitInfo(s, 2); err == nil {
			info.StoreInfos[0].Name = "zzz"
			info.StoreInfos[0].CommitId.Hash[0] ^= 0xff
		}
		if ms, ok := s.(*compat.MultiStore); ok {
			if info := ms.LastCommitInfo(); info != nil {
				info.StoreInfos[1].CommitId.Hash[0] ^= 0xff
			}
		}
		id := s.LastCommitID()
		id.Hash[0] ^= 0xff
		if s == p.oracle {
			return // an iavl store's LastCommitID shares its tree's hash
		}
		for _, name := range smallMount.iavl {
			sid := s.GetCommitKVStore(p.keys[name]).LastCommitID()
			sid.Hash[0] ^= 0xff
		}
	}
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		scribble(s) // at version 0
	}
	p.sameLastCommit()
	p.commit(map[string][][2][]byte{"a": {{[]byte("k"), []byte("v")}}})
	p.commit(map[string][][2][]byte{"b": {{[]byte("k"), []byte("v")}}})
	for _, s := range []types.CommitMultiStore{p.ours, p.oracle} {
		scribble(s)
	}
	p.sameLastCommit()
	for _, name := range smallMount.iavl {
		a, b := p.ours.GetCommitKVStore(p.keys[name]).LastCommitID(), p.oracle.GetCommitKVStore(p.keys[name]).LastCommitID()
		if a.String() != b.String() {
			t.Errorf("store %s: last commit %v, rootmulti %v", name, a, b)
		}
	}
	a, err := getCommitInfo(p.ours, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := getCommitInfo(p.oracle, 2)
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("commit info of 2:\n ours %s\n root %s", a, b)
	}
	// the proof of a query at 2 is built from the same commit info
	req := func() *types.RequestQuery {
		return &types.RequestQuery{Path: "/a/key", Data: []byte("k"), Height: 2, Prove: true}
	}
	ra, err := p.ours.Query(req())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := p.oracle.Query(req())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*ra) != fmt.Sprint(*rb) {
		t.Errorf("proven query at 2:\n ours %v\n root %v", *ra, *rb)
	}
}

// TestQueryWithoutDatabase: a query before the multistore is loaded fails
// as rootmulti's (no store is loaded yet), and one after it is closed
// with ErrNotLoaded, with or without a proof (a proven query's other
// failures give rootmulti's empty-proof error, which would hide it); writes buffered before Close make a read panic with
// an error naming the store and the closed database.
func TestQueryWithoutDatabase(t *testing.T) {
	dir := t.TempDir()
	keys := keyring{}
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	mountAll(ms, keys, smallMount)
	query := func(when string, want error) {
		t.Helper()
		for _, prove := range []bool{false, true} {
			_, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("k"), Prove: prove})
			if !errors.Is(err, want) {
				t.Errorf("query %s (prove %v): %v; want %v", when, prove, err, want)
			}
		}
	}
	query("before the load", types.ErrUnknownRequest)
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	store := ms.GetKVStore(keys["a"])
	store.Set([]byte("k"), []byte("v"))
	ms.Commit()
	store.Set([]byte("k2"), []byte("v2"))
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	query("after Close", compat.ErrNotLoaded)
	func() {
		defer func() {
			err, _ := recover().(error)
			if !errors.Is(err, multitree.ErrClosed) || !strings.Contains(err.Error(), `store "a"`) {
				t.Errorf("a read after Close with a buffered write: panic %v", err)
			}
		}()
		store.Get([]byte("k"))
	}()
}
