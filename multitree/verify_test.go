package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// verifyDB builds, in a new directory, a closed database of 13 versions
// with a snapshot at 8, and returns the directory and its app hash.
func verifyDB(t *testing.T) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 8)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 5)
	h := db.LastCommitInfo().Hash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, h
}

func TestVerify(t *testing.T) {
	dir, h := verifyDB(t)

	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Version != 13 || !bytes.Equal(rep.AppHash, h) || len(rep.Stores) != 3 {
		t.Fatalf("report %+v", rep)
	}

	// a flipped byte in a tree's data file fails verification
	kvs := filepath.Join(dir, snapshotDirName(8), treeDirName("bank"), "kvs")
	orig, err := os.ReadFile(kvs)
	if err != nil {
		t.Fatal(err)
	}
	c := bytes.Clone(orig)
	c[len(c)/2] ^= 1
	os.WriteFile(kvs, c, 0o644)
	if _, err := Verify(dir); err == nil {
		t.Fatal("corrupt kvs passed verification")
	}
	os.WriteFile(kvs, orig, 0o644)

	// a flipped byte inside the log fails verification
	segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if len(segs) == 0 {
		t.Fatal("no log segments")
	}
	seg := segs[0]
	orig, _ = os.ReadFile(seg)
	c = bytes.Clone(orig)
	c[len(c)/3] ^= 1
	os.WriteFile(seg, c, 0o644)
	if _, err := Verify(dir); err == nil {
		t.Fatal("corrupt log passed verification")
	}
	os.WriteFile(seg, orig, 0o644)
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// snapshotAt8 creates a database in dir with its current snapshot at
// version 8 and returns it open, with background rewrites off, and the
// path of the bank store's kvs file in that snapshot.
func snapshotAt8(t *testing.T, dir string) (*DB, string) {
	t.Helper()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 8)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	kvs := filepath.Join(dir, snapshotDirName(8), treeDirName("bank"), "kvs")
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 2 {
		t.Fatalf("%s has %d bytes", kvs, fi.Size())
	}
	return db, kvs
}

// TestVerifySnapshot: the snapshot a database works from passes, a flipped
// byte in it fails with ErrCorrupt while the database stays usable, and a
// closed database refuses.
func TestVerifySnapshot(t *testing.T) {
	dir := t.TempDir()
	db, kvs := snapshotAt8(t, dir)
	commitN(t, db, 9, 3)
	if err := db.VerifySnapshot(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(kvs)
	restore := testutil.DamageByte(t, kvs, fi.Size()/2)
	if err := db.VerifySnapshot(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), snapshotDirName(8)) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	restore()
	if err := db.VerifySnapshot(); err != nil {
		t.Fatalf("after repair: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.VerifySnapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// TestVerifySnapshotAfterBackgroundRewrite: a background rewrite maps its
// snapshot before renaming it into place, and catches up meanwhile; once
// switched to, the snapshot's checks find its files under their final
// names, and a damaged one is named by them.
func TestVerifySnapshotAfterBackgroundRewrite(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	DelayRewrites(db, 3) // the catch-up has versions to rebase
	// the rewrite of 5 starts with its commit and waits for version 8;
	// its end is waited for (not a number of commits: a rewrite slower
	// than 200 commits on a loaded machine failed the test), and the
	// next commit switches to it
	commitN(t, db, 1, 8)
	waitRewrite(db)
	commitN(t, db, 1, 1)
	if v := db.SnapshotVersion(); v != 5 {
		t.Fatalf("snapshot %d at version %d, want the rewrite of version 5 switched to", v, db.Version())
	}
	if err := db.VerifySnapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(5)+tmpSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the rewrite's temporary directory after the switch: %v", err)
	}
	kvs := filepath.Join(dir, snapshotDirName(5), treeDirName("bank"), "kvs")
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	restore := testutil.DamageByte(t, kvs, fi.Size()/2)
	if err := db.VerifySnapshot(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
		t.Fatalf("corrupt snapshot: %v, want ErrCorrupt naming %s", err, kvs)
	}
	restore()
	if err := db.VerifySnapshot(); err != nil {
		t.Fatalf("after repair: %v", err)
	}
}

// TestRewriteOverDamagedSnapshot: a rewrite refuses to copy from a snapshot
// whose checksums fail, offline (RewriteSnapshot's error) and in the
// background (the next Commits report ErrRewrite wrapping ErrCorrupt after
// committing); the database goes on from its snapshot and rewrites again
// once the damage is repaired.
func TestRewriteOverDamagedSnapshot(t *testing.T) {
	dir := t.TempDir()
	db, kvs := snapshotAt8(t, dir)
	fi, _ := os.Stat(kvs)
	restore := testutil.DamageByte(t, kvs, fi.Size()/2)
	commitN(t, db, 1, 2)
	if err := db.RewriteSnapshot(context.Background()); !errors.Is(err, ErrCorrupt) ||
		!strings.Contains(err.Error(), fmt.Sprintf("snapshot at version %d", db.Version())) {
		t.Fatalf("offline rewrite over a damaged snapshot: %v (want ErrCorrupt, naming the version)", err)
	}
	if v := db.SnapshotVersion(); v != 8 {
		t.Fatalf("snapshot %d after the failed rewrite, want 8", v)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(dir, Options{SnapshotInterval: 2, OpenCheck: OpenCheckNone}) // the rewrite's own check
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var failed error
	for i := 0; i < 200 && failed == nil; i++ {
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(1, v)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			failed = err
			if db.Version() != v {
				t.Fatalf("version %d not committed with the report: %v", v, err)
			}
		}
		waitRewrite(db) // the next commit reports its end
	}
	if !errors.Is(failed, ErrRewrite) || !errors.Is(failed, ErrCorrupt) {
		t.Fatalf("background rewrite over a damaged snapshot: %v", failed)
	}
	if v := db.SnapshotVersion(); v != 8 {
		t.Fatalf("snapshot %d after the failed rewrite, want 8", v)
	}
	// repaired while no rewrite runs: a rewrite reads the files over time
	if err := db.Close(); !errors.Is(err, ErrRewrite) && err != nil {
		t.Fatal(err)
	}
	restore()
	db, err = Open(dir, Options{SnapshotInterval: 2, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 200 && db.SnapshotVersion() == 8; i++ {
		commitN(t, db, 1, 1)
		waitRewrite(db) // the next commit switches to its snapshot
	}
	if db.SnapshotVersion() == 8 {
		t.Fatal("no rewrite after the repair")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyLogAfterSnapshotZero: with the empty snapshot 0 kept beside a
// newer one, the log must start at the database's first version, which a
// newer snapshot records (an initial version set by SetInitialVersion is
// not recorded with snapshot 0): a log that lost its first segment fails
// Verify, one that starts at the initial version passes.
func TestVerifyLogAfterSnapshotZero(t *testing.T) {
	for _, initial := range []int64{0, 100} {
		t.Run(fmt.Sprint("initial=", initial), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 10, SnapshotKeepRecent: 5})
			if err != nil {
				t.Fatal(err)
			}
			if initial > 0 {
				if err := db.SetInitialVersion(initial); err != nil {
					t.Fatal(err)
				}
			}
			commitN(t, db, 4, 25)
			// Close cancels a rewrite still running: on a loaded machine
			// the one started at version 10 may not have ended yet
			waitRewrite(db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			versions, err := listSnapshots(dir)
			if err != nil || len(versions) < 2 || versions[0] != 0 {
				t.Fatalf("snapshots %v (%v), want 0 and newer ones", versions, err)
			}
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := max(initial, 1); rep.WALFirst != want {
				t.Fatalf("log starts at %d, want %d", rep.WALFirst, want)
			}
			segs, err := filepath.Glob(filepath.Join(dir, walDirName, "*.wal"))
			if err != nil || len(segs) < 2 {
				t.Fatalf("log segments %v (%v)", segs, err)
			}
			if err := os.Remove(segs[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "snapshot 0 is kept") {
				t.Fatalf("Verify after the first log segment was removed: %v, want ErrCorrupt", err)
			}
		})
	}
}
