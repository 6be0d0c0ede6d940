package multitree

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func rvSet(k, v string) wal.KVPair { return wal.KVPair{Key: []byte(k), Value: []byte(v)} }

// TestMisuseApplyChangeSets: unknown store, nil key, nil value refuse the
// whole call; duplicate stores apply in order; nil and empty change sets are
// no change; the results survive a reopen (log replay) and a rewrite.
func TestMisuseApplyChangeSets(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 1,
		SnapshotKeepRecent: 0, RewriteConcurrency: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	for _, css := range [][]wal.ChangeSet{
		{{Name: "a", Pairs: []wal.KVPair{rvSet("x", "1")}}, {Name: "nope", Pairs: []wal.KVPair{rvSet("x", "1")}}},
		{{Name: "a", Pairs: []wal.KVPair{rvSet("x", "1"), {Key: nil, Value: []byte("v")}}}},
		{{Name: "a", Pairs: []wal.KVPair{rvSet("x", "1"), {Key: nil, Delete: true}}}},
		{{Name: "b", Pairs: []wal.KVPair{rvSet("x", "1")}}, {Name: "a", Pairs: []wal.KVPair{{Key: []byte("y")}}}},
	} {
		if err := db.ApplyChangeSets(css); err == nil {
			t.Fatalf("%v accepted", css)
		}
	}
	if got, _ := db.Get("a", []byte("x")); got != nil {
		t.Fatalf("refused call changed a: %q", got)
	}
	if got, _ := db.Get("b", []byte("x")); got != nil {
		t.Fatalf("refused call changed b: %q", got)
	}
	if err := db.ApplyChangeSets(nil); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a"}, {Name: "b", Pairs: []wal.KVPair{}}}); err != nil {
		t.Fatal(err)
	}
	// an empty working version
	empty := db.WorkingCommitInfo().Hash()
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"c"}}); err != nil {
		t.Fatalf("upgrades after no changes: %v", err)
	}
	w1 := db.WorkingCommitInfo().Hash()
	if bytes.Equal(w1, empty) {
		t.Fatal("adding a store did not change the working hash")
	}
	css := []wal.ChangeSet{
		{Name: "a", Pairs: []wal.KVPair{rvSet("k", "1"), rvSet("j", "1"), rvSet("", "empty-key"), rvSet("ev", "")}},
		{Name: "b", Pairs: []wal.KVPair{rvSet("k", "b1")}},
		{Name: "a", Pairs: []wal.KVPair{rvSet("k", "2"), {Key: []byte("j"), Delete: true}}},
		{Name: "c", Pairs: []wal.KVPair{rvSet("z", "c")}},
		{Name: "a", Pairs: []wal.KVPair{rvSet("k", "3"), {Key: []byte("absent"), Delete: true}}},
	}
	if err := db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	w2 := db.WorkingCommitInfo()
	w2b := db.WorkingCommitInfo()
	if !bytes.Equal(w2.Hash(), w2b.Hash()) {
		t.Fatal("WorkingCommitInfo differs between two calls")
	}
	if err := db.Set("a", []byte("late"), []byte("l")); err != nil {
		t.Fatal(err)
	}
	w3 := db.WorkingCommitInfo()
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(info.Hash(), w3.Hash()) || info.Version != w3.Version {
		t.Fatalf("commit %d %X, working info %d %X", info.Version, info.Hash(), w3.Version, w3.Hash())
	}
	// the same state built by one tree per store, without intermediate hashes
	ref := map[string]*memiavl.Tree{}
	for _, n := range []string{"a", "b", "c"} {
		ref[n], _ = memiavl.New(memiavl.Options{})
	}
	for _, kv := range [][3]string{{"a", "k", "3"}, {"a", "", "empty-key"}, {"a", "ev", ""}, {"a", "late", "l"}, {"b", "k", "b1"}, {"c", "z", "c"}} {
		ref[kv[0]].Set([]byte(kv[1]), []byte(kv[2]))
	}
	hashes := map[string][]byte{}
	for n, tr := range ref {
		h, _, err := tr.SaveVersion()
		if err != nil {
			t.Fatal(err)
		}
		hashes[n] = h
	}
	if want := commitInfoOf(hashes, 1).Hash(); !bytes.Equal(want, info.Hash()) {
		t.Fatalf("app hash %X, reference %X", info.Hash(), want)
	}
	waitRewrite(db)
	if _, err := db.Commit(); err != nil { // switches to the rewrite of 1
		t.Fatal(err)
	}
	waitRewrite(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, target := range []int64{0, 1} {
		db, err = Open(dir, Options{TargetVersion: target})
		if err != nil {
			t.Fatalf("reopen at %d: %v", target, err)
		}
		vw, err := db.ViewAt(1)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(vw.CommitInfo().Hash(), info.Hash()) {
			t.Fatalf("target %d: version 1 hash differs after reopen", target)
		}
		for _, kv := range [][3]string{{"a", "k", "3"}, {"a", "", "empty-key"}, {"a", "ev", ""}, {"a", "j", "<nil>"}, {"c", "z", "c"}} {
			got, err := vw.Get(kv[0], []byte(kv[1]))
			if err != nil {
				t.Fatal(err)
			}
			if s := string(got); got == nil && kv[2] != "<nil>" || got != nil && s != kv[2] {
				t.Errorf("%s/%q = %q, want %q", kv[0], kv[1], got, kv[2])
			}
		}
		vw.Release()
		db.Close()
	}
}

// TestMisuseRecommitEmptyAtTarget: right after an Open at an older
// TargetVersion, a Commit without changes of a version the log holds with
// changes is refused with ErrConflict and changes nothing; the right changes
// are then accepted.
func TestMisuseRecommitEmptyAtTarget(t *testing.T) {
	dir := t.TempDir()
	const seed = 5
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 2, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for v := int64(1); v <= 6; v++ {
		hashes[v] = rvCommit(t, db, seed)
		waitRewrite(db)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{TargetVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if info, err := db.Commit(); !errors.Is(err, ErrConflict) {
		t.Fatalf("empty re-commit of 4: %v, %v", info, err)
	}
	if db.Version() != 3 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[3]) {
		t.Fatalf("after refused commit at %d", db.Version())
	}
	for v := int64(4); v <= 6; v++ {
		if got := rvCommit(t, db, seed); !bytes.Equal(got, hashes[v]) {
			t.Fatalf("re-commit %d hash differs", v)
		}
	}
	// a new version after the log
	rvCommit(t, db, seed)
	waitRewrite(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := newCrashRef(seed)
	checkRecovered(t, db, 7, ref)
}

// TestMisuseViewsAfterClose: views taken before Close read until they
// are released, after Close; the database's own calls report ErrClosed.
func TestMisuseViewsAfterClose(t *testing.T) {
	dir := t.TempDir()
	const seed = 3
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 4; v++ {
		rvCommit(t, db, seed)
	}
	waitRewrite(db)
	latest, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	old, err := db.ViewAt(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, vw := range []*View{latest, old} {
		got, err := vw.Get("bank", []byte("version"))
		if err != nil || len(got) != 8 {
			t.Fatalf("view %d after Close: %q, %v", vw.Version(), got, err)
		}
		it := vw.Tree("staking").Iterator(nil, nil, true)
		n := 0
		for ; it.Valid(); it.Next() {
			n++
		}
		if err := it.Error(); err != nil || n == 0 {
			t.Fatalf("iterate after Close: %d, %v", n, err)
		}
		vw.Release()
		vw.Release()
		if _, err := vw.Get("bank", []byte("version")); !errors.Is(err, ErrReleased) {
			t.Fatalf("released: %v", err)
		}
	}
	if _, err := db.View(); !errors.Is(err, ErrClosed) {
		t.Fatalf("View after Close: %v", err)
	}
	if _, err := db.ViewAt(2); !errors.Is(err, ErrClosed) {
		t.Fatalf("ViewAt after Close: %v", err)
	}
	if _, err := db.Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
	if db.WorkingCommitInfo() != nil {
		t.Fatal("WorkingCommitInfo after Close")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
