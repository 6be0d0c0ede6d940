package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

type upgModel map[string]map[string]string

func (m upgModel) clone() upgModel {
	c := upgModel{}
	for s, kv := range m {
		c[s] = map[string]string{}
		for k, v := range kv {
			c[s][k] = v
		}
	}
	return c
}

// apply applies u as the database documents: deletions, renames in order,
// additions; it fails when one step is impossible.
func (m upgModel) apply(u wal.Upgrades) (upgModel, bool) {
	c := m.clone()
	for _, d := range u.Deleted {
		if _, ok := c[d]; !ok {
			return nil, false
		}
		delete(c, d)
	}
	for _, r := range u.Renamed {
		kv, ok := c[r.OldName]
		if _, exists := c[r.NewName]; !ok || exists || r.NewName == "" {
			return nil, false
		}
		delete(c, r.OldName)
		c[r.NewName] = kv
	}
	for _, a := range u.Added {
		if _, exists := c[a]; exists || a == "" {
			return nil, false
		}
		c[a] = map[string]string{}
	}
	return c, true
}

func upgCheckModel(t *testing.T, db *multitree.DB, m upgModel, what string) {
	t.Helper()
	var names []string
	for s := range m {
		names = append(names, s)
	}
	sort.Strings(names)
	if got := db.StoreNames(); fmt.Sprint(got) != fmt.Sprint(names) {
		t.Fatalf("%s: stores %q, model %q", what, got, names)
	}
	for s, kv := range m {
		tr := db.WorkingTree(s)
		n := 0
		for it := tr.Iterator(nil, nil, true); it.Valid(); it.Next() {
			if kv[string(it.Key())] != string(it.Value()) {
				t.Fatalf("%s: store %q key %q = %q, model %q", what, s, it.Key(), it.Value(), kv[string(it.Key())])
			}
			n++
		}
		if n != len(kv) {
			t.Fatalf("%s: store %q has %d keys, model %d", what, s, n, len(kv))
		}
	}
}

// TestUpgradeModel drives random store upgrades (valid and invalid,
// in one or two calls), writes, commits, reopens, writer opens at an older
// version that re-commit the logged versions, rollbacks and rewrites,
// checking the stores against a model of the documented semantics, that
// a refused upgrade changes nothing, and the app hashes against the first
// commit of each version.
func TestUpgradeModel(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { upgUpgradeModel(t, seed) })
	}
}

func upgUpgradeModel(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	pool := []string{"a", "b", "c", "d", "e", "f"}
	opts := multitree.Options{SnapshotInterval: int64(1 + r.Intn(4)), SnapshotKeepRecent: r.Intn(3), AsyncCommitBuffer: 4 * r.Intn(2)}
	copts := opts
	copts.CreateIfMissing, copts.InitialStores = true, []string{"a", "b"}
	db := upgOpen(t, dir, copts)
	defer func() { db.Close() }()
	multitree.DelayRewrites(db, 2)
	m := upgModel{"a": {}, "b": {}}
	models := map[int64]upgModel{0: m.clone()}
	entries := map[int64][]func(*multitree.DB) error{} // how each version was made
	hashes := map[int64][]byte{}
	randName := func() string { return pool[r.Intn(len(pool))] }
	randUp := func() wal.Upgrades {
		var u wal.Upgrades
		for i := r.Intn(2); i > 0; i-- {
			u.Deleted = append(u.Deleted, randName())
		}
		for i := r.Intn(3); i > 0; i-- {
			u.Renamed = append(u.Renamed, wal.RenamedStore{OldName: randName(), NewName: randName()})
		}
		for i := r.Intn(2); i > 0; i-- {
			u.Added = append(u.Added, randName())
		}
		return u
	}
	for step := 0; step < 80; step++ {
		v := db.WorkingVersion()
		var ops []func(*multitree.DB) error
		if r.Intn(3) == 0 {
			for calls := 1 + r.Intn(2); calls > 0; calls-- {
				u := randUp()
				before := db.WorkingCommitInfo().Hash()
				err := db.ApplyUpgrades(u)
				next, ok := m.apply(u)
				if err != nil {
					if ok && !errors.Is(err, multitree.ErrConflict) {
						t.Fatalf("v%d: %+v refused: %v (model accepts)", v, u, err)
					}
					if !bytes.Equal(before, db.WorkingCommitInfo().Hash()) {
						t.Fatalf("v%d: refused %+v changed the working hash", v, u)
					}
					upgCheckModel(t, db, m, "after a refused upgrade")
					continue
				}
				if !ok {
					t.Fatalf("v%d: %+v accepted, model refuses", v, u)
				}
				m = next
				uu := u
				ops = append(ops, func(db *multitree.DB) error { return db.ApplyUpgrades(uu) })
				upgCheckModel(t, db, m, "after an upgrade")
			}
		}
		var names []string
		for s := range m {
			names = append(names, s)
		}
		sort.Strings(names)
		for i := r.Intn(6); i > 0 && len(names) > 0; i-- {
			s := names[r.Intn(len(names))]
			k := fmt.Sprint("k", r.Intn(8))
			if r.Intn(4) == 0 {
				delete(m[s], k)
				ops = append(ops, func(db *multitree.DB) error { return db.Delete(s, []byte(k)) })
				if err := db.Delete(s, []byte(k)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			val := fmt.Sprint("v", v, "-", i)
			m[s][k] = val
			ops = append(ops, func(db *multitree.DB) error { return db.Set(s, []byte(k), []byte(val)) })
			if err := db.Set(s, []byte(k), []byte(val)); err != nil {
				t.Fatal(err)
			}
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
		if info.Version != v {
			t.Fatalf("committed %d, want %d", info.Version, v)
		}
		hashes[v], models[v], entries[v] = info.Hash(), m.clone(), ops
		upgCheckModel(t, db, m, fmt.Sprint("after commit ", v))
		switch r.Intn(12) {
		case 0: // reopen
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = upgOpen(t, dir, opts)
			multitree.DelayRewrites(db, 2)
			if db.Version() != v || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[v]) {
				t.Fatalf("reopened at %d, want %d", db.Version(), v)
			}
			upgCheckModel(t, db, m, "after reopen")
		case 1: // writer at an older version, re-committing the logged ones
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			target := max(1, v-int64(1+r.Intn(4)))
			to := opts
			to.TargetVersion = target
			db2, err := multitree.Open(dir, to)
			if err != nil {
				if errors.Is(err, multitree.ErrVersion) {
					db = upgOpen(t, dir, opts)
					multitree.DelayRewrites(db, 2)
					continue
				}
				t.Fatal(err)
			}
			db = db2
			multitree.DelayRewrites(db, 2)
			if !bytes.Equal(db.LastCommitInfo().Hash(), hashes[target]) {
				t.Fatalf("opened at %d with another hash", target)
			}
			upgCheckModel(t, db, models[target], fmt.Sprint("at target ", target))
			if target == v {
				break
			}
			for w := target + 1; w <= v; w++ {
				for _, op := range entries[w] {
					if err := op(db); err != nil {
						t.Fatal(err)
					}
				}
				info, err := db.Commit()
				if err != nil || !bytes.Equal(info.Hash(), hashes[w]) {
					t.Fatalf("re-commit of %d: %v", w, err)
				}
			}
			upgCheckModel(t, db, m, "after the re-commits")
		case 2: // rollback
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			target := max(1, v-int64(1+r.Intn(4)))
			to := opts
			to.TargetVersion, to.Rollback = target, true
			db2, err := multitree.Open(dir, to)
			if err != nil {
				if errors.Is(err, multitree.ErrVersion) {
					db = upgOpen(t, dir, opts)
					multitree.DelayRewrites(db, 2)
					continue
				}
				t.Fatal(err)
			}
			db = db2
			multitree.DelayRewrites(db, 2)
			m = models[target].clone()
			upgCheckModel(t, db, m, fmt.Sprint("after rollback to ", target))
		case 3:
			// (a delayed background rewrite waits for commits: bound the wait)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := db.RewriteSnapshot(ctx)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
		case 4: // a historical view
			w := max(1, v-int64(r.Intn(5)))
			vw, err := db.ViewAt(w)
			if err == nil {
				if !bytes.Equal(vw.CommitInfo().Hash(), hashes[w]) {
					t.Fatalf("ViewAt(%d) hash differs", w)
				}
				var names []string
				for s := range models[w] {
					names = append(names, s)
				}
				sort.Strings(names)
				if fmt.Sprint(vw.StoreNames()) != fmt.Sprint(names) {
					t.Fatalf("ViewAt(%d) stores %v, model %v", w, vw.StoreNames(), names)
				}
				vw.Release()
			} else if !errors.Is(err, multitree.ErrVersion) {
				t.Fatalf("ViewAt(%d): %v", w, err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := multitree.Verify(dir); err != nil {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
