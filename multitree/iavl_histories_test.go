package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	storetypes "cosmossdk.io/store/types"
	"github.com/cosmos/iavl"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// dfRun: differential run against a map model and iavl MutableTrees.
type dfRun struct {
	t       *testing.T
	r       *rand.Rand
	dir     string
	db      *multitree.DB
	opts    multitree.Options
	states  map[int64]mixModel
	ops     map[int64]mixOps
	hashes  map[int64][]byte
	last    int64
	cur     mixModel
	ref     map[string]*iavl.MutableTree
	nameN   int
	g0      int
	log     []string
	delayed bool
	wide    bool
}

func (z *dfRun) logf(f string, a ...any) {
	z.log = append(z.log, fmt.Sprintf(f, a...))
	if len(z.log) > 60 {
		z.log = z.log[1:]
	}
}

func (z *dfRun) fatalf(f string, a ...any) {
	z.t.Helper()
	for _, l := range z.log {
		z.t.Log(l)
	}
	z.t.Fatalf(f, a...)
}

func (z *dfRun) randOpts() multitree.Options {
	r := z.r
	return multitree.Options{
		AsyncCommitBuffer:  []int{0, 1, 4}[r.Intn(3)],
		Sync:               []wal.SyncPolicy{wal.SyncEveryCommit, wal.SyncGrouped, wal.SyncNone}[r.Intn(3)],
		SnapshotInterval:   []int64{1, 1, 2, 2, 3, -1}[r.Intn(6)],
		SnapshotKeepRecent: []int{0, 0, 1, 1000}[r.Intn(4)],
		RewriteConcurrency: 1 + r.Intn(2),
		OpenCheck:          multitree.OpenCheck(r.Intn(3)),
		ViewCacheSize:      []int{-1, 0, 2}[r.Intn(3)],
	}
}

// rebuildRef replays ops 1..upTo into fresh iavl trees.
func (z *dfRun) rebuildRef(upTo int64) {
	z.ref = map[string]*iavl.MutableTree{}
	for _, s := range z.states[0].names() {
		z.ref[s] = wlNewIAVL(1)
	}
	for v := int64(1); v <= upTo; v++ {
		z.refApply(v, z.ops[v])
		h := z.refSave(v)
		if !bytes.Equal(h, z.hashes[v]) {
			z.fatalf("rebuilding the oracle: version %d hash %X, recorded %X", v, h, z.hashes[v])
		}
	}
}

func (z *dfRun) refApply(v int64, ops mixOps) {
	for _, d := range ops.up.Deleted {
		delete(z.ref, d)
	}
	for _, rn := range ops.up.Renamed {
		old := z.ref[rn.OldName]
		nt := wlNewIAVL(v)
		var keys [][2][]byte
		old.Iterate(func(k, val []byte) bool {
			keys = append(keys, [2][]byte{bytes.Clone(k), bytes.Clone(val)})
			return false
		})
		for _, kv := range keys {
			if _, err := nt.Set(kv[0], kv[1]); err != nil {
				z.t.Fatal(err)
			}
		}
		delete(z.ref, rn.OldName)
		z.ref[rn.NewName] = nt
	}
	for _, a := range ops.up.Added {
		z.ref[a] = wlNewIAVL(v)
	}
	for _, cs := range ops.css {
		for _, p := range cs.Pairs {
			var err error
			if p.Delete {
				_, _, err = z.ref[cs.Name].Remove(p.Key)
			} else {
				_, err = z.ref[cs.Name].Set(bytes.Clone(p.Key), bytes.Clone(p.Value))
			}
			if err != nil {
				z.t.Fatal(err)
			}
		}
	}
}

func (z *dfRun) refSave(v int64) []byte {
	names := make([]string, 0, len(z.ref))
	for n := range z.ref {
		names = append(names, n)
	}
	sort.Strings(names)
	ci := &storetypes.CommitInfo{Version: v}
	for _, n := range names {
		h, sv, err := z.ref[n].SaveVersion()
		if err != nil {
			z.t.Fatal(err)
		}
		if sv != v {
			z.fatalf("iavl store %s saved %d, want %d", n, sv, v)
		}
		ci.StoreInfos = append(ci.StoreInfos, storetypes.StoreInfo{Name: n, CommitId: storetypes.CommitID{Version: v, Hash: h}})
	}
	return ci.Hash()
}

func (z *dfRun) newName() string {
	z.nameN++
	return "s" + strconv.Itoa(z.nameN)
}

func (z *dfRun) randUpgrades() wal.Upgrades {
	r := z.r
	var u wal.Upgrades
	names := z.cur.names()
	switch r.Intn(4) {
	case 0:
		if len(names) > 0 {
			u.Deleted = []string{names[r.Intn(len(names))]}
		}
	case 1:
		if len(names) > 0 {
			u.Renamed = []wal.RenamedStore{{OldName: names[r.Intn(len(names))], NewName: z.newName()}}
		}
	case 2:
		u.Added = []string{z.newName()}
	case 3:
		if len(names) > 0 {
			d := names[r.Intn(len(names))]
			u.Deleted, u.Added = []string{d}, []string{d}
		}
	}
	return u
}

func (z *dfRun) randChanges() []wal.ChangeSet {
	r := z.r
	names := z.cur.names()
	if len(names) == 0 {
		return nil
	}
	var css []wal.ChangeSet
	for i := 0; i < r.Intn(3); i++ {
		s := names[r.Intn(len(names))]
		cs := wal.ChangeSet{Name: s}
		if r.Intn(6) == 0 {
			// empty the store
			var ks []string
			for k := range z.cur[s] {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte(k), Delete: true})
			}
		} else {
			n, ks := 1+r.Intn(5), 20
			if z.wide {
				n, ks = 1+r.Intn(60), 400
			}
			for j := 0; j < n; j++ {
				k := []byte(fmt.Sprintf("k%02d", r.Intn(ks)))
				if r.Intn(3) == 0 {
					cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Delete: true})
				} else {
					cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: []byte(fmt.Sprintf("v%d-%d", z.last+1, r.Intn(1000)))})
				}
			}
		}
		if len(cs.Pairs) > 0 {
			css = append(css, cs)
		}
	}
	return css
}

func (z *dfRun) modelApply(m mixModel, ops mixOps) mixModel {
	c := m.clone()
	for _, d := range ops.up.Deleted {
		delete(c, d)
	}
	for _, rn := range ops.up.Renamed {
		c[rn.NewName] = c[rn.OldName]
		delete(c, rn.OldName)
	}
	for _, a := range ops.up.Added {
		c[a] = map[string]string{}
	}
	mixApplyModel(c, ops.css)
	return c
}

func (z *dfRun) applyOps(db *multitree.DB, ops mixOps) {
	z.t.Helper()
	if !noUps(ops.up) {
		if err := db.ApplyUpgrades(ops.up); err != nil {
			z.fatalf("ApplyUpgrades(%+v) at %d: %v", ops.up, db.WorkingVersion(), err)
		}
	}
	if err := db.ApplyChangeSets(ops.css); err != nil {
		z.fatalf("ApplyChangeSets at %d: %v", db.WorkingVersion(), err)
	}
}

func noUps(u wal.Upgrades) bool { return len(u.Added)+len(u.Renamed)+len(u.Deleted) == 0 }

func (z *dfRun) checkView(v *multitree.View, ver int64, what string) {
	z.t.Helper()
	m, ok := z.states[ver]
	if !ok {
		z.fatalf("%s: version %d not in the model", what, ver)
	}
	if v.Version() != ver {
		z.fatalf("%s: view at %d, want %d", what, v.Version(), ver)
	}
	if got := v.StoreNames(); fmt.Sprint(got) != fmt.Sprint(m.names()) {
		z.fatalf("%s: version %d stores %q, model %q", what, ver, got, m.names())
	}
	if ver > 0 && !bytes.Equal(v.CommitInfo().Hash(), z.hashes[ver]) {
		z.fatalf("%s: version %d hash %X, iavl %X", what, ver, v.CommitInfo().Hash(), z.hashes[ver])
	}
	for s, kv := range m {
		tr := v.Tree(s)
		n := 0
		it := tr.Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			if want, ok := kv[string(it.Key())]; !ok || want != string(it.Value()) {
				z.fatalf("%s: version %d store %q key %q = %q, model %q (%v)", what, ver, s, it.Key(), it.Value(), want, ok)
			}
			n++
		}
		if err := it.Close(); err != nil {
			z.fatalf("%s: iterator: %v", what, err)
		}
		if n != len(kv) {
			z.fatalf("%s: version %d store %q has %d keys, model %d", what, ver, s, n, len(kv))
		}
		for k, val := range kv {
			got, err := v.Get(s, []byte(k))
			if err != nil || string(got) != val {
				z.fatalf("%s: version %d Get(%q,%q) = %q, %v; model %q", what, ver, s, k, got, err, val)
			}
		}
		for i := 0; i < 20; i++ {
			k := fmt.Sprintf("k%02d", i)
			if _, ok := kv[k]; ok {
				continue
			}
			if got, err := v.Get(s, []byte(k)); err != nil || got != nil {
				z.fatalf("%s: version %d Get(%q,%q) = %q, %v; model absent", what, ver, s, k, got, err)
			}
		}
		if err := tr.Check(); err != nil {
			z.fatalf("%s: version %d store %q: %v", what, ver, s, err)
		}
	}
}

// checkAll checks the latest state and ViewAt of every version back to
// the current snapshot (which must be kept) and of a few older ones.
func (z *dfRun) checkAll(db *multitree.DB, what string) {
	z.t.Helper()
	if db.Version() != z.last {
		z.fatalf("%s: at %d, want %d", what, db.Version(), z.last)
	}
	if z.last > 0 && !bytes.Equal(db.LastCommitInfo().Hash(), z.hashes[z.last]) {
		z.fatalf("%s: LastCommitInfo %X, iavl %X", what, db.LastCommitInfo().Hash(), z.hashes[z.last])
	}
	v, err := db.View()
	if err != nil {
		z.fatalf("%s: View: %v", what, err)
	}
	z.checkView(v, z.last, what+" View")
	v.Release()
	sv := db.SnapshotVersion()
	for ver := z.last - 1; ver >= 1 && ver >= z.last-6; ver-- {
		if _, ok := z.states[ver]; !ok {
			break
		}
		vw, err := db.ViewAt(ver)
		if errors.Is(err, multitree.ErrVersion) && ver < sv {
			continue
		}
		if err != nil {
			z.fatalf("%s: ViewAt(%d) (last %d, snapshot %d): %v", what, ver, z.last, sv, err)
		}
		z.checkView(vw, ver, fmt.Sprintf("%s ViewAt(%d)", what, ver))
		vw.Release()
	}
}

func (z *dfRun) commitStep() {
	z.t.Helper()
	var ops mixOps
	// upgrades more likely at or right after a snapshot version
	p := 8
	if iv := z.opts.SnapshotInterval; iv > 0 && (z.last%iv == 0 || z.last%iv == 1) {
		p = 3
	}
	if z.r.Intn(p) == 0 {
		ops.up = z.randUpgrades()
	}
	z.cur = z.modelApply(z.cur, mixOps{up: ops.up})
	ops.css = z.randChanges()
	z.cur = z.modelApply(z.cur, mixOps{css: ops.css})
	z.applyOps(z.db, ops)
	v := z.last + 1
	z.refApply(v, ops)
	want := z.refSave(v)
	info, err := z.db.Commit()
	if err != nil {
		z.fatalf("Commit at %d: %v", v, err)
	}
	rb, sk, fl := multitree.RebaseCounts(z.db)
	ents, _ := os.ReadDir(z.dir)
	var fn []string
	for _, e := range ents {
		fn = append(fn, e.Name())
	}
	z.logf("commit %d ups %+v (%d changesets) snap %d rebase %d %d %d files %v", v, ops.up, len(ops.css), z.db.SnapshotVersion(), rb, sk, fl, fn)
	if info.Version != v || !bytes.Equal(info.Hash(), want) {
		z.fatalf("commit %d: version %d hash %X, iavl %X", v, info.Version, info.Hash(), want)
	}
	z.last = v
	z.states[v] = z.cur.clone()
	z.hashes[v] = want
	z.ops[v] = ops
	z.checkAll(z.db, "after commit")
}

func (z *dfRun) closeDB() {
	z.t.Helper()
	if err := z.db.Close(); err != nil {
		z.fatalf("Close at %d: %v", z.last, err)
	}
	z.db = nil
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > z.g0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			z.fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), z.g0, buf)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (z *dfRun) open(opts multitree.Options, what string) (*multitree.DB, error) {
	db, err := multitree.Open(z.dir, opts)
	z.logf("open %s %+v: %v", what, opts, err)
	if err == nil && !opts.ReadOnly {
		if z.r.Intn(2) == 0 {
			multitree.DelayRewrites(db, int64(1+z.r.Intn(3)))
			z.delayed = true
		} else {
			z.delayed = false
		}
		if z.r.Intn(3) == 0 {
			multitree.SetMaxLoggedEntry(db, 60+z.r.Intn(200))
		}
	}
	return db, err
}

func (z *dfRun) reopen() {
	z.closeDB()
	z.opts = z.randOpts()
	db, err := z.open(z.opts, "reopen")
	if err != nil {
		z.fatalf("reopen: %v", err)
	}
	z.db = db
	z.checkAll(db, "reopen")
}

func (z *dfRun) readOnly() {
	opts := multitree.Options{ReadOnly: true, OpenCheck: multitree.OpenCheck(z.r.Intn(3))}
	target := int64(0)
	if z.r.Intn(2) == 0 && z.last > 1 {
		target = z.last - int64(z.r.Intn(int(min(z.last-1, 5))))
		opts.TargetVersion = target
	}
	ro, err := z.open(opts, "read-only")
	if target != 0 && errors.Is(err, multitree.ErrVersion) {
		return
	}
	if err != nil {
		z.fatalf("read-only open (target %d, last %d): %v", target, z.last, err)
	}
	defer func() {
		if err := ro.Close(); err != nil {
			z.fatalf("read-only Close: %v", err)
		}
	}()
	got := ro.Version()
	if target != 0 && got != target {
		z.fatalf("read-only target %d at %d", target, got)
	}
	if got > z.last || (target == 0 && z.opts.AsyncCommitBuffer == 0 && got != z.last) {
		z.fatalf("read-only open at %d, last %d (opts %+v)", got, z.last, z.opts)
	}
	v, err := ro.View()
	if err != nil {
		z.fatalf("read-only View: %v", err)
	}
	if got > 0 {
		z.checkView(v, got, "read-only View")
	}
	v.Release()
	// commit beside it, then read older versions through it
	if z.r.Intn(2) == 0 {
		z.commitStep()
	}
	for i := 0; i < z.r.Intn(6); i++ {
		z.commitStep()
		if z.r.Intn(3) == 0 {
			z.roCheck(ro, got)
		}
	}
	z.roCheck(ro, got)
}

func (z *dfRun) roCheck(ro *multitree.DB, got int64) {
	z.t.Helper()
	if v, err := ro.View(); err != nil {
		z.fatalf("read-only View: %v", err)
	} else {
		if got > 0 {
			z.checkView(v, got, "read-only View later")
		}
		v.Release()
	}
	for ver := got; ver >= 1 && ver >= got-4; ver-- {
		vw, err := ro.ViewAt(ver)
		if errors.Is(err, multitree.ErrVersion) {
			continue
		}
		if err != nil {
			z.fatalf("read-only ViewAt(%d) (at %d): %v", ver, got, err)
		}
		z.checkView(vw, ver, "read-only ViewAt")
		vw.Release()
	}
}

func (z *dfRun) target(rollback bool) {
	if z.last < 2 {
		return
	}
	ver := z.last - int64(1+z.r.Intn(int(min(z.last-1, 5))))
	z.closeDB()
	opts := z.randOpts()
	to := opts
	to.TargetVersion, to.Rollback = ver, rollback
	db, err := z.open(to, fmt.Sprintf("target %d rollback %v", ver, rollback))
	if errors.Is(err, multitree.ErrVersion) {
		db, err = z.open(opts, "after refused target")
		if err != nil {
			z.fatalf("reopen after refused target: %v", err)
		}
		z.db, z.opts = db, opts
		z.checkAll(db, "after refused target")
		return
	}
	if err != nil {
		z.fatalf("target %d (rollback %v, last %d): %v", ver, rollback, z.last, err)
	}
	z.db, z.opts = db, opts
	if rollback {
		for v := ver + 1; v <= z.last; v++ {
			delete(z.states, v)
			delete(z.hashes, v)
			delete(z.ops, v)
		}
		z.last = ver
		z.cur = z.states[ver].clone()
		z.rebuildRef(ver)
		z.checkAll(db, "after rollback")
		return
	}
	if db.Version() != ver {
		z.fatalf("target %d opened at %d", ver, db.Version())
	}
	last := z.last
	// recommit the same versions, checking each
	for w := ver + 1; w <= last; w++ {
		z.applyOps(db, z.ops[w])
		info, err := db.Commit()
		if err != nil {
			z.fatalf("recommit %d: %v", w, err)
		}
		z.logf("recommit %d snap %d", w, db.SnapshotVersion())
		if !bytes.Equal(info.Hash(), z.hashes[w]) {
			z.fatalf("recommit %d: hash %X, iavl %X", w, info.Hash(), z.hashes[w])
		}
		v, err := db.View()
		if err != nil {
			z.fatal(err)
		}
		z.checkView(v, w, "recommit View")
		v.Release()
		if z.r.Intn(3) == 0 {
			z.closeDB()
			z.opts = z.randOpts()
			// a reopen without target lands on the log's last version
			db, err = z.open(z.opts, "reopen mid-recommit")
			if err != nil {
				z.fatalf("reopen mid-recommit: %v", err)
			}
			z.db = db
			z.checkAll(db, "reopen mid-recommit")
			return
		}
	}
	z.checkAll(db, "after recommit")
}

func (z *dfRun) fatal(err error) { z.t.Helper(); z.fatalf("%v", err) }

func dfRunSeed(t *testing.T, seed int64, steps int) {
	r := rand.New(rand.NewSource(seed))
	z := &dfRun{t: t, r: r, dir: t.TempDir() + "/db", states: map[int64]mixModel{}, hashes: map[int64][]byte{},
		ops: map[int64]mixOps{}, g0: runtime.NumGoroutine()}
	z.wide = r.Intn(2) == 0
	initial := [][]string{nil, {"a"}, {"a", "b"}}[r.Intn(3)]
	z.cur = mixModel{}
	for _, s := range initial {
		z.cur[s] = map[string]string{}
	}
	z.states[0] = z.cur.clone()
	z.rebuildRef(0)
	z.opts = z.randOpts()
	co := z.opts
	co.CreateIfMissing, co.InitialStores = true, initial
	db, err := z.open(co, "create")
	if err != nil {
		t.Fatal(err)
	}
	z.db = db
	defer func() {
		if z.db != nil {
			z.db.Close()
		}
	}()
	for i := 0; i < steps; i++ {
		z.commitStep()
		switch k := r.Intn(30); {
		case k < 4:
			z.reopen()
		case k < 7:
			z.readOnly()
		case k < 8:
			z.target(true)
		case k < 10:
			z.target(false)
		case k < 11:
			if z.delayed {
				break
			}
			if err := z.db.RewriteSnapshot(context.Background()); err != nil {
				z.fatalf("RewriteSnapshot at %d: %v", z.last, err)
			}
			z.logf("RewriteSnapshot at %d", z.last)
			z.checkAll(z.db, "after RewriteSnapshot")
		}
	}
	z.closeDB()
	if _, err := multitree.Verify(z.dir); err != nil {
		z.fatalf("Verify: %v", err)
	}
}

// TestRandomHistoriesAgainstIAVL runs short random histories under
// options drawn again at every open (snapshot intervals of 1 to 3 or none,
// keep-recent 0, 1 or many, rewrite concurrency, asynchronous log buffers,
// every fsync policy and open check, view cache sizes, rewrites held back so
// that the catch-up rebases and replays, versions committed by a snapshot):
// writes over narrow and wide key ranges, stores emptied, store upgrades
// (add, rename, delete, delete and add again) mostly at or right after a
// snapshot version, reopens, read-only opens kept open while the writer
// rewrites and prunes, TargetVersion opens with and without rollback, and
// synchronous rewrites. After every commit and open the app hash equals the
// one cosmos/iavl trees give for the same operations, every kept version
// reads as the model says, and after every Close no goroutine is left.
func TestRandomHistoriesAgainstIAVL(t *testing.T) {
	seeds, steps := size(40, 20, 4), scale(60, 40)
	base := testutil.Rand(t).Int63()
	for i := 0; i < seeds; i++ {
		seed := base + int64(i)
		t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) { dfRunSeed(t, seed, steps) })
	}
}
