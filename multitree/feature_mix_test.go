package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// mixModel is the stores of one version: store -> key -> value.
type mixModel map[string]map[string]string

func (m mixModel) clone() mixModel {
	c := mixModel{}
	for s, kv := range m {
		c[s] = map[string]string{}
		for k, v := range kv {
			c[s][k] = v
		}
	}
	return c
}

func (m mixModel) names() []string {
	var n []string
	for s := range m {
		n = append(n, s)
	}
	sort.Strings(n)
	return n
}

type mixOps struct {
	up  wal.Upgrades
	css []wal.ChangeSet
}

// mixRun drives a DB through random versions with random features, and
// checks every version it reads against the model and the app hash its
// Commit returned.
type mixRun struct {
	t      *testing.T
	r      *rand.Rand
	dir    string
	db     *multitree.DB
	opts   multitree.Options
	states map[int64]mixModel
	hashes map[int64][]byte
	ops    map[int64]mixOps
	last   int64
	cur    mixModel
	freed  []string // names deleted or renamed away
	nameN  int
	stats  map[string]int
	// delayed: DelayRewrites holds the background rewrites, which a
	// RewriteSnapshot would wait for forever
	delayed bool
}

func (z *mixRun) randOpts() multitree.Options {
	r := z.r
	o := multitree.Options{
		AsyncCommitBuffer:  []int{0, 1, 3, 16}[r.Intn(4)],
		Sync:               []wal.SyncPolicy{wal.SyncEveryCommit, wal.SyncGrouped, wal.SyncNone}[r.Intn(3)],
		SnapshotInterval:   []int64{1, 1, 2, 3, 5, -1}[r.Intn(6)],
		SnapshotKeepRecent: []int{0, 0, 1, 2, 5}[r.Intn(5)],
		ViewCacheSize:      []int{-1, 1, 2, 8}[r.Intn(4)],
		OpenCheck:          multitree.OpenCheck(r.Intn(3)),
		RewriteConcurrency: 1 + r.Intn(2),
	}
	if r.Intn(4) == 0 {
		o.RewriteRateLimit = multitree.MinRewriteRateLimit
	}
	if r.Intn(3) == 0 {
		o.WALSegmentSize = 4096
	}
	return o
}

func (z *mixRun) afterOpen() {
	if z.r.Intn(4) == 0 {
		multitree.SetMaxLoggedEntry(z.db, 40+z.r.Intn(200))
		z.stats["maxlogged"]++
	}
	if z.r.Intn(3) == 0 {
		multitree.DelayRewrites(z.db, int64(1+z.r.Intn(3)))
		z.stats["delay"]++
		z.delayed = true
	} else {
		z.delayed = false
	}
}

func (z *mixRun) checkView(v *multitree.View, ver int64, what string) {
	t := z.t
	t.Helper()
	m, ok := z.states[ver]
	if !ok {
		t.Fatalf("%s: version %d not in the model", what, ver)
	}
	if v.Version() != ver {
		t.Fatalf("%s: view at %d, want %d", what, v.Version(), ver)
	}
	if got := v.StoreNames(); fmt.Sprint(got) != fmt.Sprint(m.names()) {
		t.Fatalf("%s: version %d stores %q, model %q", what, ver, got, m.names())
	}
	if !bytes.Equal(v.CommitInfo().Hash(), z.hashes[ver]) {
		t.Fatalf("%s: version %d hash %X, committed %X", what, ver, v.CommitInfo().Hash(), z.hashes[ver])
	}
	for s, kv := range m {
		tr := v.Tree(s)
		n := 0
		for it := tr.Iterator(nil, nil, true); it.Valid(); it.Next() {
			if want, ok := kv[string(it.Key())]; !ok || want != string(it.Value()) {
				t.Fatalf("%s: version %d store %q key %q = %q, model %q (%v)", what, ver, s, it.Key(), it.Value(), want, ok)
			}
			n++
		}
		if n != len(kv) {
			t.Fatalf("%s: version %d store %q has %d keys, model %d", what, ver, s, n, len(kv))
		}
		for k, val := range kv {
			got, err := v.Get(s, []byte(k))
			if err != nil || string(got) != val {
				t.Fatalf("%s: version %d Get(%q,%q) = %q, %v; model %q", what, ver, s, k, got, err, val)
			}
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("%s: version %d store %q: %v", what, ver, s, err)
		}
	}
}

func (z *mixRun) newName() string {
	if len(z.freed) > 0 && z.r.Intn(2) == 0 {
		n := z.freed[z.r.Intn(len(z.freed))]
		if _, ok := z.cur[n]; !ok {
			return n
		}
	}
	z.nameN++
	return "s" + strconv.Itoa(z.nameN)
}

// randUpgrades makes a valid set of upgrades of cur.
func (z *mixRun) randUpgrades() wal.Upgrades {
	r := z.r
	var u wal.Upgrades
	names := z.cur.names()
	m := z.cur.clone()
	switch r.Intn(5) {
	case 0: // delete
		if len(names) > 1 {
			d := names[r.Intn(len(names))]
			u.Deleted = append(u.Deleted, d)
			delete(m, d)
		}
	case 1: // rename
		o := names[r.Intn(len(names))]
		n := z.newName()
		u.Renamed = append(u.Renamed, wal.RenamedStore{OldName: o, NewName: n})
	case 2: // add
		u.Added = append(u.Added, z.newName())
	case 3: // delete X and rename Y to X
		if len(names) > 1 {
			d, o := names[0], names[1]
			if r.Intn(2) == 0 {
				d, o = o, d
			}
			u.Deleted = append(u.Deleted, d)
			u.Renamed = append(u.Renamed, wal.RenamedStore{OldName: o, NewName: d})
		}
	case 4: // delete X and add X
		d := names[r.Intn(len(names))]
		u.Deleted = append(u.Deleted, d)
		u.Added = append(u.Added, d)
	}
	return u
}

func (z *mixRun) applyModelUpgrades(m mixModel, u wal.Upgrades) mixModel {
	c := m.clone()
	for _, d := range u.Deleted {
		delete(c, d)
		z.freed = append(z.freed, d)
	}
	for _, rn := range u.Renamed {
		c[rn.NewName] = c[rn.OldName]
		delete(c, rn.OldName)
		z.freed = append(z.freed, rn.OldName)
	}
	for _, a := range u.Added {
		c[a] = map[string]string{}
	}
	return c
}

func (z *mixRun) randChanges() []wal.ChangeSet {
	r := z.r
	names := z.cur.names()
	var css []wal.ChangeSet
	for i := 0; i < 1+r.Intn(3); i++ {
		s := names[r.Intn(len(names))]
		cs := wal.ChangeSet{Name: s}
		for j := 0; j < 1+r.Intn(6); j++ {
			k := []byte(fmt.Sprintf("k%02d", r.Intn(30)))
			if r.Intn(4) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Delete: true})
			} else {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: []byte(fmt.Sprintf("v%d-%d", z.last+1, r.Intn(1000)))})
			}
		}
		css = append(css, cs)
	}
	return css
}

func mixApplyModel(m mixModel, css []wal.ChangeSet) {
	for _, cs := range css {
		for _, p := range cs.Pairs {
			if p.Delete {
				delete(m[cs.Name], string(p.Key))
			} else {
				m[cs.Name][string(p.Key)] = string(p.Value)
			}
		}
	}
}

// applyOps applies ops to the db (by ApplyChangeSets or Set/Delete).
func (z *mixRun) applyOps(ops mixOps) {
	t := z.t
	t.Helper()
	if z.r.Intn(8) == 0 {
		_ = z.db.WorkingCommitInfo() // before the upgrades: hashes them
	}
	if err := z.db.ApplyUpgrades(ops.up); err != nil {
		t.Fatalf("ApplyUpgrades(%+v) at %d: %v", ops.up, z.db.WorkingVersion(), err)
	}
	if z.r.Intn(2) == 0 {
		if err := z.db.ApplyChangeSets(ops.css); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, cs := range ops.css {
		for _, p := range cs.Pairs {
			if z.r.Intn(10) == 0 {
				_ = z.db.WorkingCommitInfo() // between changes
			}
			var err error
			if p.Delete {
				err = z.db.Delete(cs.Name, p.Key)
			} else {
				err = z.db.Set(cs.Name, p.Key, p.Value)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (z *mixRun) step() {
	t := z.t
	t.Helper()
	var ops mixOps
	if z.r.Intn(6) == 0 {
		ops.up = z.randUpgrades()
		z.stats["upgrade"]++
	}
	next := z.applyModelUpgrades(z.cur, ops.up)
	z.cur = next
	ops.css = z.randChanges()
	z.applyOps(ops)
	mixApplyModel(z.cur, ops.css)
	var wci []byte
	if z.r.Intn(4) == 0 {
		wci = z.db.WorkingCommitInfo().Hash()
		if z.r.Intn(2) == 0 {
			if h := z.db.WorkingCommitInfo().Hash(); !bytes.Equal(h, wci) {
				t.Fatalf("WorkingCommitInfo twice: %X then %X", wci, h)
			}
		}
	}
	info, err := z.db.Commit()
	if err != nil {
		t.Fatalf("Commit at %d: %v", z.last+1, err)
	}
	if info.Version != z.last+1 {
		t.Fatalf("committed %d, want %d", info.Version, z.last+1)
	}
	if wci != nil && !bytes.Equal(wci, info.Hash()) {
		t.Fatalf("version %d: WorkingCommitInfo %X, Commit %X", info.Version, wci, info.Hash())
	}
	z.last = info.Version
	z.states[z.last] = z.cur.clone()
	z.hashes[z.last] = info.Hash()
	z.ops[z.last] = ops
	// the latest view
	v, err := z.db.View()
	if err != nil {
		t.Fatal(err)
	}
	z.checkView(v, z.last, "View")
	v.Release()
}

func (z *mixRun) randOlder() int64 {
	if z.last <= 1 {
		return z.last
	}
	back := int64(1 + z.r.Intn(int(min(z.last-1, 12))))
	if _, ok := z.hashes[z.last-back]; !ok {
		return z.last
	}
	return z.last - back
}

func (z *mixRun) viewAt() {
	latest := z.db.Version()
	if latest <= 1 {
		return
	}
	ver := latest - int64(1+z.r.Intn(int(min(latest-1, 12))))
	if _, ok := z.hashes[ver]; !ok {
		return
	}
	if ver < 1 {
		return
	}
	v, err := z.db.ViewAt(ver)
	if errors.Is(err, multitree.ErrVersion) {
		if sv := z.db.SnapshotVersion(); ver >= sv {
			z.t.Fatalf("ViewAt(%d) (last %d): %v, though the current snapshot is %d", ver, z.last, err, sv)
		}
		z.stats["viewAt-notkept"]++
		return
	}
	if err != nil {
		z.t.Fatalf("ViewAt(%d) (last %d): %v", ver, z.last, err)
	}
	z.checkView(v, ver, "ViewAt")
	v.Release()
	z.stats["viewAt"]++
}

func (z *mixRun) reopen(opts multitree.Options) {
	t := z.t
	t.Helper()
	if err := z.db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db, err := multitree.Open(z.dir, opts)
	if err != nil {
		t.Fatalf("reopen (%+v): %v", opts, err)
	}
	z.db, z.opts = db, opts
	z.afterOpen()
}

func (z *mixRun) checkLatest(what string) {
	z.t.Helper()
	if z.db.Version() != z.last {
		z.t.Fatalf("%s: at %d, want %d", what, z.db.Version(), z.last)
	}
	v, err := z.db.View()
	if err != nil {
		z.t.Fatal(err)
	}
	if z.last > 0 {
		z.checkView(v, z.last, what)
	}
	v.Release()
}

func (z *mixRun) rollback() {
	t := z.t
	ver := z.randOlder()
	if ver < 1 {
		return
	}
	if err := z.db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	opts := z.randOpts()
	ro := opts
	ro.TargetVersion, ro.Rollback = ver, true
	db, err := multitree.Open(z.dir, ro)
	if errors.Is(err, multitree.ErrVersion) {
		z.stats["rollback-notkept"]++
		db, err = multitree.Open(z.dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		z.db, z.opts = db, opts
		z.afterOpen()
		z.checkLatest("reopen after refused rollback")
		return
	}
	if err != nil {
		t.Fatalf("rollback to %d (last %d): %v", ver, z.last, err)
	}
	z.db, z.opts = db, opts
	z.afterOpen()
	for v := ver + 1; v <= z.last; v++ {
		delete(z.states, v)
		delete(z.hashes, v)
		delete(z.ops, v)
	}
	z.last = ver
	z.cur = z.states[ver].clone()
	z.checkLatest("after rollback")
	z.stats["rollback"]++
	// open again without a target: the rollback is durable
	z.reopen(opts)
	z.checkLatest("reopen after rollback")
}

// recommit opens at an older version without rollback and commits the
// same versions again.
func (z *mixRun) recommit() {
	t := z.t
	ver := z.randOlder()
	if ver < 1 || ver == z.last {
		return
	}
	if err := z.db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	opts := z.randOpts()
	to := opts
	to.TargetVersion = ver
	db, err := multitree.Open(z.dir, to)
	if errors.Is(err, multitree.ErrVersion) {
		z.stats["recommit-notkept"]++
		db, err = multitree.Open(z.dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		z.db, z.opts = db, opts
		z.afterOpen()
		return
	}
	if err != nil {
		t.Fatalf("target %d (last %d): %v", ver, z.last, err)
	}
	z.db, z.opts = db, opts
	z.afterOpen()
	if db.Version() != ver {
		t.Fatalf("target %d opened at %d", ver, db.Version())
	}
	v, _ := db.View()
	z.checkView(v, ver, "target open")
	v.Release()
	for w := ver + 1; w <= z.last; w++ {
		z.applyOps(z.ops[w])
		info, err := db.Commit()
		if err != nil {
			t.Fatalf("recommit %d: %v", w, err)
		}
		if !bytes.Equal(info.Hash(), z.hashes[w]) {
			t.Fatalf("recommit %d: hash %X, first %X", w, info.Hash(), z.hashes[w])
		}
		if z.r.Intn(4) == 0 {
			z.viewAt()
		}
		if z.r.Intn(8) == 0 && !z.delayed {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatalf("RewriteSnapshot during recommit at %d: %v", w, err)
			}
		}
	}
	z.stats["recommit"]++
}

func (z *mixRun) readOnly() {
	ver := z.randOlder()
	opts := multitree.Options{ReadOnly: true}
	if ver != z.last {
		opts.TargetVersion = ver
	}
	ro, err := multitree.Open(z.dir, opts)
	if errors.Is(err, multitree.ErrVersion) || errors.Is(err, multitree.ErrBusy) {
		z.stats["ro-skip"]++
		return
	}
	if err != nil {
		z.t.Fatalf("read-only open at %d (last %d): %v", ver, z.last, err)
	}
	defer ro.Close()
	if ro.Version() > z.last {
		z.t.Fatalf("read-only at %d, last %d", ro.Version(), z.last)
	}
	// under a relaxed policy with an async log the read-only open may not
	// see the last versions yet
	got := ro.Version()
	if opts.TargetVersion != 0 && got != ver {
		z.t.Fatalf("read-only target %d at %d", ver, got)
	}
	v, err := ro.View()
	if err != nil {
		z.t.Fatal(err)
	}
	if got > 0 {
		z.checkView(v, got, "read-only")
	}
	v.Release()
	if older := got - 1 - int64(z.r.Intn(3)); older >= 1 {
		v, err := ro.ViewAt(older)
		if err == nil {
			z.checkView(v, older, "read-only ViewAt")
			v.Release()
		}
	}
	z.stats["ro"]++
}

// importLatest exports the latest version and imports it: into a new
// directory, or over the database (Replace), with or without a Finish step
// that commits a version; the run goes on in the imported database, where
// the versions before the imported one are no longer kept.
func (z *mixRun) importLatest() {
	t := z.t
	t.Helper()
	if z.last == 0 {
		return
	}
	v, err := z.db.View()
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]multitree.NodeSource{}
	var exps []interface{ Close() }
	for _, name := range v.StoreNames() {
		e := v.Tree(name).Export()
		srcs[name] = e
		exps = append(exps, e)
	}
	ver := v.Version()
	replace := z.r.Intn(2) == 0
	dir := z.dir
	if replace {
		// the database replaced must not be open; the exporters read
		// the view's mapped files, which stay mapped until the view
		// is released, even after Close and the swap
		if err := z.db.Close(); err != nil {
			t.Fatal(err)
		}
		z.db = nil
	} else {
		z.nameN++
		dir = fmt.Sprintf("%s/imp%d", t.TempDir(), z.nameN)
	}
	opts := multitree.ImportOptions{Replace: replace, Concurrency: 1 + z.r.Intn(2)}
	finish := z.r.Intn(3) == 0
	nextOpts := z.randOpts()
	if finish {
		opts.FinishOptions = nextOpts
		opts.Finish = func(db *multitree.DB) error {
			if db.Version() != ver {
				return fmt.Errorf("Finish opened at %d, imported %d", db.Version(), ver)
			}
			z.db = db
			z.step()
			z.db = nil
			return nil
		}
	}
	info, err := multitree.Import(dir, ver, srcs, opts)
	for _, e := range exps {
		e.Close()
	}
	v.Release()
	if err != nil {
		t.Fatalf("Import at %d (replace %v, finish %v): %v", ver, replace, finish, err)
	}
	if !bytes.Equal(info.Hash(), z.hashes[ver]) {
		t.Fatalf("Import at %d: hash %X, committed %X", ver, info.Hash(), z.hashes[ver])
	}
	if z.db != nil {
		if err := z.db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for w := range z.states {
		if w < ver {
			delete(z.states, w)
			delete(z.hashes, w)
			delete(z.ops, w)
		}
	}
	z.dir = dir
	db, err := multitree.Open(dir, nextOpts)
	if err != nil {
		t.Fatalf("open after import at %d: %v", ver, err)
	}
	z.db, z.opts = db, nextOpts
	z.afterOpen()
	z.checkLatest("after import")
	z.stats["import"]++
}

func mixRunSeed(t *testing.T, seed int64, steps int) {
	r := rand.New(rand.NewSource(seed))
	z := &mixRun{t: t, r: r, dir: t.TempDir(), states: map[int64]mixModel{0: {}}, hashes: map[int64][]byte{},
		ops: map[int64]mixOps{}, stats: map[string]int{}}
	z.opts = z.randOpts()
	co := z.opts
	if r.Intn(3) == 0 {
		co.InitialVersion = int64(r.Intn(20))
	}
	co.CreateIfMissing = true
	co.InitialStores = []string{"a", "b", "c"}
	z.cur = mixModel{"a": {}, "b": {}, "c": {}}
	db, err := multitree.Open(z.dir, co)
	if err != nil {
		t.Fatal(err)
	}
	z.db = db
	z.afterOpen()
	if r.Intn(3) == 0 {
		iv := int64(r.Intn(20))
		if err := db.SetInitialVersion(iv); err != nil {
			t.Fatal(err)
		}
		co.InitialVersion = iv
	}
	if co.InitialVersion > 1 {
		z.last = co.InitialVersion - 1
		z.states[z.last] = mixModel{"a": {}, "b": {}, "c": {}}
	}
	defer func() {
		if z.db != nil {
			z.db.Close()
		}
	}()
	for i := 0; i < steps; i++ {
		z.step()
		switch k := r.Intn(40); {
		case k < 8:
			z.viewAt()
		case k < 10:
			if z.delayed {
				break
			}
			if err := z.db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatalf("RewriteSnapshot at %d: %v", z.last, err)
			}
			z.stats["rewrite"]++
		case k < 12:
			z.reopen(z.randOpts())
			z.checkLatest("reopen")
			z.stats["reopen"]++
		case k < 13:
			z.rollback()
		case k < 14:
			z.recommit()
		case k < 16:
			z.readOnly()
		case k < 17:
			z.importLatest()
		}
	}
	if err := z.db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := multitree.Verify(z.dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Version != z.last || !bytes.Equal(rep.AppHash, z.hashes[z.last]) {
		t.Fatalf("Verify: %d %X, want %d %X", rep.Version, rep.AppHash, z.last, z.hashes[z.last])
	}
	db, err = multitree.Open(z.dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	z.db = db
	z.checkLatest("final reopen")
	t.Logf("seed %d: last %d stats %v", seed, z.last, z.stats)
}

// TestFeatureMixRandom runs random versions (store adds, renames, deletes,
// renames to freed names, WorkingCommitInfo between changes) under random
// options (async log and sync policies, SnapshotInterval 1, keep 0, paced
// and held background rewrites, view cache sizes, commits by snapshot,
// initial versions and SetInitialVersion), mixed with ViewAt, synchronous
// rewrites, reopens, rollbacks, TargetVersion re-commits, read-only opens
// and imports (new directory or Replace, with a Finish step), and checks
// every version read against a model of every version and the app hash
// its Commit returned. Each run takes seeds from testutil.Seed on (replay
// one with MEMIAVL_SEED): 4 runs of 150 steps under -short, 8 of 300
// without, 16 of 300 at the largest size (MEMIAVL_FULL=1).
func TestFeatureMixRandom(t *testing.T) {
	seeds, steps := size(16, 8, 4), scale(300, 150)
	base := testutil.Seed(t)
	for i := 0; i < seeds; i++ {
		seed := base + int64(i)
		t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) { mixRunSeed(t, seed, steps) })
	}
}
