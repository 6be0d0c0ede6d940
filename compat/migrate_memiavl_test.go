package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// refFixture is a directory written by the reference memiavl v0.1.0 (see
// testdata/README.md): a snapshot at version 6, its log up to version 14.
const refFixture = "../testdata/refmemiavl-v0.1.0"

// refFixtureState returns the version and app hash the reference reports
// for refFixture (checked against the reference library by the
// benchmarks module's TestRefFixture).
func refFixtureState(t *testing.T) (int64, []byte) {
	t.Helper()
	v, h := testutil.ReadAppHashRecord(t, refFixture+".apphash")
	if v != 14 {
		t.Fatalf("%s.apphash: version %d", refFixture, v)
	}
	return v, h
}

func checkImportedFixture(t *testing.T, dir string, v int64, h []byte) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != v || !bytes.Equal(db.LastCommitInfo().Hash(), h) || fmt.Sprint(db.StoreNames()) != "[bank gov]" {
		t.Fatalf("imported: version %d app hash %X stores %v; the reference: %d %X [bank gov]",
			db.Version(), db.LastCommitInfo().Hash(), db.StoreNames(), v, h)
	}
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// stopAfterImported is a context that is done from its n-th check after
// the imported database's current pointer exists (in dir, or in the
// directory an import replacing a database writes beside it): the
// replay of the reference log is under way. first, when set, runs at
// that check instead of the context being done.
type stopAfterImported struct {
	context.Context
	dir   string
	n     int
	seen  *int
	first func()
}

func (c stopAfterImported) Err() error {
	_, err := os.Stat(filepath.Join(c.dir, "current"))
	if err != nil {
		_, err = os.Stat(filepath.Join(c.dir+".import.tmp", "current"))
	}
	if err != nil {
		return nil
	}
	if *c.seen++; *c.seen < c.n {
		return nil
	}
	if c.first != nil {
		if *c.seen == c.n {
			c.first()
		}
		return nil
	}
	return context.Canceled
}

// TestImportMemIAVLFixture imports a directory of the reference memiavl:
// the result has the reference's version and app hash, the source stays
// as it was, and the import is all or nothing: stopped during the replay
// of the reference's log it leaves no database (a database at version 0
// it was to replace as it was), and what a process killed during the
// replay leaves (a copy of the directory taken then) is refused by every
// open until a rerun replaces it.
func TestImportMemIAVLFixture(t *testing.T) {
	v, h := refFixtureState(t)
	before := testutil.DirDigest(t, refFixture)

	dir := filepath.Join(t.TempDir(), "new", "memiavl.db")
	if err := compat.ImportMemIAVL(refFixture, dir, multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	checkImportedFixture(t, dir, v, h)
	if testutil.DirDigest(t, refFixture) != before {
		t.Fatal("the import changed the reference directory")
	}
	if err := compat.ImportMemIAVL(refFixture, dir, multitree.Options{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("a second import: %v, want ErrExists", err)
	}

	t.Run("stopped during the replay", func(t *testing.T) {
		top := t.TempDir()
		dir := filepath.Join(top, "new", "memiavl.db")
		seen := 0
		err := compat.ImportMemIAVLContext(stopAfterImported{Context: context.Background(), dir: dir, n: 4, seen: &seen}, refFixture, dir, multitree.Options{})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "replay of the reference log stopped before version") {
			t.Fatalf("stopped during the replay: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(top, "new")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a stopped import left the directories it made: %v", err)
		}
	})

	t.Run("stopped during the replay over a database at version 0", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "memiavl.db")
		db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"old"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		seen := 0
		err = compat.ImportMemIAVLContext(stopAfterImported{Context: context.Background(), dir: dir, n: 3, seen: &seen}, refFixture, dir, multitree.Options{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped during the replay: %v", err)
		}
		db, err = multitree.Open(dir, multitree.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != 0 || fmt.Sprint(db.StoreNames()) != "[old]" {
			t.Fatalf("the database the stopped import was to replace: version %d stores %v", db.Version(), db.StoreNames())
		}
		db.Close()
		if err := compat.ImportMemIAVL(refFixture, dir, multitree.Options{}); err != nil {
			t.Fatal(err)
		}
		checkImportedFixture(t, dir, v, h)
	})

	t.Run("killed during the replay", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "memiavl.db")
		crashed := filepath.Join(t.TempDir(), "memiavl.db")
		seen := 0
		ctx := stopAfterImported{Context: context.Background(), dir: dir, n: 5, seen: &seen,
			first: func() { testutil.CopyDir(t, dir, crashed) }}
		if err := compat.ImportMemIAVLContext(ctx, refFixture, dir, multitree.Options{}); err != nil {
			t.Fatal(err)
		}
		checkImportedFixture(t, dir, v, h)

		for _, opts := range []multitree.Options{{ReadOnly: true}, {}, {CreateIfMissing: true}} {
			if _, err := multitree.Open(crashed, opts); !errors.Is(err, multitree.ErrUnfinishedImport) {
				t.Fatalf("Open %+v of the import killed during the replay: %v, want ErrUnfinishedImport", opts, err)
			}
		}
		// a node started on it refuses to load (and LastCommitID, which
		// the SDK's upgrade loader reads first, does not panic)
		ms, err := compat.NewMultiStore(crashed, log.NewNopLogger(), compat.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"bank", "gov"} {
			ms.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
		}
		if id := ms.LastCommitID(); id.Version != 0 {
			t.Fatalf("LastCommitID of the unfinished import: %+v", id)
		}
		if err := ms.LoadLatestVersion(); !errors.Is(err, multitree.ErrUnfinishedImport) {
			t.Fatalf("load of the unfinished import: %v", err)
		}
		ms.Close()
		// the rerun replaces it
		if err := compat.ImportMemIAVL(refFixture, crashed, multitree.Options{}); err != nil {
			t.Fatal(err)
		}
		checkImportedFixture(t, crashed, v, h)
	})
}

// fixtureFiles lists the regular files of refFixture, relative to it.
func fixtureFiles(tb testing.TB) []string {
	var out []string
	err := filepath.WalkDir(refFixture, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(refFixture, p)
		out = append(out, rel)
		return err
	})
	if err != nil || len(out) == 0 {
		tb.Fatalf("the files of %s: %v", refFixture, err)
	}
	sort.Strings(out)
	return out
}

// FuzzImportMemIAVL imports copies of the reference fixture with one of
// its files damaged (a byte changed, the file cut short): the import must
// not panic; it fails and leaves nothing in the directory it was to
// create, or succeeds with a database that verifies. (The reference's
// log has no checksums: a changed byte of a logged value imports a
// different value, as the reference itself would read it.)
func FuzzImportMemIAVL(f *testing.F) {
	files := fixtureFiles(f)
	for i := range files {
		f.Add(uint8(i), uint32(0), uint8(0xff), uint32(0))
		f.Add(uint8(i), uint32(7), uint8(1), uint32(0))
		f.Add(uint8(i), uint32(0), uint8(0), uint32(1))
		f.Add(uint8(i), uint32(40), uint8(0x80), uint32(100))
	}
	f.Fuzz(func(t *testing.T, file uint8, off uint32, xor uint8, cut uint32) {
		ref := filepath.Join(t.TempDir(), "ref")
		testutil.CopyDir(t, refFixture, ref)
		p := filepath.Join(ref, files[int(file)%len(files)])
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			b[int(off)%len(b)] ^= xor
			b = b[:len(b)-int(cut)%(len(b)+1)]
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "new", "memiavl.db")
		if err := compat.ImportMemIAVL(ref, dir, multitree.Options{}); err != nil {
			if _, serr := os.Lstat(filepath.Dir(dir)); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("a failed import (%v) left %s: %v", err, filepath.Dir(dir), serr)
			}
			return
		}
		if _, err := multitree.Verify(dir); err != nil {
			t.Fatalf("the import of a damaged fixture succeeded, but its database does not verify: %v", err)
		}
	})
}
