package multitree

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func closeOK(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPendingCoalescesRewrittenKeys: a key set again and again in one
// version through Set (a counter updated by every transaction), or through
// ApplyChangeSets (in calls of 1 to 8 pairs), is logged once, with its last value,
// wherever the repeats fall among other keys' writes, deletes and other
// stores' writes; a key deleted in between is logged as written (set,
// delete, set). The app hashes of the two databases are equal every
// version, and after a reopen that replays the log; the versions
// re-committed after a reopen at an older version with the coalesced
// writes are accepted as the logged ones.
func TestPendingCoalescesRewrittenKeys(t *testing.T) {
	r := testutil.Rand(t)
	stores := []string{"a", "b"}
	opts := Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: 7, SnapshotKeepRecent: 3}
	dirSet, dirApply := t.TempDir(), t.TempDir()
	viaSet, err := Open(dirSet, opts)
	if err != nil {
		t.Fatal(err)
	}
	viaApply, err := Open(dirApply, opts)
	if err != nil {
		t.Fatal(err)
	}
	type op struct {
		store string
		p     wal.KVPair
	}
	var blocks [][]op
	for v := 1; v <= 30; v++ {
		var ops []op
		for range 1 + r.Intn(60) {
			store := stores[r.Intn(2)]
			key := []byte(fmt.Sprintf("k%d", r.Intn(6)))
			if r.Intn(5) == 0 {
				ops = append(ops, op{store, wal.KVPair{Delete: true, Key: key}})
			} else {
				ops = append(ops, op{store, wal.KVPair{Key: key, Value: []byte(fmt.Sprintf("v%d-%d", v, r.Int()))}})
			}
		}
		blocks = append(blocks, ops)
	}
	apply := func(db *DB, ops []op, logged bool) {
		t.Helper()
		for logged && len(ops) > 0 {
			// calls of 1 to 8 pairs, consecutive ones of a store in one
			// change set: a repeated key within a call and across calls
			n := min(len(ops), 1+r.Intn(8))
			var css []wal.ChangeSet
			for _, o := range ops[:n] {
				if k := len(css); k == 0 || css[k-1].Name != o.store {
					css = append(css, wal.ChangeSet{Name: o.store})
				}
				css[len(css)-1].Pairs = append(css[len(css)-1].Pairs, o.p)
			}
			if err := db.ApplyChangeSets(css); err != nil {
				t.Fatal(err)
			}
			ops = ops[n:]
		}
		for _, o := range ops {
			var err error
			switch {
			case o.p.Delete:
				err = db.Delete(o.store, o.p.Key)
			default:
				err = db.Set(o.store, o.p.Key, o.p.Value)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// the pairs of ops with each run of sets of a key (no delete of it in
	// between) given to its first set
	coalesced := func(ops []op) []wal.ChangeSet {
		var css []wal.ChangeSet
		last := map[string][2]int{}
		for _, o := range ops {
			id := o.store + "/" + string(o.p.Key)
			if at, ok := last[id]; ok && !o.p.Delete && !css[at[0]].Pairs[at[1]].Delete {
				css[at[0]].Pairs[at[1]].Value = o.p.Value
				continue
			}
			if n := len(css); n == 0 || css[n-1].Name != o.store {
				css = append(css, wal.ChangeSet{Name: o.store})
			}
			c := len(css) - 1
			css[c].Pairs = append(css[c].Pairs, o.p)
			last[id] = [2]int{c, len(css[c].Pairs) - 1}
		}
		return css
	}
	hashes := map[int64][]byte{}
	for i, ops := range blocks {
		apply(viaSet, ops, false)
		apply(viaApply, ops, true)
		for name, db := range map[string]*DB{"Set": viaSet, "ApplyChangeSets": viaApply} {
			if got, want := fmt.Sprint(db.mu.pending.ChangeSets), fmt.Sprint(coalesced(ops)); got != want {
				t.Fatalf("version %d through %s: pending\n%s\nwant\n%s", i+1, name, got, want)
			}
		}
		a, err := viaSet.Commit()
		if err != nil {
			t.Fatal(err)
		}
		b, err := viaApply.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Hash(), b.Hash()) {
			t.Fatalf("version %d: app hash %X with coalesced writes, %X as given", a.Version, a.Hash(), b.Hash())
		}
		hashes[a.Version] = a.Hash()
	}
	closeOK(t, viaSet)
	closeOK(t, viaApply)

	// a reopen replays the coalesced log; one at version 20 takes the
	// coalesced writes of the logged versions again
	db, err := Open(dirSet, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(db.LastCommitInfo().Hash(), hashes[30]) {
		t.Fatalf("reopened: app hash %X, want %X", db.LastCommitInfo().Hash(), hashes[30])
	}
	closeOK(t, db)
	for _, dir := range []string{dirSet, dirApply} {
		db, err := Open(dir, Options{TargetVersion: 20})
		if err != nil {
			t.Fatal(err)
		}
		for v := 21; v <= 30; v++ {
			apply(db, blocks[v-1], false)
			info, err := db.Commit()
			if err != nil {
				t.Fatalf("re-commit of %d: %v", v, err)
			}
			if !bytes.Equal(info.Hash(), hashes[int64(v)]) {
				t.Fatalf("re-commit of %d: app hash %X, want %X", v, info.Hash(), hashes[int64(v)])
			}
		}
		closeOK(t, db)
	}
}

// TestPendingCoalescedHotKey: a key set 100,000 times in a version is
// logged as one pair: the values it supersedes are not kept until Commit.
func TestPendingCoalescedHotKey(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"bank"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		v := make([]byte, 64)
		r.Read(v)
		if err := db.Set("bank", []byte("supply"), v); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			if err := db.Set("bank", []byte(fmt.Sprint("acct", i)), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(db.mu.pending.ChangeSets); n != 1 || len(db.mu.pending.ChangeSets[0].Pairs) != 101 {
		t.Fatalf("pending entry: %d change sets, %d pairs, want 1 and 101", n, len(db.mu.pending.ChangeSets[0].Pairs))
	}
}
