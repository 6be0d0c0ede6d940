package multitree

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// rbBlock is the deterministic content of version v on branch b.
func rbBlock(b, v int64) []wal.ChangeSet {
	r := rand.New(rand.NewSource(b*7919 + v*104729))
	var css []wal.ChangeSet
	for _, name := range []string{"a", "b"} {
		cs := wal.ChangeSet{Name: name}
		n := 1 + r.Intn(6)
		for i := 0; i < n; i++ {
			k := make([]byte, 4)
			binary.BigEndian.PutUint32(k, uint32(r.Intn(40)))
			if r.Intn(4) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k})
				continue
			}
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: []byte(fmt.Sprintf("b%d-v%d-%d", b, v, i))})
		}
		css = append(css, cs)
	}
	return css
}

type rbModel struct {
	latest int64
	branch map[int64]int64  // version -> branch of its content
	hash   map[int64][]byte // version -> app hash
}

// TestRollbackModel runs random sequences of commits, reopens at older
// versions with and without Rollback, read-only opens, RewriteSnapshot and
// ViewAt against a model of the committed versions: a kept version's hash
// never changes, a re-commit of identical content gives the same hash, one
// of other content fails with ErrConflict, a rollback forgets the later
// versions.
func TestRollbackModel(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 12
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { rbRunModel(t, seed) })
	}
}

func rbRunModel(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	m := &rbModel{branch: map[int64]int64{}, hash: map[int64][]byte{}}
	nextBranch := int64(100)
	baseOpts := func() Options {
		o := Options{
			SnapshotInterval:   []int64{-1, 1, 2, 3, 5}[r.Intn(5)],
			SnapshotKeepRecent: r.Intn(3),
			AsyncCommitBuffer:  []int{0, 0, 3}[r.Intn(3)],
			OpenCheck:          OpenCheck(r.Intn(3)),
			ViewCacheSize:      []int{-1, 0, 2}[r.Intn(3)],
		}
		return o
	}
	o := baseOpts()
	o.CreateIfMissing, o.InitialStores = true, []string{"a", "b"}
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after %v: %s", seed, log, fmt.Sprintf(format, args...))
	}
	checkViews := func(db *DB) {
		cur := db.Version()
		for v := int64(1); v <= cur; v++ {
			view, err := db.ViewAt(v)
			if err != nil {
				if errors.Is(err, ErrVersion) {
					snaps, _ := SnapshotVersions(dir)
					if len(snaps) > 0 && v >= snaps[0] {
						fail("ViewAt(%d) ErrVersion with snapshots %v: %v", v, snaps, err)
					}
					continue
				}
				fail("ViewAt(%d): %v", v, err)
			}
			if !bytes.Equal(view.CommitInfo().Hash(), m.hash[v]) {
				view.Release()
				fail("ViewAt(%d) hash differs from the model", v)
			}
			view.Release()
		}
		if _, err := db.ViewAt(cur + 1); !errors.Is(err, ErrVersion) {
			fail("ViewAt(working %d): %v", cur+1, err)
		}
	}
	for step := 0; step < 50; step++ {
		switch op := r.Intn(10); {
		case op < 5: // commit: the logged content when re-committing, else new
			v := db.WorkingVersion()
			b, ok := m.branch[v]
			conflict := false
			if !ok {
				b = nextBranch
			} else if r.Intn(6) == 0 {
				b, conflict = nextBranch+1000, true
			}
			if err := db.ApplyChangeSets(rbBlock(b, v)); err != nil {
				fail("apply %d: %v", v, err)
			}
			info, err := db.Commit()
			log = append(log, fmt.Sprintf("commit%d/b%d", v, b))
			if conflict {
				if !errors.Is(err, ErrConflict) {
					fail("conflicting re-commit of %d: %v", v, err)
				}
				// reopen to drop the pending changes
				db.Close()
				o := baseOpts()
				o.TargetVersion = v - 1
				if db, err = Open(dir, o); err != nil {
					fail("reopen at %d: %v", v-1, err)
				}
				log = append(log, fmt.Sprintf("reopen@%d", v-1))
				continue
			}
			if err != nil && !errors.Is(err, ErrRewrite) {
				fail("commit %d: %v", v, err)
			}
			if ok {
				if !bytes.Equal(info.Hash(), m.hash[v]) {
					fail("re-commit of %d gave another hash", v)
				}
			} else {
				m.branch[v], m.hash[v] = b, info.Hash()
				m.latest = v
			}
		case op == 5: // reopen at an older version, maybe with a rollback
			if db.Version() < 2 {
				continue
			}
			if err := db.Close(); err != nil && !errors.Is(err, ErrRewrite) {
				fail("close: %v", err)
			}
			db = nil
			o := baseOpts()
			o.TargetVersion = 1 + r.Int63n(m.latest)
			o.Rollback = r.Intn(2) == 0
			snaps, _ := SnapshotVersions(dir)
			log = append(log, fmt.Sprintf("open@%d rb=%v snaps=%v", o.TargetVersion, o.Rollback, snaps))
			db, err = Open(dir, o)
			if err != nil {
				if errors.Is(err, ErrVersion) && o.TargetVersion < snaps[0] {
					if db, err = Open(dir, baseOpts()); err != nil {
						fail("plain reopen: %v", err)
					}
					if db.Version() != m.latest {
						fail("plain reopen at %d, want %d", db.Version(), m.latest)
					}
					continue
				}
				fail("open at %d rb=%v: %v", o.TargetVersion, o.Rollback, err)
			}
			if db.Version() != o.TargetVersion || !bytes.Equal(db.LastCommitInfo().Hash(), m.hash[o.TargetVersion]) {
				fail("opened at %d, hash ok %v", db.Version(), bytes.Equal(db.LastCommitInfo().Hash(), m.hash[o.TargetVersion]))
			}
			if o.Rollback {
				for v := o.TargetVersion + 1; v <= m.latest; v++ {
					delete(m.branch, v)
					delete(m.hash, v)
				}
				m.latest = o.TargetVersion
				nextBranch++
			}
			if lv, err := LatestVersion(dir); err != nil || lv != m.latest {
				fail("LatestVersion %d %v, want %d", lv, err, m.latest)
			}
		case op == 6: // plain reopen
			if err := db.Close(); err != nil && !errors.Is(err, ErrRewrite) {
				fail("close: %v", err)
			}
			db = nil
			log = append(log, "reopen")
			if db, err = Open(dir, baseOpts()); err != nil {
				fail("reopen: %v", err)
			}
			if db.Version() != m.latest || m.latest > 0 && !bytes.Equal(db.LastCommitInfo().Hash(), m.hash[m.latest]) {
				fail("reopened at %d, want %d", db.Version(), m.latest)
			}
		case op == 7:
			log = append(log, fmt.Sprintf("rewrite@%d", db.Version()))
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				fail("rewrite: %v", err)
			}
		case op == 8: // read-only at a random version
			if m.latest == 0 {
				continue
			}
			tv := 1 + r.Int63n(m.latest)
			ro, err := Open(dir, Options{ReadOnly: true, TargetVersion: tv, OpenCheck: OpenCheckSync})
			if err != nil {
				snaps, _ := SnapshotVersions(dir)
				if errors.Is(err, ErrVersion) && tv < snaps[0] {
					continue
				}
				if errors.Is(err, ErrVersion) && db.opts.AsyncCommitBuffer > 0 {
					continue // not written yet
				}
				fail("read-only at %d (snaps %v): %v", tv, snaps, err)
			}
			if ro.Version() != tv || !bytes.Equal(ro.LastCommitInfo().Hash(), m.hash[tv]) {
				fail("read-only at %d: version %d", tv, ro.Version())
			}
			ro.Close()
		case op == 9:
			checkViews(db)
		}
	}
	checkViews(db)
	if err := db.Close(); err != nil && !errors.Is(err, ErrRewrite) {
		t.Fatal(err)
	}
	db = nil
	if _, err := Verify(dir); err != nil {
		fail("verify: %v", err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		fail("final open: %v", err)
	}
	if db.Version() != m.latest || m.latest > 0 && !bytes.Equal(db.LastCommitInfo().Hash(), m.hash[m.latest]) {
		fail("final open at %d, want %d", db.Version(), m.latest)
	}
}
