package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestDamagedLogOpens flips random bytes of the log of a database whose
// last 20 versions are only in the log, and opens it, read-only and as the
// writer: Open never panics; it fails with ErrCorrupt (of this package or
// of package wal), or it opens at a version whose app hash is the one
// committed (a damaged last record reads as a torn tail and is cut off;
// nothing else may be lost or changed).
func TestDamagedLogOpens(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 10)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	hashes := commitN(t, db, 3, 20)
	last := db.Version()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("log segments: %v %v", segs, err)
	}
	r := testutil.Rand(t)
	rounds := 80
	if testing.Short() {
		rounds = 20
	}
	for i := 0; i < rounds; i++ {
		seg := segs[r.Intn(len(segs))]
		orig, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		off := r.Intn(len(orig))
		what := fmt.Sprintf("%s at %d", filepath.Base(seg), off)
		for _, ro := range []bool{true, false} {
			// the writer's open repairs a torn tail in place: damage anew
			b := bytes.Clone(orig)
			b[off] ^= byte(1 + r.Intn(255))
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			openDamaged(t, dir, what, ro, last, hashes)
		}
		if err := os.WriteFile(seg, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func openDamaged(t *testing.T, dir, what string, ro bool, last int64, hashes map[int64][]byte) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s (read-only %v): panic: %v", what, ro, p)
		}
	}()
	db, err := Open(dir, Options{ReadOnly: ro, SnapshotInterval: -1})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("%s (read-only %v): Open: %v, want ErrCorrupt", what, ro, err)
		}
		return
	}
	defer db.Close()
	v := db.Version()
	_, torn := db.LogTornTail()
	switch {
	case v != last && v != last-1:
		t.Fatalf("%s (read-only %v): opened at %d, committed %d", what, ro, v, last)
	case torn != (v == last-1):
		// the lost last version is always reported
		t.Fatalf("%s (read-only %v): opened at %d of %d, torn tail reported: %v", what, ro, v, last, torn)
	case !bytes.Equal(db.LastCommitInfo().Hash(), hashes[v]):
		t.Fatalf("%s (read-only %v): app hash at %d differs from the committed one", what, ro, v)
	}
}

// TestTornTailReportedOnFailedOpen: a writable Open that cuts a torn tail
// off the log and then fails names the cut in its error, since the next
// open finds nothing left to report.
func TestTornTailReportedOnFailedOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("log segments: %v %v", segs, err)
	}
	seg := segs[len(segs)-1]
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 100)); err != nil { // a torn record of zeros
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{TargetVersion: 100})
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("Open at a target past the last version: %v, want ErrVersion", err)
	}
	if want := "torn tail off the log first: 100 bytes at offset"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("error %q does not report the torn tail cut off %s", err, seg)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if tt, ok := db.LogTornTail(); ok {
		t.Fatalf("torn tail again after the cut: %+v", tt)
	}
	if db.Version() != 5 {
		t.Fatalf("version %d, want 5", db.Version())
	}
}
