package multitree

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestViewAtChecksOlderSnapshot: a version rebuilt from an older kept
// snapshot, whose files Open does not check, is served only once that
// snapshot's checksums are checked: a damaged byte in it fails ViewAt with
// ErrCorrupt (writer and read-only) instead of serving another hash or
// other contents, unless OpenCheckNone is asked for. A sound snapshot is
// checked once and serves the right version.
func TestViewAtChecksOlderSnapshot(t *testing.T) {
	src := t.TempDir()
	db, err := Open(src, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for _, at := range []int{20, 40} {
		for v, h := range commitN(t, db, 7, at-int(db.Version())) {
			hashes[v] = h
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for v, h := range commitN(t, db, 7, 10) {
		hashes[v] = h
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	older := filepath.Join(snapshotDirName(20), treeDirName("acc"))

	for _, file := range []string{"leaves", "kvs"} {
		for _, opts := range []Options{{ReadOnly: true}, {}, {OpenCheck: OpenCheckNone}} {
			dir := filepath.Join(t.TempDir(), "db")
			testutil.CopyDir(t, src, dir)
			path := filepath.Join(dir, older, file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x5a
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			v, err := db.ViewAt(31)
			switch {
			case opts.OpenCheck == OpenCheckNone:
				// asked not to check: served as the files are
				if err != nil {
					t.Errorf("%s, %+v: ViewAt(31): %v", file, opts, err)
				} else {
					v.Release()
				}
			case !errors.Is(err, ErrCorrupt):
				if err == nil {
					t.Errorf("%s, %+v: ViewAt(31) from a damaged snapshot served version 31 (hash right: %v)",
						file, opts, bytes.Equal(v.CommitInfo().Hash(), hashes[31]))
					v.Release()
				} else {
					t.Errorf("%s, %+v: ViewAt(31): %v, want ErrCorrupt", file, opts, err)
				}
			}
			db.Close()
			if _, err := Verify(dir); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: Verify: %v, want ErrCorrupt", file, err)
			}
		}
	}

	// sound: checked once, right
	db, err = Open(src, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, at := range []int64{31, 25, 21} {
		v, err := db.ViewAt(at)
		if err != nil {
			t.Fatalf("ViewAt(%d): %v", at, err)
		}
		if !bytes.Equal(v.CommitInfo().Hash(), hashes[at]) {
			t.Errorf("ViewAt(%d): wrong hash", at)
		}
		v.Release()
	}
	id, ok := db.snapshotIDOf(20)
	db.snapsChecked.Lock()
	c := db.snapsChecked.m[id]
	db.snapsChecked.Unlock()
	if !ok || c == nil || c.err != nil {
		t.Errorf("snapshot 20 not recorded as checked after ViewAt: %+v", c)
	}
}
