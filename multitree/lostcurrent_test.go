package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestLostCurrentRefused: a database that lost its current pointer is not
// taken for an empty directory. Open (writer, read-only, CreateIfMissing)
// and an import refuse it with ErrCorrupt and change nothing, and with
// current put back the database opens at its latest version. It holds a
// snapshot newer than 0 and a log in one case, only snapshot 0 and a log
// in the other (no rewrite yet).
func TestLostCurrentRefused(t *testing.T) {
	for _, rewrite := range []bool{true, false} {
		name := "snapshot-and-log"
		if !rewrite {
			name = "log-only"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			hashes := commitN(t, db, 3, 6)
			if rewrite {
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
				for v, h := range commitN(t, db, 3, 4) {
					hashes[v] = h
				}
			}
			latest := db.Version()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			cur := filepath.Join(dir, currentFileName)
			saved, err := os.ReadFile(cur)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(cur); err != nil {
				t.Fatal(err)
			}
			before := treeListing(t, dir)
			for _, opts := range []Options{{CreateIfMissing: true, InitialStores: crashStores}, {}, {ReadOnly: true}} {
				if db, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
					if err == nil {
						db.Close()
					}
					t.Errorf("open %+v without current: %v, want ErrCorrupt", opts, err)
				}
			}
			if v, err := LatestVersion(dir); !errors.Is(err, ErrCorrupt) {
				t.Errorf("LatestVersion without current: %d, %v, want ErrCorrupt", v, err)
			}
			if _, err := Import(dir, 50, nil, ImportOptions{Stores: crashStores}); !errors.Is(err, ErrCorrupt) {
				t.Errorf("import into the database without current: %v, want ErrCorrupt", err)
			}
			if after := treeListing(t, dir); after != before {
				t.Fatalf("the refusals changed the directory:\n%s\nwas\n%s", after, before)
			}
			if err := os.WriteFile(cur, saved, 0o644); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if db.Version() != latest || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[latest]) {
				t.Fatalf("with current restored: version %d, want %d with its hash", db.Version(), latest)
			}
		})
	}
}

// TestInterruptedImportMarker: an in-place import stopped after its
// snapshot was renamed into place and before current (the state is made
// by hand: a finished import's current removed, its marker put back) is
// what the marker says it is: a read-only open finds no database, a
// writer open that may create one creates the empty database asked for
// and removes the import's snapshot and the marker, and an import into it
// starts over. A marker left beside current (an import stopped after
// writing current) is removed by a writer open and ignored by readers.
func TestInterruptedImportMarker(t *testing.T) {
	interrupted := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "db")
		if _, err := Import(dir, 40, nil, ImportOptions{Stores: crashStores}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, importFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a finished import left its marker: %v", err)
		}
		if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil {
			t.Fatal(err)
		}
		if err := writeImportMarker(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	t.Run("open", func(t *testing.T) {
		dir := interrupted(t)
		if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("read-only open of an interrupted import: %v, want ErrNotFound", err)
		}
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != 0 || len(db.StoreNames()) != 1 {
			t.Errorf("created over an interrupted import: version %d, stores %v", db.Version(), db.StoreNames())
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{importFileName, snapshotDirName(40)} {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left after the create: %v", name, err)
			}
		}
	})

	t.Run("import", func(t *testing.T) {
		dir := interrupted(t)
		info, err := Import(dir, 41, nil, ImportOptions{Stores: crashStores})
		if err != nil {
			t.Fatalf("import over an interrupted import: %v", err)
		}
		db, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if db.Version() != 41 || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
			t.Errorf("after the import: version %d", db.Version())
		}
		if _, err := os.Stat(filepath.Join(dir, snapshotDirName(40))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the interrupted import's snapshot is left: %v", err)
		}
	})

	t.Run("beside-current", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		if _, err := Import(dir, 40, nil, ImportOptions{Stores: crashStores}); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(dir, importFileName)
		if err := writeImportMarker(dir); err != nil {
			t.Fatal(err)
		}
		ro, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		ro.Close()
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("a read-only open changed the directory: %v", err)
		}
		db, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != 40 {
			t.Errorf("version %d, want 40", db.Version())
		}
		db.Close()
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the writer open left the stale marker: %v", err)
		}
		// without the marker, a lost current is refused
		if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, Options{CreateIfMissing: true}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("open after current was lost: %v, want ErrCorrupt", err)
		}
	})
}

// treeListing lists every entry under dir with its size.
func treeListing(t *testing.T, dir string) string {
	t.Helper()
	var b bytes.Buffer
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Name() == lockFileName {
			return nil
		}
		if fi.IsDir() {
			fmt.Fprintf(&b, "%s/\n", p)
		} else {
			fmt.Fprintf(&b, "%s %d %s\n", p, fi.Size(), fi.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestLostFirstLogSegment: a database still at snapshot 0 whose log lost
// its first segment is refused (ErrCorrupt) by every open, whatever its
// initial version, where it would otherwise open at the latest version
// with the first segment's versions missing from its state. A database
// without the record of its first commit (written before the record
// existed) opens as before.
func TestLostFirstLogSegment(t *testing.T) {
	for _, initial := range []int64{0, 100} {
		t.Run(fmt.Sprintf("initial-%d", initial), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, WALSegmentSize: 16 << 10})
			if err != nil {
				t.Fatal(err)
			}
			if initial > 0 {
				if err := db.SetInitialVersion(initial); err != nil {
					t.Fatal(err)
				}
			}
			hashes := commitN(t, db, 5, 20)
			latest := db.Version()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := readFirst(dir); err != nil || got != max(initial, 1) {
				t.Fatalf("recorded first version %d (%v), want %d", got, err, max(initial, 1))
			}
			ents, err := os.ReadDir(filepath.Join(dir, walDirName))
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) < 3 {
				t.Fatalf("the log has %d segments; the test needs several", len(ents))
			}
			seg := filepath.Join(dir, walDirName, ents[0].Name())
			saved, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(seg); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{{}, {ReadOnly: true}, {CreateIfMissing: true}} {
				if db, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
					if err == nil {
						t.Errorf("open %+v without the first log segment: at version %d, want ErrCorrupt", opts, db.Version())
						db.Close()
					} else {
						t.Errorf("open %+v without the first log segment: %v, want ErrCorrupt", opts, err)
					}
				}
			}
			if _, err := Verify(dir); err == nil {
				t.Error("Verify passed a log without its first segment")
			}
			if err := os.WriteFile(seg, saved, 0o644); err != nil {
				t.Fatal(err)
			}
			// written before the record existed: opened as it is
			if err := os.Remove(filepath.Join(dir, firstFileName)); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{{ReadOnly: true}, {}} {
				db, err := Open(dir, opts)
				if err != nil {
					t.Fatalf("open %+v without the record: %v", opts, err)
				}
				if db.Version() != latest || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[latest]) {
					t.Errorf("open %+v without the record: version %d, want %d with its hash", opts, db.Version(), latest)
				}
				db.Close()
			}
		})
	}
}

// TestCreateBesideAnotherWriter: an open that may create the database and
// found none, while another writer creates it and commits before the lock
// is taken, opens that database instead of creating one over it (which
// would set current back to 0 and remove the newer snapshot).
func TestCreateBesideAnotherWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	var hashes map[int64][]byte
	beforeCreateLock = func(string) {
		beforeCreateLock = nil
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		hashes = commitN(t, db, 8, 5)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { beforeCreateLock = nil }()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 5 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[5]) {
		t.Fatalf("opened at version %d, want the other writer's 5 with its hash", db.Version())
	}
	if vs, err := listSnapshots(dir); err != nil || !slices.Contains(vs, 5) {
		t.Fatalf("snapshots %v (%v): the other writer's snapshot 5 is gone", vs, err)
	}
}

// TestRemoveDatabase: RemoveDatabase removes the database's files (not
// others, nor the lock file), is refused while a writer has it open, and
// leaves a directory where a new database can be created or imported;
// stopped after it removed current, it leaves what an interrupted import
// leaves, which an open that may create the database clears.
func TestRemoveDatabase(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 9, 4)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 9, 2)
	if err := RemoveDatabase(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("RemoveDatabase of an open database: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveDatabase(dir); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{lockFileName, "notes.txt"}) {
		t.Fatalf("left after RemoveDatabase: %v", names)
	}

	// stopped after current: the marker says what the rest is
	db, err = Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 9, 3)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeImportMarker(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, currentFileName)); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"x"}})
	if err != nil {
		t.Fatalf("open after a removal stopped after current: %v", err)
	}
	defer db.Close()
	if db.Version() != 0 || !slices.Equal(db.StoreNames(), []string{"x"}) {
		t.Errorf("created: version %d, stores %v", db.Version(), db.StoreNames())
	}
}

// TestRemoveDatabaseFullDisk: RemoveDatabase works on a full file system
// (a failed migration that filled the disk gives its database up so): the
// marker it makes first is an empty file. It needs a tmpfs mount (root).
func TestRemoveDatabaseFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	dir := filepath.Join(mnt, "db")
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// fill the file system
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{1}, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			t.Logf("filler: %v", err)
			break
		}
	}
	f.Close()
	err = RemoveDatabase(dir)
	_, statErr := os.Stat(filepath.Join(dir, currentFileName))
	t.Logf("RemoveDatabase on a full disk: %v; current after it: %v", err, statErr)
	if err != nil || statErr == nil {
		t.Errorf("RemoveDatabase on a full disk: %v; current after it: %v", err, statErr)
	}
}

// TestRemoveDatabaseBesideReplaced: a replacing import on a file system
// without RENAME_EXCHANGE stopped after its second rename, before it
// removed the old database (dir+".replaced.tmp"); RemoveDatabase(dir)
// removes that too, so that the next open creates a database rather than
// moving the old one back or failing.
func TestRemoveDatabaseBesideReplaced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 4)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// the old database, left beside by the interrupted swap
	testutil.CopyDir(t, dir, dir+replacedSuffix)
	v, err := LatestVersion(dir)
	t.Logf("LatestVersion before removal: %d %v", v, err)
	if err := RemoveDatabase(dir); err != nil {
		t.Fatal(err)
	}
	v, err = LatestVersion(dir)
	t.Logf("LatestVersion after removal: %d %v", v, err)
	if v != 0 || err != nil {
		t.Errorf("LatestVersion after RemoveDatabase: %d, %v; want 0", v, err)
	}
	db, err = Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"x"}})
	if err != nil {
		t.Fatalf("open after RemoveDatabase: %v", err)
	}
	if db.Version() != 0 || !slices.Equal(db.StoreNames(), []string{"x"}) {
		t.Errorf("opened at version %d, stores %v; want a new database", db.Version(), db.StoreNames())
	}
	db.Close()
}

// TestReferenceLayoutRefused: a directory in the reference memiavl's layout
// (current a symbolic link to snapshot-<version>, which holds __metadata;
// both stores name their directory memiavl.db in a node's home) is refused
// by every open, LatestVersion, Verify, RemoveDatabase and an import with
// ErrReferenceFormat, and no call creates or changes a file in it (not
// even a lock file). A symbolic link without the reference's
// metadata is not taken for one.
func TestReferenceLayoutRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	snap := "snapshot-00000000000000000007"
	for _, d := range []string{filepath.Join(dir, snap, "bank"), filepath.Join(dir, "wal")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{
		filepath.Join(snap, "__metadata"):            "\x0a\x02\x08\x07",
		filepath.Join(snap, "bank", "kvs"):           "x",
		filepath.Join("wal", "00000000000000000001"): "y",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(snap, filepath.Join(dir, currentFileName)); err != nil {
		t.Fatal(err)
	}
	before := dirFingerprint(t, dir)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrReferenceFormat) || !strings.Contains(err.Error(), "import-memiavl") {
			t.Fatalf("%s: %v, want ErrReferenceFormat naming import-memiavl", what, err)
		}
	}
	for _, opts := range []Options{{}, {CreateIfMissing: true}, {ReadOnly: true}, {TargetVersion: 7}} {
		db, err := Open(dir, opts)
		if err == nil {
			db.Close()
		}
		check(fmt.Sprintf("Open %+v", opts), err)
	}
	_, err := LatestVersion(dir)
	check("LatestVersion", err)
	_, err = Verify(dir)
	check("Verify", err)
	for _, replace := range []bool{false, true} {
		_, err = Import(dir, 7, map[string]NodeSource{}, ImportOptions{Replace: replace})
		check(fmt.Sprintf("Import (Replace %v)", replace), err)
		if !errors.Is(err, ErrExists) {
			t.Fatalf("Import: %v, want ErrExists", err)
		}
	}
	check("RemoveDatabase", RemoveDatabase(dir))
	// the advice names the directory without a trailing separator,
	// which would move it into itself
	_, err = LatestVersion(dir + "/")
	if want := "mv " + dir + " " + dir + ".ref &&"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("LatestVersion of %s/: %v, want the advice %q", dir, err, want)
	}
	if after := dirFingerprint(t, dir); after != before {
		t.Fatalf("the directory changed:\n%s\nwas\n%s", after, before)
	}

	// without __metadata in its target, a linked current is not the
	// reference's
	if err := os.Remove(filepath.Join(dir, snap, "__metadata")); err != nil {
		t.Fatal(err)
	}
	if _, err := LatestVersion(dir); err == nil || errors.Is(err, ErrReferenceFormat) {
		t.Fatalf("LatestVersion without the reference's metadata: %v", err)
	}
}

// TestLostCurrentSnapshotOneRefused: snapshot 1 alone (its log gone too)
// is a database's state as well, not what an interrupted create leaves (an
// empty snapshot 0): without current, Open refuses it and changes nothing.
func TestLostCurrentSnapshotOneRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 1)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{currentFileName, walDirName, snapshotDirName(0)} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := treeListing(t, dir)
	if !strings.Contains(before, snapshotDirName(1)) {
		t.Fatalf("no snapshot 1:\n%s", before)
	}
	for _, opts := range []Options{{CreateIfMissing: true, InitialStores: crashStores}, {ReadOnly: true}} {
		if db, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
			if err == nil {
				db.Close()
			}
			t.Errorf("open %+v of snapshot 1 without current: %v, want ErrCorrupt", opts, err)
		}
	}
	if after := treeListing(t, dir); after != before {
		t.Fatalf("the refusals changed the directory:\n%s\nwas\n%s", after, before)
	}
}
