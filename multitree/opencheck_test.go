package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// snapshotOf returns a database at version 1, n keys in store "a" (the
// first of stores), whose snapshot holds that version.
func snapshotOf(t *testing.T, n int, stores ...string) string {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: stores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, db, n, 100)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOpenCheck damages a byte of a value in the current snapshot, which
// no read of the tree's structure meets, and opens the database with each
// OpenCheck: a synchronous check fails Open, a background one is reported
// by WaitOpenCheck and by the next Commit (after committing) or by Close,
// and no check serves the damaged value.
func TestOpenCheck(t *testing.T) {
	dir := snapshotOf(t, 2000, "a", "b")
	// a sound database passes every check
	for _, check := range []OpenCheck{OpenCheckBackground, OpenCheckSync, OpenCheckNone} {
		db, err := Open(dir, Options{OpenCheck: check})
		if err != nil {
			t.Fatalf("%v: %v", check, err)
		}
		if err := db.WaitOpenCheck(context.Background()); err != nil {
			t.Fatalf("%v: %v", check, err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("%v: %v", check, err)
		}
	}

	// the last byte of kvs is the last byte of the last key's value
	kvs := filepath.Join(dir, snapshotDirName(1), treeDirName("a"), snapshot.FileKVs)
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	restore := testutil.DamageByte(t, kvs, fi.Size()-1)
	defer restore()
	corrupt := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
			t.Fatalf("%s: %v, want ErrCorrupt naming %s", what, err, kvs)
		}
	}

	for _, ro := range []bool{false, true} {
		_, err := Open(dir, Options{OpenCheck: OpenCheckSync, ReadOnly: ro})
		corrupt("synchronous check", err)
	}

	// in the background: reported by the next Commit, once
	db, err := Open(dir, Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	corrupt("WaitOpenCheck", db.WaitOpenCheck(context.Background()))
	// once finished, the result even for a context already done
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 20; i++ {
		corrupt("WaitOpenCheck with a cancelled context", db.WaitOpenCheck(cancelled))
	}
	if err := db.Set("b", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	corrupt("Commit after the check", err)
	if info == nil || info.Version != 2 || db.Version() != 2 {
		t.Fatalf("the reporting Commit did not commit: %v, version %d", info, db.Version())
	}
	if err := db.Set("b", []byte("k"), []byte("w")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatalf("reported twice: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close after the report: %v", err)
	}

	// read-only, no Commit: Close reports it
	db, err = Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	corrupt("read-only WaitOpenCheck", db.WaitOpenCheck(context.Background()))
	corrupt("Close", db.Close())

	// without a check the database opens
	db, err = Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.WaitOpenCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := Open(dir, Options{OpenCheck: OpenCheck(7)}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("unknown OpenCheck: %v", err)
	}
}

// TestOpenCheckClose closes a database while its background check may
// still run: Close stops and joins it, and a stopped check reports
// nothing.
func TestOpenCheckClose(t *testing.T) {
	dir := snapshotOf(t, 20000, "a")
	for i := 0; i < 5; i++ {
		db, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("close during the check: %v", err)
		}
		if err := db.WaitOpenCheck(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("check after close: %v", err)
		}
	}
}

// TestOpenCheckPaced checks that RewriteRateLimit paces the background
// check: at the smallest rate a snapshot of more than 1 MB takes seconds,
// so a short wait for it ends first; Close then stops it.
func TestOpenCheckPaced(t *testing.T) {
	dir := snapshotOf(t, 8000, "a")
	db, err := Open(dir, Options{RewriteRateLimit: MinRewriteRateLimit})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := db.WaitOpenCheck(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paced check: %v, want it still running", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.WaitOpenCheck(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("check after Close: %v", err)
	}
}

// TestOpenCheckFindsAnyFlip flips a random byte of a random file of the
// current snapshot, many times: every open either fails with ErrCorrupt
// (meta, or what Open reads) or its background check reports ErrCorrupt,
// and reads meanwhile never panic; nor do writes and a commit by a writer
// opened without the check.
func TestOpenCheckFindsAnyFlip(t *testing.T) {
	dir := snapshotOf(t, 3000, "a", "b")
	r := testutil.Rand(t)
	var files []string
	for _, store := range []string{"a", "b"} {
		sdir := filepath.Join(dir, snapshotDirName(1), treeDirName(store))
		ents, err := os.ReadDir(sdir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Size() > 0 {
				files = append(files, filepath.Join(sdir, e.Name()))
			}
		}
	}
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for i := 0; i < rounds; i++ {
		path := files[r.Intn(len(files))]
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		off := r.Int63n(fi.Size())
		restore := testutil.DamageByte(t, path, off)
		db, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s at %d: Open: %v", path, off, err)
			}
			restore()
			continue
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s at %d: read panicked: %v", path, off, p)
				}
			}()
			v, err := db.View()
			if err != nil {
				return
			}
			defer v.Release()
			for k := 0; k < 50; k++ {
				_, _ = v.Tree("a").Get([]byte(fmt.Sprintf("key-%08d", r.Intn(3000))))
			}
		}()
		if err := db.WaitOpenCheck(context.Background()); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s at %d: background check: %v", path, off, err)
		}
		if err := db.Close(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s at %d: Close: %v", path, off, err)
		}
		writeUnchecked(t, dir, fmt.Sprintf("%s at %d", path, off), r)
		restore()
	}
}

// writeUnchecked opens the database in dir without the open check, changes
// and deletes keys of store "a" and commits: with a damaged snapshot any
// of it may fail, but nothing may panic. The commit is then rolled back.
func writeUnchecked(t *testing.T, dir, what string, r *rand.Rand) {
	t.Helper()
	db, err := Open(dir, Options{OpenCheck: OpenCheckNone, SnapshotInterval: -1})
	if err != nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: write panicked: %v", what, p)
		}
	}()
	v := db.Version()
	for k := 0; k < 30; k++ {
		key := []byte(fmt.Sprintf("key-%08d", r.Intn(3000)))
		if k%3 == 0 {
			_ = db.Delete("a", key)
		} else {
			_ = db.Set("a", key, []byte("changed"))
		}
	}
	_, _ = db.Commit()
	_ = db.Close()
	if db, err = Open(dir, Options{OpenCheck: OpenCheckNone, TargetVersion: v, Rollback: true}); err == nil {
		_ = db.Close()
	}
}

// TestOpenMappedRootFault: a snapshot file that cannot be read once mapped
// (cut short under the mapping, as a failed disk read faults the same
// way) fails Open with ErrCorrupt naming the file: with the log empty
// after the snapshot, the first read of the branches is the commit info's
// root hash, which panicked out of Open before; with versions to replay,
// the replay meets it in a tree, whose ErrCorrupt Open wraps in its own.
func TestOpenMappedRootFault(t *testing.T) {
	for _, logged := range []bool{false, true} {
		for _, readOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("logged=%v/readOnly=%v", logged, readOnly), func(t *testing.T) {
				dir := snapshotOf(t, 2000, "a", "b")
				if logged {
					db, err := Open(dir, Options{SnapshotInterval: -1})
					if err != nil {
						t.Fatal(err)
					}
					for v := 0; v < 2; v++ {
						if err := db.Set("a", []byte(fmt.Sprintf("new-%d", v)), []byte("x")); err != nil {
							t.Fatal(err)
						}
						if _, err := db.Commit(); err != nil {
							t.Fatal(err)
						}
					}
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
				}
				branches := filepath.Join(dir, snapshotDirName(1), treeDirName("a"), snapshot.FileBranches)
				beforeOpenLog = func(string) {
					if err := os.Truncate(branches, 0); err != nil {
						t.Error(err)
					}
				}
				defer func() { beforeOpenLog = nil }()
				db, err := Open(dir, Options{ReadOnly: readOnly, OpenCheck: OpenCheckNone})
				if err == nil {
					db.Close()
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), branches) {
					t.Fatalf("Open: %v, want ErrCorrupt naming %s", err, branches)
				}
			})
		}
	}
}

// TestSetZeroCopyValueCopied: a value set from GetZeroCopy, a slice of the
// snapshot's mapping, is copied by Set, so that the file cut short under
// the mapping before the commit (a failed disk read faults the same way)
// does not fault in the log's write, which ended the process before, in
// Commit or, with an asynchronous log, on the log's goroutine.
func TestSetZeroCopyValueCopied(t *testing.T) {
	for _, async := range []int{0, 4} {
		t.Run(fmt.Sprintf("async=%d", async), func(t *testing.T) {
			dir := snapshotOf(t, 2000, "a")
			db, err := Open(dir, Options{SnapshotInterval: -1, AsyncCommitBuffer: async, OpenCheck: OpenCheckNone})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			key := []byte(fmt.Sprintf("key-%08d", 10)) // see fillStore
			v, err := db.WorkingTree("a").GetZeroCopy(key)
			if err != nil || v == nil || !db.mu.gen.snaps["a"].Holds(v) {
				t.Fatalf("GetZeroCopy: %v, %v: want a slice of the snapshot", v, err)
			}
			want := bytes.Clone(v)
			if err := db.Set("a", []byte("copy"), v); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(filepath.Join(dir, snapshotDirName(1), treeDirName("a"), snapshot.FileKVs), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
			if got, err := db.Get("a", []byte("copy")); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Get: %q, %v; want %q", got, err, want)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			log, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			var got []byte
			err = log.Replay(2, 2, func(e wal.Entry) error {
				got = e.ChangeSets[0].Pairs[0].Value
				return nil
			})
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("logged value %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestCommitKeepsJoinedFailures: the background failures Commit reports
// after committing are joined (errors.Join), and a caller tells their
// parts apart (compat stops the node unless all are failed rewrites):
// Commit hands the join over as it is, even when a part wraps a tree's
// ErrCorrupt, which Commit's own failures are wrapped in ErrCorrupt for.
func TestCommitKeepsJoinedFailures(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rewrite := fmt.Errorf("%w: snapshot at version 1: %w", ErrRewrite, fmt.Errorf("replaying: %w", memiavl.ErrCorrupt))
	check := errors.New("check of the snapshot opened: I/O error")
	joined := errors.Join(rewrite, check)
	db.mu.Lock()
	db.mu.bgErr = joined
	db.mu.Unlock()
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	_, err = db.Commit()
	if err != joined {
		t.Fatalf("Commit: %#v, want the joined background failures as they are", err)
	}
}

// TestSetValueOfReleasedView: a value read through a view (GetZeroCopy), of
// a snapshot the working trees no longer use, is copied by Set, so that the
// view may be released, and the snapshot unmapped, before the commit.
func TestSetValueOfReleasedView(t *testing.T) {
	dir := snapshotOf(t, 2000, "a")
	db, err := Open(dir, Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	v, err := view.Tree("a").GetZeroCopy([]byte(fmt.Sprintf("key-%08d", 10)))
	if err != nil || v == nil {
		t.Fatalf("GetZeroCopy: %v, %v", v, err)
	}
	want := bytes.Clone(v)
	if err := db.Set("a", []byte("new"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil { // the working trees leave the view's snapshot
		t.Fatal(err)
	}
	if err := db.Set("a", []byte("copy"), v); err != nil {
		t.Fatal(err)
	}
	view.Release() // the last reference: the snapshot is unmapped
	db.unmapper.wg.Wait()
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Get("a", []byte("copy")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get: %q, %v; want %q", got, err, want)
	}
}
