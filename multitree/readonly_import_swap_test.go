package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
)

// swapMakeAt creates a database in dir with store "s" holding k=value@v for
// versions 1..n and a snapshot at n (empty log after it).
func swapMakeAt(t *testing.T, dir, value string, n int64) []byte {
	t.Helper()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"s"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= n; v++ {
		if err := db.Set("s", []byte("k"), []byte(fmt.Sprintf("%s@%d", value, v))); err != nil {
			t.Fatal(err)
		}
		if err := db.Set("s", []byte(fmt.Sprintf("%s-only-%d", value, v)), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReadOnlyOpenAcrossImportSwap: the database in dir (version 5,
// snapshot at 5, "old") is replaced by an import at version 5 whose Finish
// commits versions 6 and 7 ("new"). The import's swap lands while a
// read-only Open has mapped dir's snapshot 5 but not yet opened the log.
// The open must serve the old database at 5 or the new one (at 5..7), never
// a state no database held: it served the old snapshot with the new log
// replayed on it, at version 7, with no error. It now reads again.
func TestReadOnlyOpenAcrossImportSwap(t *testing.T) {
	parent := t.TempDir()
	dir := osfile.RealDir(filepath.Join(parent, "db"))
	oldHash := swapMakeAt(t, dir, "old", 5)

	// the source of the import: another database at version 5
	src := filepath.Join(parent, "src")
	swapMakeAt(t, src, "new", 5)
	sdb, err := Open(src, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	view, err := sdb.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()

	newHashes := map[int64][]byte{}
	finish := func(db *DB) error {
		for v := int64(6); v <= 7; v++ {
			if err := db.Set("s", []byte("k"), []byte(fmt.Sprintf("new@%d", v))); err != nil {
				return err
			}
			info, err := db.Commit()
			if err != nil {
				return err
			}
			newHashes[v] = info.Hash()
		}
		return nil
	}
	imported := false
	beforeOpenLog = func(d string) {
		if d != dir || imported {
			return
		}
		imported = true
		srcs := map[string]NodeSource{"s": view.Tree("s").Export()}
		info, err := Import(dir, 5, srcs, ImportOptions{Replace: true, Finish: finish})
		if err != nil {
			t.Errorf("import: %v", err)
			return
		}
		newHashes[5] = info.Hash()
	}
	defer func() { beforeOpenLog = nil }()

	ro, err := Open(dir, Options{ReadOnly: true})
	if !imported {
		t.Fatal("hook not reached")
	}
	if err != nil {
		t.Fatalf("read-only open across the swap: %v (the next attempt reads the new database)", err)
	}
	defer ro.Close()
	v := ro.Version()
	got := ro.LastCommitInfo().Hash()
	k, _ := ro.Get("s", []byte("k"))
	t.Logf("read-only open: version %d, s/k = %q", v, k)
	switch {
	case v == 5 && bytes.Equal(got, oldHash):
	case newHashes[v] != nil && bytes.Equal(got, newHashes[v]):
	default:
		vw, _ := ro.View()
		var keys []string
		it := vw.Tree("s").Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			keys = append(keys, fmt.Sprintf("%s=%s", it.Key(), it.Value()))
		}
		it.Close()
		vw.Release()
		t.Fatalf("read-only open across an import's swap served version %d with app hash %X, held by neither database (old at 5: %X; new: %X); contents %v",
			v, got, oldHash, newHashes[v], keys)
	}
}

// swapMakeStores creates a database in dir with the stores committed at
// versions 1..n (each store's k = value@version), no snapshot but 0.
func swapMakeStores(t *testing.T, dir, value string, stores []string, n int64) {
	t.Helper()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= n; v++ {
		for _, s := range stores {
			if err := db.Set(s, []byte("k"), []byte(fmt.Sprintf("%s@%d", value, v))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyBesideRepeatedImports: read-only opens and Verify in a loop
// while imports at the same height keep replacing the database (their
// swaps exchange whole directories). Every open must serve one of the two
// databases, and every Verify pass, or fail with ErrBusy; never
// ErrCorrupt, which opens that read a snapshot's metadata from one
// database and its trees from the other reported.
func TestReadOnlyBesideRepeatedImports(t *testing.T) {
	var stores []string
	for i := 0; i < 24; i++ {
		stores = append(stores, fmt.Sprintf("store%02d", i))
	}
	parent := t.TempDir()
	dir := osfile.RealDir(filepath.Join(parent, "db"))
	var hashes [2][]byte
	var views [2]*View
	for i, val := range []string{"aaa", "bbb"} {
		src := filepath.Join(parent, val)
		swapMakeStores(t, src, val, stores, 3)
		sdb, err := Open(src, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		hashes[i] = sdb.LastCommitInfo().Hash()
		views[i], _ = sdb.View()
		defer views[i].Release()
	}
	imp := func(i int) {
		srcs := map[string]NodeSource{}
		for _, s := range stores {
			srcs[s] = views[i].Tree(s).Export()
		}
		if _, err := Import(dir, 3, srcs, ImportOptions{Replace: true}); err != nil {
			t.Fatalf("import: %v", err)
		}
	}
	imp(0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var opens, corrupt, other atomic.Int64
	var firstErr atomic.Value
	var verified atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			rep, err := Verify(dir)
			switch {
			case err == nil:
				verified.Add(1)
				if !bytes.Equal(rep.AppHash, hashes[0]) && !bytes.Equal(rep.AppHash, hashes[1]) {
					t.Errorf("Verify reported app hash %X of neither database", rep.AppHash)
				}
			case errors.Is(err, ErrCorrupt):
				corrupt.Add(1)
				firstErr.CompareAndSwap(nil, "Verify: "+err.Error())
			case !errors.Is(err, ErrBusy):
				other.Add(1)
				firstErr.CompareAndSwap(nil, "Verify: "+err.Error())
			}
		}
	}()
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ro, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone})
				if err != nil {
					if errors.Is(err, ErrCorrupt) {
						corrupt.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					} else if !errors.Is(err, ErrBusy) {
						other.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				opens.Add(1)
				h := ro.LastCommitInfo().Hash()
				if !bytes.Equal(h, hashes[0]) && !bytes.Equal(h, hashes[1]) {
					t.Errorf("read-only open served hash %X of neither database", h)
				}
				ro.Close()
			}
		}()
	}
	for i := 0; i < 16; i++ {
		imp((i + 1) % 2)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("opens %d, verified %d, ErrCorrupt %d, other errors %d", opens.Load(), verified.Load(), corrupt.Load(), other.Load())
	if corrupt.Load()+other.Load() > 0 {
		t.Errorf("read-only opens and Verify beside imports of a healthy database failed %d times with ErrCorrupt and %d times otherwise; first: %v",
			corrupt.Load(), other.Load(), firstErr.Load())
	}
}
