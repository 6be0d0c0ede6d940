package multitree

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCommitBySnapshot commits versions whose log entries are over the
// bound (here lowered from wal.MaxEntrySize) while background rewrites run:
// each is made durable by a snapshot of its own, the log resumes after it,
// the app hashes and contents follow the reference, reopens land on the
// latest version, and the versions before it that no snapshot holds are
// refused with ErrVersion instead of being rebuilt wrong.
func TestCommitBySnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 4, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	// each rewrite waits for 3 more commits, so that the large versions
	// come while one is in flight and must be dropped
	DelayRewrites(db, 3)
	SetMaxLoggedEntry(db, 128<<10)
	large := map[int64]bool{11: true, 23: true, 24: true}
	ref := &crashRef{entry: func(v int64, _ []string) wal.Entry {
		e := wal.Entry{Version: v, ChangeSets: crashBlock(1, v)}
		if large[v] {
			e.ChangeSets = append(e.ChangeSets, wal.ChangeSet{Name: "acc",
				Pairs: []wal.KVPair{{Key: []byte("large"), Value: bytes.Repeat([]byte{byte(v)}, 160<<10)}}})
		}
		return e
	}}
	ref.reset(crashStores)
	hashes := map[int64][]byte{}
	check := func(db *DB, v int64) {
		t.Helper()
		ref.rollback(t, v) // rebuilt from the first block when behind
		if got, want := db.LastCommitInfo().Hash(), commitInfo(ref.trees, v).Hash(); db.Version() != v || !bytes.Equal(got, want) {
			t.Fatalf("at %d with hash %X, want %d with %X", db.Version(), got, v, want)
		}
	}
	for v := int64(1); v <= 30; v++ {
		if err := db.ApplyChangeSets(ref.entry(v, nil).ChangeSets); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
		hashes[v] = info.Hash()
		check(db, v)
		if !large[v] {
			continue
		}
		// durable by its snapshot: current points at it, the log holds
		// nothing up to it
		if got := db.SnapshotVersion(); got != v {
			t.Fatalf("version %d committed on snapshot %d", v, got)
		}
		if cur, err := readCurrent(dir); err != nil || cur != v {
			t.Fatalf("current %d (%v) after committing %d", cur, err, v)
		}
		if first := db.log.FirstVersion(); first != 0 {
			t.Fatalf("after committing %d by a snapshot the log starts at %d", v, first)
		}
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatal(err)
		}
		view.Release()
		if _, err := db.ViewAt(v - 2); !errors.Is(err, ErrVersion) {
			t.Fatalf("ViewAt(%d) after committing %d by a snapshot: %v, want ErrVersion", v-2, v, err)
		}
		if v == 11 {
			// reopen with the log still empty: the next commit
			// starts it again
			n := SnapshotCommits(db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, Options{SnapshotInterval: 4, SnapshotKeepRecent: 2}); err != nil {
				t.Fatal(err)
			}
			DelayRewrites(db, 3)
			SetMaxLoggedEntry(db, 128<<10)
			db.snapshotCommits.Add(n)
			check(db, v)
		}
	}
	if n := SnapshotCommits(db); n != int64(len(large)) {
		t.Fatalf("%d versions committed by a snapshot, want %d", n, len(large))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(db, 30)
	for _, v := range []int64{5, 20, 22} {
		if _, err := db.ViewAt(v); !errors.Is(err, ErrVersion) {
			t.Fatalf("ViewAt(%d): %v, want ErrVersion", v, err)
		}
	}
	// a kept snapshot still serves its own version
	for v := int64(23); v <= 30; v++ {
		view, err := db.ViewAt(v)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", v, err)
		}
		if !bytes.Equal(view.CommitInfo().Hash(), hashes[v]) {
			t.Fatalf("ViewAt(%d) hash differs", v)
		}
		view.Release()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// a log resumed after a newer snapshot is not damage
	if rep, err := Verify(dir); err != nil {
		t.Fatalf("Verify: %v", err)
	} else if rep.Version != 30 || rep.WALFirst != 25 {
		t.Fatalf("Verify: version %d, log from %d; want 30 and 25", rep.Version, rep.WALFirst)
	}
	if _, err := Open(dir, Options{ReadOnly: true, TargetVersion: 20}); !errors.Is(err, ErrVersion) {
		t.Fatalf("TargetVersion 20: %v, want ErrVersion", err)
	}
	ro, err := Open(dir, Options{ReadOnly: true, TargetVersion: 27})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !bytes.Equal(ro.LastCommitInfo().Hash(), hashes[27]) {
		t.Fatal("TargetVersion 27 opened with another hash")
	}
}

// TestOpenLogBehindSnapshot: a log that ends before the current snapshot
// (a machine crash under a relaxed fsync policy lost entries the snapshot
// holds) is emptied by Open, which opens at the snapshot. The older
// snapshot kept beside it, the empty one of version 0, can no longer be
// rolled forward: the versions between are refused with ErrVersion, not
// rebuilt as empty trees.
func TestOpenLogBehindSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	commit := func(v int64) {
		t.Helper()
		if err := db.ApplyChangeSets(crashBlock(1, v)); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[v] = info.Hash()
	}
	for v := int64(1); v <= 20; v++ {
		commit(v)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.TruncateBack(17); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 20 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[20]) {
		t.Fatalf("opened at %d, want 20 with its hash", db.Version())
	}
	commit(21)
	if _, err := db.ViewAt(21); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{5, 17} {
		view, err := db.ViewAt(v)
		if err == nil {
			view.Release()
		}
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("ViewAt(%d) with the log resumed at 21: %v, want ErrVersion", v, err)
		}
	}
}
