package multitree

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// dmgState is what a database holds at one version: its app hash and every
// key/value of every store.
type dmgState struct {
	version int64
	hash    []byte
	stores  map[string]map[string]string
}

func (s *dmgState) equal(o *dmgState) string {
	if s.version != o.version {
		return fmt.Sprintf("version %d, want %d", s.version, o.version)
	}
	if !bytes.Equal(s.hash, o.hash) {
		return fmt.Sprintf("app hash %X, want %X", s.hash, o.hash)
	}
	if len(s.stores) != len(o.stores) {
		return fmt.Sprintf("%d stores, want %d", len(s.stores), len(o.stores))
	}
	for name, kv := range o.stores {
		got, ok := s.stores[name]
		if !ok {
			return fmt.Sprintf("store %q missing", name)
		}
		if len(got) != len(kv) {
			return fmt.Sprintf("store %q has %d keys, want %d", name, len(got), len(kv))
		}
		for k, v := range kv {
			if gv, ok := got[k]; !ok || gv != v {
				return fmt.Sprintf("store %q key %x: %x, want %x", name, k, gv, v)
			}
		}
	}
	return ""
}

// dmgReadView reads every store of view.
func dmgReadView(view *View) (*dmgState, error) {
	st := &dmgState{version: view.Version(), hash: view.CommitInfo().Hash(), stores: map[string]map[string]string{}}
	for _, name := range view.StoreNames() {
		kv := map[string]string{}
		it := view.Tree(name).Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			k, err := it.CopyKey()
			if err != nil {
				it.Close()
				return nil, err
			}
			v, err := it.CopyValue()
			if err != nil {
				it.Close()
				return nil, err
			}
			kv[string(k)] = string(v)
		}
		err := it.Error()
		it.Close()
		if err != nil {
			return nil, err
		}
		st.stores[name] = kv
	}
	return st, nil
}

func dmgReadDB(db *DB) (*dmgState, error) {
	view, err := db.View()
	if err != nil {
		return nil, err
	}
	defer view.Release()
	return dmgReadView(view)
}

func dmgBlock(r *rand.Rand, stores []string, v int64) []wal.ChangeSet {
	var css []wal.ChangeSet
	for _, name := range stores {
		cs := wal.ChangeSet{Name: name}
		n := 3 + r.Intn(6)
		for i := 0; i < n; i++ {
			k := []byte(fmt.Sprintf("k%03d", r.Intn(60)))
			if r.Intn(5) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k})
				continue
			}
			val := make([]byte, 4+r.Intn(24))
			r.Read(val)
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: val})
		}
		cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte("version"), Value: []byte(fmt.Sprint(v))})
		css = append(css, cs)
	}
	return css
}

// dmgFixture is a closed database directory to damage, built by build
// in a new directory.
type dmgFixture struct {
	name  string
	short bool // run under -short too
	full  bool // only in the full run (MEMIAVL_FULL=1)
	build func(t *testing.T) string
}

// dmgWriter commits blocks of random changes to a database.
type dmgWriter struct {
	t      *testing.T
	db     *DB
	r      *rand.Rand
	stores []string
}

func (w *dmgWriter) commit(n int) {
	w.t.Helper()
	for i := 0; i < n; i++ {
		if err := w.db.ApplyChangeSets(dmgBlock(w.r, w.stores, w.db.WorkingVersion())); err != nil {
			w.t.Fatal(err)
		}
		if _, err := w.db.Commit(); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *dmgWriter) rewrite() {
	w.t.Helper()
	if err := w.db.RewriteSnapshot(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *dmgWriter) upgrade(u wal.Upgrades, stores ...string) {
	w.t.Helper()
	if err := w.db.ApplyUpgrades(u); err != nil {
		w.t.Fatal(err)
	}
	w.stores = stores
}

func (w *dmgWriter) close() {
	w.t.Helper()
	if err := w.db.Close(); err != nil {
		w.t.Fatal(err)
	}
}

func dmgOpen(t *testing.T, dir string, opts Options, stores ...string) *dmgWriter {
	t.Helper()
	opts.SnapshotInterval, opts.SnapshotKeepRecent, opts.WALSegmentSize, opts.OpenCheck = -1, 1, 1500, OpenCheckNone
	if opts.CreateIfMissing {
		opts.InitialStores = stores
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &dmgWriter{t: t, db: db, r: rand.New(rand.NewSource(42 + opts.TargetVersion)), stores: stores}
}

var dmgUpgrade = wal.Upgrades{Added: []string{"gov"},
	Renamed: []wal.RenamedStore{{OldName: "acc", NewName: "auth"}}, Deleted: []string{"staking"}}

// dmgBuild builds, in a new directory, a closed database with a kept
// snapshot at 4, the current one at 8, a store upgrade logged at 11, a
// rollback from 13 back to 12 and a log of several segments up to 14.
func dmgBuild(t *testing.T, opts Options) string {
	t.Helper()
	dir := t.TempDir()
	o := opts
	o.CreateIfMissing = true
	w := dmgOpen(t, dir, o, "acc", "bank", "staking")
	w.commit(4)
	w.rewrite()
	w.commit(4)
	w.rewrite()
	w.commit(2) // 9, 10
	w.upgrade(dmgUpgrade, "auth", "bank", "gov")
	w.commit(3) // 11..13
	w.close()
	// a rollback to 12, then 13 and 14 again, with other content
	o = opts
	o.TargetVersion, o.Rollback = 12, true
	w = dmgOpen(t, dir, o, "auth", "bank", "gov")
	w.commit(2)
	w.close()
	for _, f := range []string{currentFileName, firstFileName, rollbacksName, snapshotDirName(4), snapshotDirName(8)} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("fixture lacks %s: %v", f, err)
		}
	}
	return dir
}

var dmgFixtures = []dmgFixture{
	{"strict", true, false, func(t *testing.T) string { return dmgBuild(t, Options{}) }},
	{"relaxed", true, false, func(t *testing.T) string { return dmgBuild(t, Options{AsyncCommitBuffer: 2, Sync: wal.SyncGrouped}) }},
	{"v1fixture", false, false, func(t *testing.T) string {
		// every file in its oldest format
		dir := filepath.Join(t.TempDir(), "db")
		testutil.CopyDir(t, "../testdata/multitree-v1", dir)
		testutil.SnapshotsToFormat1(t, dir)
		return dir
	}},
	{"v1log", false, false, func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "db")
		testutil.CopyDir(t, "../testdata/multitree-v1", dir)
		return dir
	}},
	{"oddStores", false, false, func(t *testing.T) string {
		// a store named in hex, an empty one, one of a single key
		dir := t.TempDir()
		w := dmgOpen(t, dir, Options{CreateIfMissing: true}, "a/b", "bank", "empty", "one")
		w.stores = []string{"a/b", "bank"}
		w.commit(3)
		if err := w.db.Set("one", []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		w.commit(1)
		w.rewrite()
		w.commit(2)
		w.close()
		return dir
	}},
	{"snapshot0", false, false, func(t *testing.T) string {
		// never rewritten: snapshot 0, the first file and the log, an
		// initial version, a store named in hex, one left empty
		dir := t.TempDir()
		w := dmgOpen(t, dir, Options{CreateIfMissing: true, InitialVersion: 100}, "a/b", "bank", "empty")
		w.stores = []string{"a/b", "bank"}
		w.commit(6)
		w.close()
		return dir
	}},
	{"logEndsAtSnapshot", true, false, func(t *testing.T) string {
		dir := t.TempDir()
		w := dmgOpen(t, dir, Options{CreateIfMissing: true}, "acc", "bank", "staking")
		w.commit(3)
		w.rewrite()
		w.commit(2)
		w.upgrade(dmgUpgrade, "auth", "bank", "gov")
		w.commit(2)
		w.rewrite()
		w.close()
		return dir
	}},
	{"unfinishedImport", true, false, func(t *testing.T) string {
		// a database whose import's Finish step was interrupted, which
		// its marker says: refused whole, and so whatever the damage
		dir := t.TempDir()
		w := dmgOpen(t, dir, Options{CreateIfMissing: true}, "acc", "bank")
		w.commit(3)
		w.close()
		if err := os.WriteFile(filepath.Join(dir, importFileName), finishingMarker, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}},
	// slow: a read beside a rollback file waits for it (2.5 s a
	// failed Verify or read-only open, see retryBesideWriter)
	{"unfinishedRollback", false, true, func(t *testing.T) string {
		dir := t.TempDir()
		w := dmgOpen(t, dir, Options{CreateIfMissing: true}, "acc", "bank", "staking")
		w.commit(4)
		w.rewrite()
		w.commit(5)
		w.close()
		duringRollback = func(*DB, int64) error { return errors.New("injected: stop inside the rollback") }
		defer func() { duringRollback = nil }()
		if _, err := Open(dir, Options{TargetVersion: 6, Rollback: true, OpenCheck: OpenCheckNone}); err == nil {
			t.Fatal("rollback did not stop")
		}
		if _, err := os.Stat(filepath.Join(dir, rollbackFileName)); err != nil {
			t.Fatal(err)
		}
		return dir
	}},
}

// dmgCall runs f with a deadline, turning a panic into an error of its
// own kind (dmgPanic) and a hang into errDmgHang.
type dmgPanic struct{ v any }

func (p dmgPanic) Error() string { return fmt.Sprintf("PANIC: %v", p.v) }

var errDmgHang = errors.New("HANG: no return within 20s")

func dmgCall(f func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- dmgPanic{r}
			}
		}()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		return errDmgHang
	}
}

type dmgCase struct {
	rel  string // file, relative to the directory
	off  int64
	xor  byte
	size int64
}

func (c dmgCase) String() string {
	return fmt.Sprintf("%s offset %d (of %d) xor %#02x", c.rel, c.off, c.size, c.xor)
}

// TestDamageDirectoryWide flips one bit (or changes one byte) of every file
// of small closed databases, densely in small files and at sampled
// positions of larger ones, and requires that Verify reports ErrCorrupt, or
// that the damage is harmless: the database Open (OpenCheckSync) gives is
// the undamaged one. Whatever Verify refuses in the snapshot an open starts
// from, Open with OpenCheckSync (or ViewAt, for an older kept snapshot)
// refuses as well, and so does the background check of the default open;
// nothing panics or hangs. A damaged last log record is the documented
// exception: it is a torn tail, cut, and the version before it is the
// database's. The cases are drawn with a fixed seed: every byte of the
// top-level state files first, then a shuffled sample of the others (all
// of them with MEMIAVL_FULL=1).
func TestDamageDirectoryWide(t *testing.T) {
	// the full run (MEMIAVL_FULL=1) damages every byte of the small files
	// and 120 sampled positions of each larger one: some 5,000 cases a
	// fixture, minutes each
	if raceEnabled && testing.Short() {
		// single-goroutine opens and reads, run many times: the race
		// detector would find nothing here and multiply the time
		t.Skip("skipped under the race detector with -short")
	}
	limit := testutil.Size(false, 1<<30, 180, 100)
	for _, fx := range dmgFixtures {
		if testing.Short() && !fx.short || fx.full && !testutil.Full() {
			continue
		}
		t.Run(fx.name, func(t *testing.T) { dmgRun(t, fx.build(t), limit) })
	}
}

func dmgRun(t *testing.T, pristine string, limit int) {
	// the undamaged database: its latest version, the one before, and
	// the version after each older kept snapshot
	rep, verr0 := Verify(pristine)
	var want, wantPrev *dmgState
	wantAt := map[int64]*dmgState{}
	var current int64
	if verr0 != nil {
		t.Logf("undamaged: Verify refuses: %v", verr0)
		if errors.Is(verr0, ErrCorrupt) {
			t.Fatal(verr0)
		}
		cur, err := readCurrent(pristine)
		if err != nil {
			t.Fatal(err)
		}
		current = cur
	} else {
		ro, err := Open(pristine, Options{ReadOnly: true, OpenCheck: OpenCheckSync})
		if err != nil {
			t.Fatal(err)
		}
		if want, err = dmgReadDB(ro); err != nil {
			t.Fatal(err)
		}
		current = ro.SnapshotVersion()
		at := func(v int64) *dmgState {
			view, err := ro.ViewAt(v)
			if err != nil {
				t.Fatalf("ViewAt(%d): %v", v, err)
			}
			defer view.Release()
			st, err := dmgReadView(view)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		wantPrev = at(want.version - 1)
		for _, s := range rep.Snapshots {
			if s < current && s+1 <= want.version {
				wantAt[s] = at(s + 1)
			}
		}
		ro.Close()
		if rep.Version != want.version || !bytes.Equal(rep.AppHash, want.hash) {
			t.Fatalf("undamaged: report %+v", rep)
		}
	}
	curDir := snapshotDirName(current) + string(filepath.Separator)

	// the files, and the last log segment (whose last record is a torn
	// tail when damaged)
	var files []dmgCase
	lastSeg := ""
	err := filepath.WalkDir(pristine, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(pristine, p)
		if rel == lockFileName {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, walDirName+string(filepath.Separator)) && rel > lastSeg {
			lastSeg = rel
		}
		files = append(files, dmgCase{rel: rel, size: fi.Size()})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	lastRecordAt := dmgLastRecordOffset(t, filepath.Join(pristine, lastSeg))
	// a torn tail loses a version only when the last record holds the
	// latest one (not one an unfinished rollback discards)
	tornLoses := false
	if want != nil {
		b, err := os.ReadFile(filepath.Join(pristine, lastSeg))
		if err != nil {
			t.Fatal(err)
		}
		tornLoses = int64(binary.LittleEndian.Uint64(b[lastRecordAt+12:])) == want.version
	}

	r := rand.New(rand.NewSource(7))
	var cases []dmgCase
	for _, f := range files {
		add := func(off int64) {
			c := f
			c.off = off
			if r.Intn(3) == 0 {
				c.xor = byte(1 + r.Intn(255)) // another byte value
			} else {
				c.xor = 1 << r.Intn(8) // one bit
			}
			cases = append(cases, c)
		}
		if strings.HasPrefix(f.rel, walDirName+string(filepath.Separator)) {
			// every byte of the header, of each frame header and of
			// each body's version
			for _, off := range dmgRecordOffsets(t, filepath.Join(pristine, f.rel)) {
				for i := int64(0); i < 20 && off+i < f.size; i++ {
					add(off + i)
				}
			}
		}
		switch {
		case f.size <= 256:
			for off := int64(0); off < f.size; off++ {
				add(off)
			}
		default:
			for i := 0; i < 120; i++ {
				add(r.Int63n(f.size))
			}
		}
	}
	// every case of the small state files at the top, then the others
	// interleaved, so that a limit still samples every file
	sort.SliceStable(cases, func(i, j int) bool {
		return !strings.Contains(cases[i].rel, string(filepath.Separator)) && strings.Contains(cases[j].rel, string(filepath.Separator))
	})
	top := 0
	for top < len(cases) && !strings.Contains(cases[top].rel, string(filepath.Separator)) {
		top++
	}
	rest := cases[top:]
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	if len(cases) > limit {
		cases = cases[:limit]
	}
	t.Logf("%d files, %d cases, current snapshot %d, last segment %s (last record at %d)", len(files), len(cases), current, lastSeg, lastRecordAt)

	work := t.TempDir()
	var failures []string
	fail := func(c dmgCase, format string, args ...any) {
		failures = append(failures, fmt.Sprintf("%v: %s", c, fmt.Sprintf(format, args...)))
	}
	passed := map[string]int{}
	defer func() { t.Logf("Verify passed: %v", passed) }()
	var ve dmgPanic
	bad := func(err error) bool { return errors.As(err, &ve) || err == errDmgHang }
	for i, c := range cases {
		dir := filepath.Join(work, fmt.Sprint(i))
		testutil.CopyDir(t, pristine, dir)
		path := filepath.Join(dir, c.rel)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[c.off] ^= c.xor
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		torn := tornLoses && c.rel == lastSeg && c.off >= lastRecordAt
		// what an open may give: the database, or the documented torn
		// tail's version before
		same := func(st *dmgState) string {
			d := st.equal(want)
			if d != "" && torn && st.equal(wantPrev) == "" {
				d = ""
			}
			return d
		}

		var vrep *VerifyReport
		verr := dmgCall(func() (err error) { vrep, err = Verify(dir); return err })
		switch {
		case bad(verr):
			fail(c, "Verify: %v", verr)
		case verr0 != nil:
			if verr == nil {
				fail(c, "Verify passes, the undamaged directory is refused (%v)", verr0)
			}
		case verr != nil && !errors.Is(verr, ErrCorrupt):
			fail(c, "Verify: error does not wrap ErrCorrupt: %v", verr)
		case verr == nil:
			passed[c.rel]++
			if vrep.Version != want.version || !bytes.Equal(vrep.AppHash, want.hash) {
				if !(torn && vrep.WALTornTail != nil && vrep.Version == wantPrev.version && bytes.Equal(vrep.AppHash, wantPrev.hash)) {
					fail(c, "Verify passes, reporting version %d app hash %X (want %d %X; torn tail %v)", vrep.Version, vrep.AppHash, want.version, want.hash, vrep.WALTornTail)
				}
			}
		}

		// a read-only open: no panic, and what it serves is the database
		var rst *dmgState
		rerr := dmgCall(func() error {
			db, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckSync})
			if err != nil {
				return err
			}
			defer db.Close()
			rst, err = dmgReadDB(db)
			return err
		})
		switch {
		case bad(rerr):
			fail(c, "read-only Open: %v", rerr)
		case rerr == nil && verr0 != nil:
			fail(c, "read-only Open opens, the undamaged directory is refused (%v)", verr0)
		case rerr == nil:
			if d := same(rst); d != "" {
				fail(c, "read-only Open (Verify: %v) serves other data: %s", verr, d)
			} else if verr != nil && strings.HasPrefix(c.rel, curDir) {
				fail(c, "Verify refuses damage in the current snapshot, read-only Open (OpenCheckSync) opens it: %v", verr)
			}
		}

		// a read-only open at each older kept snapshot's next version
		for sv, want := range wantAt {
			var st *dmgState
			err := dmgCall(func() error {
				db, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckSync, TargetVersion: sv + 1})
				if err != nil {
					return err
				}
				defer db.Close()
				st, err = dmgReadDB(db)
				return err
			})
			inSnap := strings.HasPrefix(c.rel, snapshotDirName(sv)+string(filepath.Separator))
			switch {
			case bad(err):
				fail(c, "read-only Open at %d: %v", sv+1, err)
			case err == nil && inSnap:
				fail(c, "read-only Open at %d serves a version from the damaged snapshot %d (Verify: %v)", sv+1, sv, verr)
			case err == nil:
				if d := st.equal(want); d != "" {
					fail(c, "read-only Open at %d serves other data (Verify: %v): %s", sv+1, verr, d)
				}
			case !errors.Is(err, ErrCorrupt) && !(torn && errors.Is(err, ErrVersion)):
				fail(c, "read-only Open at %d: error does not wrap ErrCorrupt (Verify: %v): %v", sv+1, verr, err)
			}
		}

		// a writable open with the synchronous check, and the versions
		// rebuilt from the older kept snapshots
		var wst *dmgState
		viewErr := map[int64]error{}
		viewSt := map[int64]*dmgState{}
		werr := dmgCall(func() error {
			db, err := Open(dir, Options{OpenCheck: OpenCheckSync, SnapshotInterval: -1, SnapshotKeepRecent: 1})
			if err != nil {
				return err
			}
			defer db.Close()
			if wst, err = dmgReadDB(db); err != nil {
				return err
			}
			for s := range wantAt {
				view, err := db.ViewAt(s + 1)
				if err != nil {
					viewErr[s] = err
					continue
				}
				viewSt[s], viewErr[s] = dmgReadView(view)
				view.Release()
			}
			return nil
		})
		switch {
		case bad(werr):
			fail(c, "Open: %v", werr)
		case werr == nil && verr0 != nil:
			fail(c, "Open opens, the undamaged directory is refused (%v)", verr0)
		case werr == nil:
			if d := same(wst); d != "" {
				fail(c, "Open (OpenCheckSync) succeeds (Verify: %v) with other data: %s", verr, d)
			} else if verr != nil && strings.HasPrefix(c.rel, curDir) {
				fail(c, "Verify refuses damage in the current snapshot, Open (OpenCheckSync) opens it: %v", verr)
			} else if verr == nil && vrep != nil && wst.version != vrep.Version {
				fail(c, "Verify reports version %d, Open opens %d", vrep.Version, wst.version)
			}
			for s, want := range wantAt {
				inSnap := strings.HasPrefix(c.rel, snapshotDirName(s)+string(filepath.Separator))
				switch err := viewErr[s]; {
				case err == nil && inSnap:
					fail(c, "ViewAt(%d) serves a version from the damaged snapshot %d (Verify: %v)", s+1, s, verr)
				case err == nil:
					if d := viewSt[s].equal(want); d != "" {
						fail(c, "ViewAt(%d) serves other data (Verify: %v): %s", s+1, verr, d)
					}
				case torn && errors.Is(err, ErrVersion):
					// a log cut before the current snapshot: the
					// older snapshots are removed (documented)
				case !errors.Is(err, ErrCorrupt):
					fail(c, "ViewAt(%d): error does not wrap ErrCorrupt (Verify: %v): %v", s+1, verr, err)
				case verr == nil:
					fail(c, "Verify passes, ViewAt(%d) fails: %v", s+1, err)
				}
			}
		case verr0 != nil:
		case verr == nil:
			fail(c, "Verify passes, Open (OpenCheckSync) fails: %v", werr)
		case !errors.Is(werr, ErrCorrupt):
			fail(c, "Open: error does not wrap ErrCorrupt: %v", werr)
		}
		// the default open checks the same in the background
		if verr0 == nil && verr != nil && strings.HasPrefix(c.rel, curDir) {
			err := dmgCall(func() error {
				db, err := Open(dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 1})
				if err != nil {
					return err
				}
				werr := db.WaitOpenCheck(context.Background())
				cerr := db.Close()
				if werr == nil || cerr == nil {
					return fmt.Errorf("WaitOpenCheck: %v, Close: %v", werr, cerr)
				}
				return werr
			})
			if !errors.Is(err, ErrCorrupt) {
				fail(c, "Open with the background check (Verify: %v): %v", verr, err)
			}
		}
		os.RemoveAll(dir)
	}
	if len(failures) > 0 {
		sort.Strings(failures)
		for i, f := range failures {
			if i == 10 {
				t.Errorf("... and %d more", len(failures)-10)
				break
			}
			t.Error(f)
		}
	}
}

// dmgLastRecordOffset returns the offset of the last record of the log
// segment at path.
func dmgLastRecordOffset(t *testing.T, path string) int64 {
	t.Helper()
	offs := dmgRecordOffsets(t, path)
	return offs[len(offs)-1]
}

// dmgRecordOffsets returns 0 and the offset of each record of the log
// segment at path.
func dmgRecordOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := []int64{0}
	off := int64(20)
	for off+12 <= int64(len(b)) {
		n := int64(uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16 | uint32(b[off+3])<<24)
		offs = append(offs, off)
		off += 12 + n
	}
	if len(offs) < 2 || off != int64(len(b)) {
		t.Fatalf("%s: cannot frame its records", path)
	}
	return offs
}
