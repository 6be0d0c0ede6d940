package multitree_test

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"testing"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"
	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// wlRun drives a multitree.DB and one cosmos/iavl v1.2.2 MutableTree per
// store (the trees rootmulti commits) with the same changes, and compares
// root hashes at every version and data at the latest and at kept
// historical versions.
type wlRun struct {
	t    *testing.T
	dir  string
	opts multitree.Options
	db   *multitree.DB

	ref map[string]*iavl.MutableTree // live stores
	// at[v] is the stores (and their iavl trees) of version v
	at     map[int64]map[string]*iavl.MutableTree
	hashes map[int64][]byte
	last   int64
	// probe keys read at every check besides a full iteration
	probes [][]byte
	// ever holds every key set (up to a bound), read at every check too
	ever     [][]byte
	everSeen map[string]bool
	// reopens counts reopens; histChecked the historical versions
	// compared
	reopens, histChecked int
}

func wlNewIAVL(initial int64) *iavl.MutableTree {
	var opts []iavl.Option
	if initial > 1 {
		opts = append(opts, iavl.InitialVersionOption(uint64(initial)))
	}
	return iavl.NewMutableTree(iavldb.NewMemDB(), 0, true, log.NewNopLogger(), opts...)
}

func wlOpen(t *testing.T, stores []string, opts multitree.Options) *wlRun {
	t.Helper()
	w := &wlRun{t: t, dir: t.TempDir(), opts: opts, ref: map[string]*iavl.MutableTree{},
		at: map[int64]map[string]*iavl.MutableTree{}, hashes: map[int64][]byte{}}
	copts := opts
	copts.CreateIfMissing, copts.InitialStores = true, stores
	db, err := multitree.Open(w.dir, copts)
	if err != nil {
		t.Fatal(err)
	}
	w.db = db
	for _, s := range stores {
		w.ref[s] = wlNewIAVL(opts.InitialVersion)
	}
	return w
}

func (w *wlRun) remember(k []byte) {
	if w.everSeen == nil {
		w.everSeen = map[string]bool{}
	}
	if len(w.ever) < 3000 && !w.everSeen[string(k)] {
		w.everSeen[string(k)] = true
		w.ever = append(w.ever, bytes.Clone(k))
	}
}

func (w *wlRun) set(store string, k, v []byte) {
	w.t.Helper()
	w.remember(k)
	if err := w.db.Set(store, k, v); err != nil {
		w.t.Fatalf("Set(%s, %X): %v", store, wlShort(k), err)
	}
	if _, err := w.ref[store].Set(bytes.Clone(k), bytes.Clone(v)); err != nil {
		w.t.Fatal(err)
	}
	if got, err := w.db.Get(store, k); err != nil || !bytes.Equal(got, v) || got == nil {
		w.t.Fatalf("Get(%s, %X) after Set: %d bytes (nil %v), %v", store, wlShort(k), len(got), got == nil, err)
	}
}

func (w *wlRun) del(store string, k []byte) {
	w.t.Helper()
	if err := w.db.Delete(store, k); err != nil {
		w.t.Fatalf("Delete(%s, %X): %v", store, wlShort(k), err)
	}
	if _, _, err := w.ref[store].Remove(k); err != nil {
		w.t.Fatal(err)
	}
	if got, err := w.db.Get(store, k); err != nil || got != nil {
		w.t.Fatalf("Get(%s, %X) after Delete: %X, %v", store, wlShort(k), wlShort(got), err)
	}
	if has, err := w.db.WorkingTree(store).Has(k); err != nil || has {
		w.t.Fatalf("Has(%s, %X) after Delete: %v, %v", store, wlShort(k), has, err)
	}
}

// apply applies css to both.
func (w *wlRun) apply(css []wal.ChangeSet) {
	w.t.Helper()
	if err := w.db.ApplyChangeSets(css); err != nil {
		w.t.Fatal(err)
	}
	for _, cs := range css {
		for _, p := range cs.Pairs {
			var err error
			if p.Delete {
				_, _, err = w.ref[cs.Name].Remove(p.Key)
			} else {
				_, err = w.ref[cs.Name].Set(bytes.Clone(p.Key), bytes.Clone(p.Value))
			}
			if err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// upgrade applies u to the database and the reference: an added store is
// a new iavl tree whose first version is the working version (as
// rootmulti's loadVersion sets initialVersion for an added store).
func (w *wlRun) upgrade(u wal.Upgrades) {
	w.t.Helper()
	if err := w.db.ApplyUpgrades(u); err != nil {
		w.t.Fatal(err)
	}
	v := w.db.WorkingVersion()
	for _, d := range u.Deleted {
		delete(w.ref, d)
	}
	if len(u.Renamed) > 0 {
		w.t.Fatal("renames not modelled")
	}
	for _, a := range u.Added {
		w.ref[a] = wlNewIAVL(v)
	}
}

func (w *wlRun) refInfo(v int64, hashes map[string][]byte) *storetypes.CommitInfo {
	names := make([]string, 0, len(hashes))
	for n := range hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	ci := &storetypes.CommitInfo{Version: v}
	for _, n := range names {
		ci.StoreInfos = append(ci.StoreInfos, storetypes.StoreInfo{Name: n, CommitId: storetypes.CommitID{Version: v, Hash: hashes[n]}})
	}
	return ci
}

// commit commits both and compares every store's hash and the app hash.
func (w *wlRun) commit() int64 {
	w.t.Helper()
	info, err := w.db.Commit()
	if err != nil {
		w.t.Fatalf("Commit at %d: %v", w.db.WorkingVersion(), err)
	}
	hashes := map[string][]byte{}
	snap := map[string]*iavl.MutableTree{}
	for name, tr := range w.ref {
		h, v, err := tr.SaveVersion()
		if err != nil {
			w.t.Fatal(err)
		}
		if v != info.Version {
			w.t.Fatalf("store %s: iavl saved version %d, multitree %d", name, v, info.Version)
		}
		hashes[name] = h
		snap[name] = tr
	}
	want := w.refInfo(info.Version, hashes)
	if !bytes.Equal(info.Hash(), want.Hash()) {
		for _, si := range info.StoreInfos {
			if !bytes.Equal(si.CommitId.Hash, hashes[si.Name]) {
				w.t.Errorf("version %d store %s: hash %X, iavl %X", info.Version, si.Name, si.CommitId.Hash, hashes[si.Name])
			}
		}
		w.t.Fatalf("version %d: app hash %X, iavl %X (stores %d vs %d)", info.Version, info.Hash(), want.Hash(), len(info.StoreInfos), len(hashes))
	}
	w.hashes[info.Version] = info.Hash()
	w.at[info.Version] = snap
	w.last = info.Version
	return info.Version
}

func (w *wlRun) close() {
	w.t.Helper()
	if err := w.db.Close(); err != nil {
		w.t.Fatal(err)
	}
	w.db = nil
}

// reopen closes and reopens with opts, and checks the version and hash.
func (w *wlRun) reopen() {
	w.t.Helper()
	w.close()
	db, err := multitree.Open(w.dir, w.opts)
	if err != nil {
		w.t.Fatalf("reopen: %v", err)
	}
	w.db = db
	w.reopens++
	if db.Version() != w.last {
		w.t.Fatalf("reopened at version %d, last committed %d", db.Version(), w.last)
	}
	if w.last != 0 && !bytes.Equal(db.LastCommitInfo().Hash(), w.hashes[w.last]) {
		w.t.Fatalf("reopened at %d with hash %X, want %X", w.last, db.LastCommitInfo().Hash(), w.hashes[w.last])
	}
}

// compareView compares every store of view (at version v) with iavl's
// version v: store names, a full forward and reverse iteration, point reads
// of the probe keys.
func (w *wlRun) compareView(view *multitree.View, v int64) {
	t := w.t
	t.Helper()
	refs := w.at[v]
	var names []string
	for n := range refs {
		names = append(names, n)
	}
	sort.Strings(names)
	if got := view.StoreNames(); fmt.Sprint(got) != fmt.Sprint(names) {
		t.Fatalf("version %d: stores %q, iavl %q", v, got, names)
	}
	if !bytes.Equal(view.CommitInfo().Hash(), w.hashes[v]) {
		t.Fatalf("version %d: view hash %X, want %X", v, view.CommitInfo().Hash(), w.hashes[v])
	}
	for _, n := range names {
		it, err := refs[n].GetImmutable(v)
		if err != nil {
			t.Fatalf("iavl store %s version %d: %v", n, v, err)
		}
		tr := view.Tree(n)
		if tr == nil {
			t.Fatalf("version %d: no tree %s", v, n)
		}
		if !bytes.Equal(tr.RootHash(), it.Hash()) {
			t.Fatalf("version %d store %s: root %X, iavl %X", v, n, tr.RootHash(), it.Hash())
		}
		for _, asc := range []bool{true, false} {
			ri, err := it.Iterator(nil, nil, asc)
			if err != nil {
				t.Fatal(err)
			}
			mi := tr.Iterator(nil, nil, asc)
			cnt := 0
			for ; ri.Valid(); ri.Next() {
				if !mi.Valid() {
					t.Fatalf("version %d store %s (asc %v): missing key %X", v, n, asc, wlShort(ri.Key()))
				}
				if !bytes.Equal(mi.Key(), ri.Key()) || !bytes.Equal(mi.Value(), ri.Value()) {
					t.Fatalf("version %d store %s (asc %v) #%d: %X=%d bytes, iavl %X=%d bytes", v, n, asc, cnt,
						wlShort(mi.Key()), len(mi.Value()), wlShort(ri.Key()), len(ri.Value()))
				}
				mi.Next()
				cnt++
			}
			ri.Close()
			if mi.Valid() {
				t.Fatalf("version %d store %s: extra key %X", v, n, wlShort(mi.Key()))
			}
			if err := mi.Error(); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range append(w.probes[:len(w.probes):len(w.probes)], w.ever...) {
			got, err := tr.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			want, err := it.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			if has, err := tr.Has(k); err != nil || has != (want != nil) {
				t.Fatalf("version %d store %s: Has(%X) = %v, %v", v, n, wlShort(k), has, err)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("version %d store %s: Get(%X) = %d bytes (nil %v), iavl %d bytes (nil %v)", v, n, wlShort(k),
					len(got), got == nil, len(want), want == nil)
			}
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("version %d store %s: %v", v, n, err)
		}
	}
}

// checkLatest compares the latest version and the DB's Get.
func (w *wlRun) checkLatest() {
	w.t.Helper()
	view, err := w.db.View()
	if err != nil {
		w.t.Fatal(err)
	}
	defer view.Release()
	if view.Version() != w.last {
		w.t.Fatalf("View at %d, last %d", view.Version(), w.last)
	}
	if w.last == 0 {
		return
	}
	w.compareView(view, w.last)
	for n, tr := range w.at[w.last] {
		for _, k := range append(w.probes[:len(w.probes):len(w.probes)], w.ever...) {
			got, err := w.db.Get(n, k)
			if err != nil {
				w.t.Fatal(err)
			}
			want, _ := tr.GetVersioned(k, w.last)
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				w.t.Fatalf("db.Get(%s, %X) = %d bytes, iavl %d", n, wlShort(k), len(got), len(want))
			}
		}
	}
}

// checkAt compares version v through ViewAt; a version no longer kept is
// skipped (reported false).
func (w *wlRun) checkAt(v int64) bool {
	w.t.Helper()
	if _, ok := w.at[v]; !ok {
		return false // not a committed version
	}
	view, err := w.db.ViewAt(v)
	if errors.Is(err, multitree.ErrVersion) {
		return false
	}
	if err != nil {
		w.t.Fatalf("ViewAt(%d): %v", v, err)
	}
	defer view.Release()
	if view.Version() != v {
		w.t.Fatalf("ViewAt(%d) is at %d", v, view.Version())
	}
	w.compareView(view, v)
	w.histChecked++
	return true
}

// finish checks the latest version, closes, runs Verify, reopens (twice:
// once read-only), compares again and closes.
func (w *wlRun) finish() {
	t := w.t
	t.Helper()
	w.checkLatest()
	if err := w.db.VerifySnapshot(); err != nil {
		t.Fatal(err)
	}
	w.close()
	rep, err := multitree.Verify(w.dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Version != w.last || !bytes.Equal(rep.AppHash, w.hashes[w.last]) {
		t.Fatalf("Verify: version %d hash %X, want %d %X", rep.Version, rep.AppHash, w.last, w.hashes[w.last])
	}
	ro, err := multitree.Open(w.dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Version() != w.last || !bytes.Equal(ro.LastCommitInfo().Hash(), w.hashes[w.last]) {
		t.Fatalf("read-only open at %d %X, want %d", ro.Version(), ro.LastCommitInfo().Hash(), w.last)
	}
	view, err := ro.View()
	if err != nil {
		t.Fatal(err)
	}
	w.compareView(view, w.last)
	view.Release()
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	// older versions still kept, opened read-only at TargetVersion
	kept := 0
	for _, back := range []int64{1, 2, 3, 5, 8, 13, 40} {
		v := w.last - back
		if _, ok := w.at[v]; !ok {
			continue
		}
		ro, err := multitree.Open(w.dir, multitree.Options{ReadOnly: true, TargetVersion: v})
		if errors.Is(err, multitree.ErrVersion) {
			continue
		}
		if err != nil {
			t.Fatalf("TargetVersion %d: %v", v, err)
		}
		view, err := ro.View()
		if err != nil {
			t.Fatal(err)
		}
		if view.Version() != v {
			t.Fatalf("TargetVersion %d opened at %d", v, view.Version())
		}
		w.compareView(view, v)
		view.Release()
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		kept++
	}
	t.Logf("last %d, snapshots %v, log %d..%d", w.last, rep.Snapshots, rep.WALFirst, rep.WALLast)
	t.Logf("%d reopens, %d historical versions compared, %d read-only TargetVersion opens, %d snapshots kept at the end",
		w.reopens, w.histChecked, kept, len(rep.Snapshots))
	db, err := multitree.Open(w.dir, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	w.db = db
	if db.Version() != w.last || !bytes.Equal(db.LastCommitInfo().Hash(), w.hashes[w.last]) {
		t.Fatalf("reopened at %d, want %d", db.Version(), w.last)
	}
	w.checkLatest()
	w.close()
}

func wlShort(k []byte) []byte {
	if len(k) > 24 {
		return k[:24]
	}
	return k
}
