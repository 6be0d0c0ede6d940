package multitree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dirFingerprint describes every entry under dir: its path, type and
// permissions, size, modification time and, for a file, a hash of its
// bytes, one line each in walk order.
func dirFingerprint(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestReadOnlyModifiesNothing: a read-only open, and everything a reader
// does with it (views of the latest and of older versions, which rebuild
// from a snapshot and the log, the open check, VerifySnapshot, Close),
// leaves every file and directory as it was, byte for byte and with its
// modification time, although the directory holds what a writer's open
// would clean or repair: an interrupted rewrite, a snapshot newer than
// current, an interrupted prune, a temporary current, a temporary log
// segment and a torn log tail. The writes it refuses leave no trace
// either.
func TestReadOnlyModifiesNothing(t *testing.T) {
	for _, check := range []OpenCheck{OpenCheckSync, OpenCheckBackground} {
		t.Run(check.String(), func(t *testing.T) { testReadOnlyModifiesNothing(t, check) })
	}
}

func testReadOnlyModifiesNothing(t *testing.T, check OpenCheck) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	commit := func(v int) {
		t.Helper()
		for _, s := range []string{"a", "b"} {
			if err := db.Set(s, []byte(fmt.Sprintf("k%03d", v%7)), []byte(fmt.Sprintf("%s@%d", s, v))); err != nil {
				t.Fatal(err)
			}
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[info.Version] = info.Hash()
	}
	for v := 1; v <= 12; v++ {
		commit(v)
		if v == 4 || v == 8 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cur := filepath.Join(dir, snapshotDirName(8))
	if _, err := os.Stat(cur); err != nil {
		t.Fatalf("snapshot 8: %v", err)
	}

	// what a writer's open would clean or repair
	cp := func(from, to string) {
		t.Helper()
		if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
	}
	cp(cur, filepath.Join(dir, snapshotDirName(20)+tmpSuffix))             // an interrupted rewrite
	cp(cur, filepath.Join(dir, snapshotDirName(30)))                       // a snapshot newer than current
	cp(cur, filepath.Join(dir, snapshotDirName(2)+prunedSuffix+tmpSuffix)) // an interrupted prune
	if err := os.WriteFile(filepath.Join(dir, currentFileName+tmpSuffix), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, walDirName, "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("log segments: %v %v", segs, err)
	}
	last := segs[len(segs)-1]
	if err := os.WriteFile(strings.TrimSuffix(last, ".wal")+"9.wal.tmp", []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 100)); err != nil { // zeros: a torn append
		t.Fatal(err)
	}
	f.Close()

	before := dirFingerprint(t, dir)
	ro, err := Open(dir, Options{ReadOnly: true, OpenCheck: check})
	if err != nil {
		t.Fatal(err)
	}
	if got := ro.LastCommitInfo(); got.Version != 12 || !bytes.Equal(got.Hash(), hashes[12]) {
		t.Fatalf("read-only open at version %d, want 12 with its hash", got.Version)
	}
	if err := ro.WaitOpenCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{12, 10, 5} { // the latest, from snapshot 8, from snapshot 4
		view, err := ro.ViewAt(v)
		if err != nil {
			t.Fatalf("view at %d: %v", v, err)
		}
		if !bytes.Equal(view.CommitInfo().Hash(), hashes[v]) {
			t.Fatalf("view at %d: another app hash", v)
		}
		want := fmt.Sprintf("a@%d", v)
		if got, err := view.Tree("a").Get([]byte(fmt.Sprintf("k%03d", v%7))); err != nil || string(got) != want {
			t.Fatalf("view at %d: %q %v, want %q", v, got, err, want)
		}
		view.Release()
	}
	if err := ro.VerifySnapshot(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Set("a", []byte("k"), []byte("v")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Set on a read-only database: %v", err)
	}
	if _, err := ro.Commit(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Commit on a read-only database: %v", err)
	}
	if err := ro.RewriteSnapshot(context.Background()); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("RewriteSnapshot on a read-only database: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := dirFingerprint(t, dir); after != before {
		t.Fatalf("a read-only open changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestReadsTakeNoCommitLock: with the lock Commit holds taken, as during a
// long commit, a reader still gets views of the latest version and of
// older ones (rebuilt from a snapshot and the log), reads and iterates
// them, releases them and reads the last commit info.
func TestReadsTakeNoCommitLock(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 1, ViewCacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v := 1; v <= 9; v++ {
		if err := db.Set("a", []byte(fmt.Sprintf("k%d", v)), []byte(fmt.Sprint(v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if v == 3 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func() error {
		if v := db.Version(); v != 9 {
			return fmt.Errorf("version %d", v)
		}
		if info := db.LastCommitInfo(); info == nil || info.Version != 9 {
			return fmt.Errorf("last commit info %v", info)
		}
		for _, version := range []int64{9, 5, 2, 5} { // 5 again: from the cache
			view, err := db.ViewAt(version)
			if err != nil {
				return fmt.Errorf("view at %d: %w", version, err)
			}
			tr := view.Tree("a")
			if got, err := tr.Get([]byte(fmt.Sprintf("k%d", version))); err != nil || string(got) != fmt.Sprint(version) {
				view.Release()
				return fmt.Errorf("view at %d: %q %v", version, got, err)
			}
			n := 0
			it := tr.Iterator(nil, nil, true)
			for ; it.Valid(); it.Next() {
				n++
			}
			err = it.Close()
			view.Release()
			if err != nil || n != int(version) {
				return fmt.Errorf("view at %d: %d keys, %v", version, n, err)
			}
		}
		return nil
	}
	db.mu.Lock()
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		db.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		db.mu.Unlock()
		<-done
		t.Fatal("the reads wait for the lock Commit holds")
	}
}
