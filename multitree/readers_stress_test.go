package multitree

// What readers see beside a writer (read-only opens, TargetVersion opens,
// ViewAt while pruning, rollbacks), checked against a model of every
// version.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/wal"
)

var stressStores = []string{"s1", "s2"}

const stressKeys = 40

func stressKey(i int) []byte { return []byte(fmt.Sprintf("k%03d", i)) }

// stressBlock returns the deterministic changes of version v.
func stressBlock(v int64) []wal.ChangeSet {
	r := rand.New(rand.NewSource(v*7919 + 11))
	var css []wal.ChangeSet
	for si, name := range stressStores {
		cs := wal.ChangeSet{Name: name}
		n := 1 + r.Intn(6)
		for i := 0; i < n; i++ {
			k := stressKey(r.Intn(stressKeys))
			if r.Intn(4) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k})
				continue
			}
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: []byte(fmt.Sprintf("%s@%d/%d/%d", name, v, si, i))})
		}
		css = append(css, cs)
	}
	return css
}

// stressBlockIn returns the changes of stressBlock(v) for stores: store i
// gets the pairs of the block's change set i modulo the block's length.
func stressBlockIn(v int64, stores []string) []wal.ChangeSet {
	base := stressBlock(v)
	var css []wal.ChangeSet
	for i, s := range stores {
		css = append(css, wal.ChangeSet{Name: s, Pairs: base[i%len(base)].Pairs})
	}
	return css
}

// cycleUpgrades returns the store upgrades of version v in a cycle of
// period versions over the current stores: at phase add a new store
// add<v>, at phase rename the first store other than s1 renamed to ren<v>,
// at phase del the last store deleted while more than three remain; none
// at the other phases. ok reports whether there are any.
func cycleUpgrades(v int64, stores []string, period, add, rename, del int64) (u wal.Upgrades, ok bool) {
	switch v % period {
	case add:
		u.Added = []string{fmt.Sprintf("add%d", v)}
	case rename:
		for _, s := range stores {
			if s != "s1" {
				u.Renamed = []wal.RenamedStore{{OldName: s, NewName: fmt.Sprintf("ren%d", v)}}
				break
			}
		}
	case del:
		if len(stores) > 3 {
			u.Deleted = []string{stores[len(stores)-1]}
		}
	}
	return u, len(u.Added)+len(u.Renamed)+len(u.Deleted) > 0
}

// historyModel holds the contents of every committed version.
type historyModel struct {
	mu   sync.Mutex
	vers map[int64]map[string]map[string]string
	cur  map[string]map[string]string
}

func newHistoryModel() *historyModel {
	m := &historyModel{vers: map[int64]map[string]map[string]string{}, cur: map[string]map[string]string{}}
	for _, s := range stressStores {
		m.cur[s] = map[string]string{}
	}
	m.vers[0] = m.clone()
	return m
}

func (m *historyModel) clone() map[string]map[string]string {
	out := map[string]map[string]string{}
	for s, kv := range m.cur {
		c := make(map[string]string, len(kv))
		for k, v := range kv {
			c[k] = v
		}
		out[s] = c
	}
	return out
}

func (m *historyModel) apply(v int64, css []wal.ChangeSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cs := range css {
		for _, p := range cs.Pairs {
			if p.Delete {
				delete(m.cur[cs.Name], string(p.Key))
			} else {
				m.cur[cs.Name][string(p.Key)] = string(p.Value)
			}
		}
	}
	m.vers[v] = m.clone()
}

// applyUpgrades applies store upgrades to the model, as rootmulti does.
func (m *historyModel) applyUpgrades(u wal.Upgrades) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range u.Deleted {
		delete(m.cur, n)
	}
	for _, r := range u.Renamed {
		m.cur[r.NewName] = m.cur[r.OldName]
		delete(m.cur, r.OldName)
	}
	for _, n := range u.Added {
		m.cur[n] = map[string]string{}
	}
}

func (m *historyModel) stores() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for s := range m.cur {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func (m *historyModel) get(v int64) map[string]map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vers[v]
}

// checkViewHistory compares a view with the model's version: every key by Get
// (which takes the snapshot shortcut for keys not touched) and a full
// iteration of every store.
func checkViewHistory(m *historyModel, view *View, what string) error {
	v := view.Version()
	want := m.get(v)
	if want == nil {
		// committed and logged but Commit has not returned yet: wait a bit
		for i := 0; i < 200 && want == nil; i++ {
			time.Sleep(time.Millisecond)
			want = m.get(v)
		}
		if want == nil {
			return fmt.Errorf("%s: view of version %d that the model does not have", what, v)
		}
	}
	names := view.StoreNames()
	var wantNames []string
	for s := range want {
		wantNames = append(wantNames, s)
	}
	sort.Strings(wantNames)
	if fmt.Sprint(names) != fmt.Sprint(wantNames) {
		return fmt.Errorf("%s: version %d: stores %v, want %v", what, v, names, wantNames)
	}
	for _, s := range wantNames {
		for i := 0; i < stressKeys; i++ {
			k := stressKey(i)
			got, err := view.Get(s, k)
			if err != nil {
				return fmt.Errorf("%s: version %d: get %s/%s: %w", what, v, s, k, err)
			}
			w, ok := want[s][string(k)]
			if !ok && got != nil || ok && string(got) != w {
				return fmt.Errorf("%s: version %d: %s/%s = %q, want %q (present %v)", what, v, s, k, got, w, ok)
			}
		}
		tr := view.Tree(s)
		if tr == nil {
			return fmt.Errorf("%s: version %d: no tree %s", what, v, s)
		}
		var keys []string
		it := tr.Iterator(nil, nil, true)
		n := 0
		for ; it.Valid(); it.Next() {
			n++
			if w, ok := want[s][string(it.Key())]; !ok || w != string(it.Value()) {
				return fmt.Errorf("%s: version %d: iterated %s/%s = %q, want %q (present %v)", what, v, s, it.Key(), it.Value(), w, ok)
			}
			keys = append(keys, string(it.Key()))
		}
		if err := it.Error(); err != nil {
			return fmt.Errorf("%s: version %d: iterate %s: %w", what, v, s, err)
		}
		if !sort.StringsAreSorted(keys) || n != len(want[s]) {
			return fmt.Errorf("%s: version %d: %s iterated %d keys, want %d", what, v, s, n, len(want[s]))
		}
	}
	return nil
}

// viewIs checks that view is version v of m, then releases it.
func viewIs(m *historyModel, view *View, v int64, what string) error {
	defer view.Release()
	if view.Version() != v {
		return fmt.Errorf("%s returned version %d", what, view.Version())
	}
	return checkViewHistory(m, view, what)
}

// besideWriterErr reports whether err is an error a reader beside a writer may get.
func besideWriterErr(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrVersion)
}

type stressStats struct {
	roOpens, roTarget, viewAts, roViewAts, held, tolerated atomic.Int64
}

// tolerate counts err if it is one a reader beside a writer may get
// (besideWriterErr), and reports whether it is.
func (st *stressStats) tolerate(err error) bool {
	if !besideWriterErr(err) {
		return false
	}
	st.tolerated.Add(1)
	return true
}

// readerStress runs a writer with opts for versions versions (fewer under
// -short), and readers of every kind beside it; every read is compared with
// the model. With delay > 0 the background rewrites wait for delay more
// versions before their catch-up (DelayRewrites); with largeEvery > 0,
// every largeEvery-th version carries a value large enough to be committed
// by a snapshot (SetMaxLoggedEntry).
func readerStress(t *testing.T, opts Options, versions int, delay int64, largeEvery int64) {
	if testing.Short() {
		versions /= 3
	}
	dir := t.TempDir()
	opts.CreateIfMissing, opts.InitialStores = true, stressStores
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if delay > 0 {
		DelayRewrites(db, delay)
	}
	if largeEvery > 0 {
		SetMaxLoggedEntry(db, 4<<10)
	}
	m := newHistoryModel()
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		st    stressStats
		errMu sync.Mutex
		errs  []error
	)
	report := func(err error) {
		errMu.Lock()
		if len(errs) < 10 {
			errs = append(errs, err)
		}
		errMu.Unlock()
		stop.Store(true)
	}
	reader := func(g int, fn func(r *rand.Rand) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for !stop.Load() {
				if err := fn(r); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	// read-only opens of the latest version, with ViewAt on them
	reader(1, func(r *rand.Rand) error {
		ro, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheck(r.Intn(3))})
		if st.tolerate(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read-only open: %w", err)
		}
		defer ro.Close()
		st.roOpens.Add(1)
		view, err := ro.View()
		if err != nil {
			return fmt.Errorf("read-only view: %w", err)
		}
		err = checkViewHistory(m, view, "read-only open")
		view.Release()
		if err != nil {
			return err
		}
		if lv := ro.Version(); lv > 1 {
			v := lv - 1 - r.Int63n(min(lv-1, 8))
			view, err := ro.ViewAt(v)
			if st.tolerate(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read-only ViewAt(%d) of latest %d: %w", v, lv, err)
			}
			st.roViewAts.Add(1)
			if err := viewIs(m, view, v, fmt.Sprintf("read-only ViewAt(%d)", v)); err != nil {
				return err
			}
		}
		return ro.Close()
	})
	// read-only opens at a TargetVersion
	reader(2, func(r *rand.Rand) error {
		lv := db.Version()
		if lv < 1 {
			time.Sleep(time.Millisecond)
			return nil
		}
		target := lv - r.Int63n(min(lv, 12))
		ro, err := Open(dir, Options{ReadOnly: true, TargetVersion: target, OpenCheck: OpenCheckNone})
		if st.tolerate(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read-only open at %d (latest %d): %w", target, lv, err)
		}
		defer ro.Close()
		st.roTarget.Add(1)
		if ro.Version() != target {
			return fmt.Errorf("read-only open at %d: version %d", target, ro.Version())
		}
		view, err := ro.View()
		if err != nil {
			return err
		}
		err = checkViewHistory(m, view, fmt.Sprintf("read-only open at %d", target))
		view.Release()
		if err != nil {
			return err
		}
		return ro.Close()
	})
	// ViewAt of the writer, holding some views across commits
	reader(3, func(r *rand.Rand) error {
		var held []*View
		defer func() {
			for _, h := range held {
				h.Release()
			}
		}()
		for i := 0; i < 20 && !stop.Load(); i++ {
			lv := db.Version()
			if lv < 1 {
				time.Sleep(time.Millisecond)
				continue
			}
			v := lv - r.Int63n(min(lv, 15))
			view, err := db.ViewAt(v)
			if st.tolerate(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("ViewAt(%d) (latest %d): %w", v, lv, err)
			}
			st.viewAts.Add(1)
			if view.Version() != v {
				view.Release()
				return fmt.Errorf("ViewAt(%d) returned %d", v, view.Version())
			}
			if err := checkViewHistory(m, view, fmt.Sprintf("ViewAt(%d)", v)); err != nil {
				view.Release()
				return err
			}
			held = append(held, view)
		}
		// the held views still serve their versions after commits,
		// switches, prunes
		for _, h := range held {
			st.held.Add(1)
			if err := checkViewHistory(m, h, fmt.Sprintf("held view %d", h.Version())); err != nil {
				return err
			}
		}
		return nil
	})
	// a read-only handle kept open while the writer moves on, then
	// ViewAt through it (its log is the one it opened)
	reader(4, func(r *rand.Rand) error {
		ro, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone})
		if st.tolerate(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read-only open: %w", err)
		}
		defer ro.Close()
		lv := ro.Version()
		for i := 0; i < 30 && !stop.Load(); i++ {
			time.Sleep(time.Duration(r.Intn(3)) * time.Millisecond)
			if lv < 1 {
				break
			}
			v := lv - r.Int63n(min(lv, 10))
			view, err := ro.ViewAt(v)
			if st.tolerate(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("long-lived read-only (at %d) ViewAt(%d), writer at %d: %w", lv, v, db.Version(), err)
			}
			st.roViewAts.Add(1)
			if err := viewIs(m, view, v, fmt.Sprintf("long-lived read-only ViewAt(%d)", v)); err != nil {
				return err
			}
		}
		return ro.Close()
	})
	for v := int64(1); v <= int64(versions) && !stop.Load(); v++ {
		css := stressBlock(v)
		if largeEvery > 0 && v%largeEvery == 0 {
			css[0].Pairs = append(css[0].Pairs, wal.KVPair{Key: stressKey(stressKeys - 1), Value: bytes.Repeat([]byte{byte(v)}, 8<<10)})
		}
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		// the model first: a reader may see the version before Commit returns
		m.apply(v, css)
		if _, err := db.Commit(); err != nil {
			report(fmt.Errorf("commit %d: %w", v, err))
			break
		}
		if v%7 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("ro opens %d, ro target opens %d, ViewAt %d, ro ViewAt %d, held %d, tolerated %d",
		st.roOpens.Load(), st.roTarget.Load(), st.viewAts.Load(), st.roViewAts.Load(), st.held.Load(), st.tolerated.Load())
}

func TestReadersStress(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		delay int64
	}{
		{"i3k0", Options{SnapshotInterval: 3, SnapshotKeepRecent: 0}, 0},
		{"i3k1", Options{SnapshotInterval: 3, SnapshotKeepRecent: 1}, 0},
		{"i4k2async", Options{SnapshotInterval: 4, SnapshotKeepRecent: 2, AsyncCommitBuffer: 4}, 0},
		{"i5k1delay", Options{SnapshotInterval: 5, SnapshotKeepRecent: 1}, 2},
		{"i3k0seg", Options{SnapshotInterval: 3, SnapshotKeepRecent: 0, WALSegmentSize: 600, ViewCacheSize: -1}, 0},
		{"i3k2grouped", Options{SnapshotInterval: 3, SnapshotKeepRecent: 2, Sync: wal.SyncGrouped, ViewCacheSize: 2}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { readerStress(t, c.opts, 200, c.delay, 0) })
	}
}

func TestReadersStressSnapshotCommits(t *testing.T) {
	for _, k := range []int{0, 1, 2} {
		t.Run(fmt.Sprint("k", k), func(t *testing.T) {
			readerStress(t, Options{SnapshotInterval: 3, SnapshotKeepRecent: k}, 150, 0, 7)
		})
	}
}

// timelineBlock is version v's changes on timeline tl (a rollback starts
// a new timeline, whose versions differ from the discarded ones).
func timelineBlock(tl int, v int64) []wal.ChangeSet {
	css := stressBlock(v)
	for i := range css {
		for j := range css[i].Pairs {
			if !css[i].Pairs[j].Delete {
				css[i].Pairs[j].Value = append([]byte(fmt.Sprintf("t%d:", tl)), css[i].Pairs[j].Value...)
			}
		}
	}
	return css
}

// TestReadersBesideRollbacks: read-only opens (latest and TargetVersion)
// on other goroutines while a writer repeatedly reopens with a rollback and
// commits a new timeline: each open returns a version whole from one
// timeline, or ErrBusy/ErrVersion.
func TestReadersBesideRollbacks(t *testing.T) {
	dir := t.TempDir()
	var (
		mu        sync.Mutex
		timelines []*historyModel
	)
	cur := newHistoryModel()
	timelines = append(timelines, cur)
	opts := Options{SnapshotInterval: 3, SnapshotKeepRecent: 2}
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stressStores, SnapshotInterval: 3, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(db *DB, tl int, m *historyModel, n int) {
		for i := 0; i < n; i++ {
			v := db.WorkingVersion()
			css := timelineBlock(tl, v)
			if err := db.ApplyChangeSets(css); err != nil {
				t.Fatal(err)
			}
			m.apply(v, css)
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit(db, 0, cur, 30)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	match := func(view *View) error {
		mu.Lock()
		tls := append([]*historyModel(nil), timelines...)
		mu.Unlock()
		var errs []error
		for _, m := range tls {
			if m.get(view.Version()) == nil {
				continue
			}
			err := checkViewHistory(m, view, "read-only open")
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		return fmt.Errorf("version %d matches no timeline: %v", view.Version(), errors.Join(errs...))
	}
	var (
		stop          atomic.Bool
		wg            sync.WaitGroup
		opens, tolerr atomic.Int64
		errMu         sync.Mutex
		errs          []error
	)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for !stop.Load() {
				o := Options{ReadOnly: true, OpenCheck: OpenCheckNone}
				if g == 1 {
					o.TargetVersion = 1 + r.Int63n(40)
				}
				ro, err := Open(dir, o)
				if besideWriterErr(err) {
					tolerr.Add(1)
					continue
				}
				if err == nil {
					var view *View
					if view, err = ro.View(); err == nil {
						err = match(view)
						view.Release()
					}
					ro.Close()
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("read-only open %+v: %w", o.TargetVersion, err))
					errMu.Unlock()
					stop.Store(true)
					return
				}
				opens.Add(1)
			}
		}()
	}
	r := rand.New(rand.NewSource(7))
	latest := int64(30)
	rounds := 80
	if testing.Short() {
		rounds = 25
	}
	for round := 1; round <= rounds && !stop.Load(); round++ {
		cut := latest - 1 - r.Int63n(6)
		if snaps, err := listSnapshots(dir); err == nil && len(snaps) > 0 && cut < snaps[0] {
			cut = snaps[0] // older ones are not kept
		}
		o := opts
		o.TargetVersion, o.Rollback = cut, true
		db, err := Open(dir, o)
		if err != nil {
			t.Fatalf("rollback to %d: %v", cut, err)
		}
		// the new timeline: versions up to cut as before, then its own
		nm := newHistoryModel()
		cur.mu.Lock()
		for v := int64(0); v <= cut; v++ {
			nm.vers[v] = cur.vers[v]
		}
		for s, kv := range cur.vers[cut] {
			for k, val := range kv {
				nm.cur[s][k] = val
			}
		}
		cur.mu.Unlock()
		mu.Lock()
		timelines = append(timelines, nm)
		mu.Unlock()
		cur = nm
		n := 3 + r.Intn(6)
		commit(db, round, cur, n)
		latest = cut + int64(n)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d read-only opens, %d tolerated", opens.Load(), tolerr.Load())
}

// TestReadOnlyViewAtAfterRollback: a read-only handle opened at version
// 10, then a rollback to 5 by a writer (another process, say), which then
// commits versions 6..10 again with other values. The handle's log is the
// segment list and sizes it read at open, and the rollback cut it back in
// place: ViewAt of the handle must then fail with ErrVersion (the rollback
// count moved), neither with an I/O error of the cut log nor with the new
// history's version 8 beside its own version 10 of the old one.
func TestReadOnlyViewAtAfterRollback(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stressStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	old := newHistoryModel()
	commit := func(db *DB, tl int, m *historyModel, from, to int64) {
		for v := from; v <= to; v++ {
			css := timelineBlock(tl, v)
			if err := db.ApplyChangeSets(css); err != nil {
				t.Fatal(err)
			}
			m.apply(v, css)
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit(db, 1, old, 1, 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone, ViewCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	w, err := Open(dir, Options{TargetVersion: 5, Rollback: true, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	view, err := ro.ViewAt(8)
	if err == nil {
		view.Release()
	}
	if !errors.Is(err, ErrVersion) {
		t.Errorf("read-only ViewAt(8) after a rollback to 5: %v, want ErrVersion", err)
	}

	// the new timeline: same sizes, other values
	nm := newHistoryModel()
	commit(w, 1, nm, 1, 0) // nothing
	for v := int64(0); v <= 5; v++ {
		nm.vers[v] = old.get(v)
	}
	for s, kv := range old.get(5) {
		for k, val := range kv {
			nm.cur[s][k] = val
		}
	}
	commit(w, 2, nm, 6, 10)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	view, err = ro.ViewAt(8)
	if err == nil {
		defer view.Release()
		if cerr := checkViewHistory(old, view, "ViewAt(8) of the handle at the old version 10"); cerr != nil && checkViewHistory(nm, view, "") == nil {
			t.Errorf("the read-only handle at version 10 (old timeline) serves version 8 of the new timeline: %v", cerr)
		}
	}
	if !errors.Is(err, ErrVersion) {
		t.Errorf("read-only ViewAt(8) after a rollback and new commits: %v, want ErrVersion", err)
	}
	// its own latest version is still served, from memory and the
	// snapshot it mapped
	if view, err := ro.View(); err != nil || view.Version() != 10 {
		t.Fatalf("View of the handle: %v", err)
	} else {
		if err := checkViewHistory(old, view, "View of the handle"); err != nil {
			t.Error(err)
		}
		view.Release()
	}
	// a new read-only open sees the new history
	ro2, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	defer ro2.Close()
	view, err = ro2.ViewAt(8)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	if err := checkViewHistory(nm, view, "ViewAt(8) of a handle opened after the rollback"); err != nil {
		t.Error(err)
	}
}

func openFDCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestNoLeaksAfterReaders: after a stress run (every handle closed, every
// view released) no goroutine, file or mapping is left behind.
func TestNoLeaksAfterReaders(t *testing.T) {
	runtime.GC()
	g0, f0 := runtime.NumGoroutine(), openFDCount(t)
	readerStress(t, Options{SnapshotInterval: 3, SnapshotKeepRecent: 1}, 120, 1, 11)
	var g1, f1 int
	for i := 0; i < 1000; i++ {
		runtime.GC()
		g1, f1 = runtime.NumGoroutine(), openFDCount(t)
		if g1 <= g0 && f1 <= f0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	t.Errorf("goroutines %d -> %d, fds %d -> %d\n%s", g0, g1, f0, f1, buf[:n])
}

// TestReadersBesideUpgrades: readers of every kind beside a writer that
// adds, renames and deletes stores while it rewrites snapshots and prunes.
func TestReadersBesideUpgrades(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stressStores, SnapshotInterval: 3, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	DelayRewrites(db, 1)
	m := newHistoryModel()
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
		reads atomic.Int64
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
		stop.Store(true)
	}
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for !stop.Load() {
				lv := db.Version()
				if lv < 1 {
					time.Sleep(time.Millisecond)
					continue
				}
				v := lv - r.Int63n(min(lv, 10))
				var view *View
				var ro *DB
				var err error
				switch g {
				case 0:
					view, err = db.ViewAt(v)
				case 1:
					ro, err = Open(dir, Options{ReadOnly: true, TargetVersion: v, OpenCheck: OpenCheckNone})
					if err == nil {
						view, err = ro.View()
					}
				case 2:
					ro, err = Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone})
					if err == nil && ro.Version() > 1 {
						view, err = ro.ViewAt(ro.Version() - 1)
					} else if err == nil {
						view, err = ro.View()
					}
				}
				if err == nil {
					err = checkViewHistory(m, view, fmt.Sprintf("reader %d", g))
					view.Release()
					reads.Add(1)
				} else if besideWriterErr(err) {
					err = nil
				}
				if ro != nil {
					ro.Close()
				}
				if err != nil {
					fail(fmt.Errorf("reader %d at %d: %w", g, v, err))
					return
				}
			}
		}()
	}
	versions := int64(150)
	if testing.Short() {
		versions = 50
	}
	for v := int64(1); v <= versions && !stop.Load(); v++ {
		u, ok := cycleUpgrades(v, m.stores(), 10, 2, 5, 8)
		if ok {
			if err := db.ApplyUpgrades(u); err != nil {
				t.Fatal(err)
			}
		}
		// changes in every store, the upgraded ones included
		m.applyUpgrades(u)
		all := stressBlockIn(v, m.stores())
		if err := db.ApplyChangeSets(all); err != nil {
			t.Fatal(err)
		}
		m.apply(v, all)
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d reads", reads.Load())
}
