package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
