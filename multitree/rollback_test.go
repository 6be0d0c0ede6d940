package multitree

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// cutLog cuts the closed database's log in dir back to version v, as a
// crash that lost the later entries would.
func cutLog(t *testing.T, dir string, v int64) {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBack(v); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func commitN(t *testing.T, db *DB, seed int64, n int) map[int64][]byte {
	t.Helper()
	hashes := map[int64][]byte{}
	for i := 0; i < n; i++ {
		v := db.WorkingVersion()
		hashes[v] = commitBlock(t, db, crashBlock(seed, v))
	}
	return hashes
}

func TestRollbackAndIdempotentRecommit(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 10, SnapshotKeepRecent: 3})
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 1, 45)
	db.Close()

	// writer open at an older version without rollback: re-committing the
	// logged versions with the same content is accepted, other content not
	db, err = Open(dir, Options{TargetVersion: 38})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 38 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[38]) {
		t.Fatalf("opened at %d", db.Version())
	}
	if got := commitN(t, db, 1, 2); !bytes.Equal(got[40], hashes[40]) {
		t.Fatal("idempotent re-commit produced another hash")
	}
	if err := db.Set("bank", []byte("other"), []byte("content")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting re-commit: %v", err)
	}
	db.Close()

	// rollback to 25 discards 26..45, including newer snapshots
	db, err = Open(dir, Options{TargetVersion: 25, Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 25 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[25]) {
		t.Fatalf("rolled back to %d", db.Version())
	}
	// commit different content at 26.. and reopen: the old future is gone
	if err := db.Set("bank", []byte("new"), []byte("future")); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(info.Hash(), hashes[26]) {
		t.Fatal("different content, same hash")
	}
	db.Close()
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 26 || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
		t.Fatalf("after rollback and commit, reopened at %d", db.Version())
	}
	if v, _ := db.Get("bank", []byte("new")); string(v) != "future" {
		t.Fatal("lost the commit after rollback")
	}
}

func TestOptionsValidation(t *testing.T) {
	dir := t.TempDir()
	bad := []Options{
		{InitialVersion: -1},
		{SnapshotKeepRecent: -1},
		{Rollback: true},
		{Rollback: true, TargetVersion: 3, ReadOnly: true},
		{ReadOnly: true, CreateIfMissing: true},
		{CreateIfMissing: true, InitialStores: []string{"a", "a"}},
		{CreateIfMissing: true, InitialStores: []string{""}},
		{Sync: wal.SyncPolicy(99)},
		{RewriteRateLimit: -1},
		{RewriteRateLimit: MinRewriteRateLimit - 1},
	}
	for i, o := range bad {
		if _, err := Open(dir, o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("options %d (%+v): %v", i, o, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing database: %v", err)
	}
}

func TestCorruptMetadataAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 2, 5)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := db.LastCommitInfo().Hash()
	db.Close()

	// leftovers of an interrupted rewrite are removed by the next writer
	leftover := filepath.Join(dir, snapshotDirName(9)+tmpSuffix)
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(db.LastCommitInfo().Hash(), h) {
		t.Fatal("hash changed")
	}
	db.Close()
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatal("leftover not removed")
	}

	// a flipped byte in the metadata is caught on open
	mpath := filepath.Join(dir, snapshotDirName(5), metadataFileName)
	b, _ := os.ReadFile(mpath)
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		os.WriteFile(mpath, c, 0o644)
		if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipped metadata byte %d: %v", i, err)
		}
	}
	os.WriteFile(mpath, b, 0o644)
	// a snapshot whose root does not match the metadata is caught
	os.WriteFile(filepath.Join(dir, currentFileName), []byte("garbage"), 0o644)
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt current pointer: %v", err)
	}
}

// TestLogBehindSnapshot covers a log that lost entries a snapshot already
// holds (a machine crash under a relaxed fsync policy): the database opens
// at the snapshot and the log continues after it.
func TestLogBehindSnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 4, 10)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cutLog(t, dir, 7)
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != 10 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[10]) {
		t.Fatalf("opened at %d", db.Version())
	}
	more := commitN(t, db, 4, 2)
	db.Close()
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 12 || !bytes.Equal(db.LastCommitInfo().Hash(), more[12]) {
		t.Fatalf("reopened at %d", db.Version())
	}
}

// TestInterruptedRollback stops a rollback once the file recording it is
// written: before anything is discarded, and after the newer snapshots are
// gone and the log is cut back part of the way (as a crash in wal's
// truncation leaves it). Until a writer finishes the rollback, every open
// and LatestVersion take its target for the latest version; the next
// writer Open, with whatever options, finishes it.
func TestInterruptedRollback(t *testing.T) {
	src := t.TempDir()
	db, err := Open(src, Options{CreateIfMissing: true, InitialStores: crashStores,
		SnapshotInterval: 10, SnapshotKeepRecent: 3, WALSegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 3, 45)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const cut = 25

	stops := map[string]func(db *DB, cut int64) error{
		"before anything": func(*DB, int64) error { return errStop },
		"part way": func(db *DB, cut int64) error {
			current, err := readCurrent(db.dir)
			if err != nil {
				return err
			}
			if err := db.rollback(current, 33); err != nil {
				return err
			}
			return errStop
		},
	}
	opens := []struct {
		name        string
		opts        Options
		version     int64 // the version it opens at
		latestAfter int64 // LatestVersion once it is closed
	}{
		{"plain", Options{}, cut, cut},
		{"at an older version", Options{TargetVersion: 20}, 20, cut},
		{"rollback further", Options{TargetVersion: 12, Rollback: true}, 12, 12},
		{"the same rollback", Options{TargetVersion: cut, Rollback: true}, cut, cut},
	}
	for stopName, stop := range stops {
		for _, o := range opens {
			t.Run(stopName+"/"+o.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "db")
				testutil.CopyDir(t, src, dir)
				duringRollback = stop
				_, err := Open(dir, Options{TargetVersion: cut, Rollback: true})
				duringRollback = nil
				if !errors.Is(err, errStop) {
					t.Fatalf("interrupted rollback: %v", err)
				}
				checkLatest(t, dir, cut, hashes[cut])
				if rep, err := Verify(dir); err != nil || rep.RollbackTo != cut || rep.Version != cut {
					t.Fatalf("verify of an unfinished rollback: %+v, %v", rep, err)
				}
				if _, err := Open(dir, Options{ReadOnly: true, TargetVersion: 40}); !errors.Is(err, ErrVersion) {
					t.Fatalf("read-only open past the rollback's target: %v", err)
				}
				if _, err := Open(dir, Options{TargetVersion: 40}); !errors.Is(err, ErrVersion) {
					t.Fatalf("writer open past the rollback's target: %v", err)
				}

				db, err := Open(dir, o.opts)
				if err != nil {
					t.Fatal(err)
				}
				if db.Version() != o.version || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[o.version]) {
					t.Fatalf("opened at %d, want %d with its hash", db.Version(), o.version)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, rollbackFileName)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the rollback's file is left after the writer's open: %v", err)
				}
				checkLatest(t, dir, o.latestAfter, hashes[o.latestAfter])
				if rep, err := Verify(dir); err != nil || rep.RollbackTo != 0 {
					t.Fatalf("verify after the rollback finished: %+v, %v", rep, err)
				}
				if versions, err := listSnapshots(dir); err != nil || versions[len(versions)-1] > o.latestAfter {
					t.Fatalf("snapshots %v (%v) after the rollback to %d", versions, err, o.latestAfter)
				}

				commitsAfterRollback(t, dir, o.latestAfter)
			})
		}
	}

	t.Run("damaged record", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		testutil.CopyDir(t, src, dir)
		b := encodeRollback(cut)
		b[9] ^= 1
		if err := os.WriteFile(filepath.Join(dir, rollbackFileName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, o := range []Options{{}, {ReadOnly: true}} {
			if _, err := Open(dir, o); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), rollbackFileName) {
				t.Fatalf("open (read-only %v) with a damaged rollback file: %v", o.ReadOnly, err)
			}
		}
		if _, err := LatestVersion(dir); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("LatestVersion with a damaged rollback file: %v", err)
		}
	})

	// a record at or past the latest version: the rollback discarded
	// everything after its target and stopped before removing it
	t.Run("finished", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		testutil.CopyDir(t, src, dir)
		if err := os.WriteFile(filepath.Join(dir, rollbackFileName), encodeRollback(45), 0o644); err != nil {
			t.Fatal(err)
		}
		checkLatest(t, dir, 45, hashes[45])
		db, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != 45 {
			t.Fatalf("opened at %d", db.Version())
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, rollbackFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the finished rollback's file is left: %v", err)
		}
	})
}

var errStop = errors.New("stopped")

// commitsAfterRollback checks that the discarded versions are gone: a
// writer opens dir at latest and commits other content as latest+1.
func commitsAfterRollback(t *testing.T, dir string, latest int64) {
	t.Helper()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Set("bank", []byte("after"), []byte("rollback")); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil || info.Version != latest+1 {
		t.Fatalf("commit after the rollback: %v, %v", info, err)
	}
}

// checkLatest checks that LatestVersion and a read-only open of dir give
// version v with app hash hash.
func checkLatest(t *testing.T, dir string, v int64, hash []byte) {
	t.Helper()
	if got, err := LatestVersion(dir); err != nil || got != v {
		t.Fatalf("LatestVersion %d (%v), want %d", got, err, v)
	}
	db, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != v || !bytes.Equal(db.LastCommitInfo().Hash(), hash) {
		t.Fatalf("read-only open at %d, want %d with its hash", db.Version(), v)
	}
}

// TestReadOnlyOpenBesideRollback begins a rollback (its file written, as
// the writer does first) while a read-only open has read past the file:
// the open must start again and stop at the rollback's target, not serve a
// version the rollback discards.
func TestReadOnlyOpenBesideRollback(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 10})
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 4, 30)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	once := false
	beforeOpenLog = func(dir string) {
		if !once {
			once = true
			if err := writeFileAtomic(dir, rollbackFileName, encodeRollback(24)); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { beforeOpenLog = nil }()
	db, err = Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !once {
		t.Fatal("the hook did not run")
	}
	if db.Version() != 24 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[24]) {
		t.Fatalf("read-only open beside a rollback to 24 served version %d", db.Version())
	}
}

// TestRecommitUpgradeOrder: re-committing a logged version whose upgrades
// add or delete the same stores in another order (over several calls, or
// within one) is accepted: the stores, and so the app hash, are the same.
func TestRecommitUpgradeOrder(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b", "c"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	upgrade := func(db *DB, ups ...wal.Upgrades) {
		t.Helper()
		for _, u := range ups {
			if err := db.ApplyUpgrades(u); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Set("x", []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"a", "b", "c"} {
		if err := db.Set(s, []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	upgrade(db, wal.Upgrades{Added: []string{"x", "y"}, Deleted: []string{"a", "b"}})
	info2, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ups := range [][]wal.Upgrades{
		{{Added: []string{"y", "x"}, Deleted: []string{"b", "a"}}},
		{{Deleted: []string{"b"}, Added: []string{"y"}}, {Deleted: []string{"a"}, Added: []string{"x"}}},
	} {
		db, err := Open(dir, Options{TargetVersion: 1})
		if err != nil {
			t.Fatal(err)
		}
		upgrade(db, ups...)
		info, err := db.Commit()
		if err != nil || !bytes.Equal(info.Hash(), info2.Hash()) {
			t.Errorf("re-commit %d of version 2 with its upgrades in another order: %v", i, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecommitSameTrees: re-committing a logged version (a writer open at
// an older TargetVersion) is accepted when its writes differ from the
// logged ones only by deletes of absent keys, as the trees and so the app
// hash are the same; other content is still refused with ErrConflict, a
// set of a key to the value it has too.
func TestRecommitSameTrees(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	set := func(db *DB, store, k, v string) {
		t.Helper()
		if err := db.Set(store, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	set(db, "a", "k1", "v1")
	set(db, "b", "k1", "v1")
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	// version 2: a change and a delete of an absent key (a set of a key to
	// its value is a change: the leaf takes the new version)
	set(db, "a", "k2", "v2")
	if err := db.Delete("a", []byte("absent")); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete("b", []byte("absent")); err != nil {
		t.Fatal(err)
	}
	info2, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	recommit := func(writes func(db *DB)) (*storetypes.CommitInfo, error) {
		t.Helper()
		db, err := Open(dir, Options{TargetVersion: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		writes(db)
		return db.Commit()
	}
	info, err := recommit(func(db *DB) { set(db, "a", "k2", "v2") })
	if err != nil || !bytes.Equal(info.Hash(), info2.Hash()) {
		t.Fatalf("re-commit of version 2 without its no-op writes: %v", err)
	}
	if _, err := recommit(func(db *DB) { set(db, "a", "k2", "other") }); !errors.Is(err, ErrConflict) {
		t.Fatalf("re-commit of version 2 with another value: %v, want ErrConflict", err)
	}
	if _, err := recommit(func(db *DB) {
		set(db, "a", "k2", "v2")
		set(db, "b", "k3", "v3")
	}); !errors.Is(err, ErrConflict) {
		t.Fatalf("re-commit of version 2 with one more key: %v, want ErrConflict", err)
	}
	if _, err := recommit(func(db *DB) {
		set(db, "a", "k2", "v2")
		set(db, "b", "k1", "v1")
	}); !errors.Is(err, ErrConflict) {
		t.Fatalf("re-commit of version 2 with a key set to its value: %v, want ErrConflict", err)
	}
	// the log still holds the original version 2
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 2 || !bytes.Equal(db.LastCommitInfo().Hash(), info2.Hash()) {
		t.Fatalf("reopened at %d", db.Version())
	}
}

// TestStaleCurrentKeepsNewerSnapshots: a writer open whose current names a
// snapshot that does not open (here: one already pruned, as a current file
// restored from an older copy would) must fail without removing the newer
// snapshot, which it would otherwise take for an interrupted rewrite's
// leftover; once current is put right, the database opens as before.
func TestStaleCurrentKeepsNewerSnapshots(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 6, 5)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, currentFileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(0))); !os.IsNotExist(err) {
		t.Fatalf("snapshot 0 was not pruned: %v", err)
	}
	if err := writeFileReplace(dir, currentFileName, encodeCurrent(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("writer open with current naming a missing snapshot: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDirName(5), metadataFileName)); err != nil {
		t.Fatalf("the failed open removed the newer snapshot: %v", err)
	}
	if err := writeFileReplace(dir, currentFileName, good); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 5 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[5]) {
		t.Fatalf("reopened at %d", db.Version())
	}
}

// TestMissingLogDirectory: a database whose log directory is gone has lost
// the versions after its snapshot; opens must say so instead of starting a
// new log at the snapshot's version.
func TestMissingLogDirectory(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 7, 4)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, walDirName)); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {ReadOnly: true}, {CreateIfMissing: true}} {
		if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
			t.Errorf("open %+v without the log directory: %v, want ErrCorrupt", opts, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName)); !os.IsNotExist(err) {
		t.Errorf("a failed open created the log directory: %v", err)
	}
	// a new database has its log directory from the start
	fresh := filepath.Join(t.TempDir(), "fresh")
	db, err = Open(fresh, Options{CreateIfMissing: true, InitialStores: crashStores})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(fresh, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a new database: %v", err)
	}
	ro.Close()
}
