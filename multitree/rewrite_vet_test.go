package multitree

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// flipInFile replaces the first occurrence of old in path with repl (same
// length).
func flipInFile(t *testing.T, path string, old, repl []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, old)
	if i < 0 {
		t.Fatalf("%q not in %s", old, path)
	}
	copy(b[i:], repl)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRewriteVetsLeftSnapshot: a database opened at an older TargetVersion
// (without Rollback) leaves the newer snapshots in place unchecked. Once
// their versions are committed again, a RewriteSnapshot at such a version
// checks the directory it finds before it uses it (a background rewrite,
// which runs the same check, starts only past current's version, where
// such a directory is a leftover the open removes): a sound one is kept as
// it is, a damaged one (a value changed in its files) is written anew, and
// neither the database nor a later open serves the damage.
// commitVetValue commits version v of store "a": k set to value-<v>, and
// others more keys changed.
func commitVetValue(t *testing.T, db *DB, v int64, others int) {
	t.Helper()
	if err := db.Set("a", []byte("k"), []byte(fmt.Sprintf("value-%d", v))); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < others; i++ {
		if err := db.Set("a", []byte(fmt.Sprintf("other-%02d", i)), []byte(fmt.Sprint("x", v))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
}

// writeVetFixture creates a database of store "a" in dir with versions
// 1..4 (see commitVetValue) and snapshots 2 and 4 kept, and closes it.
func writeVetFixture(t *testing.T, dir string, others int) {
	t.Helper()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 4; v++ {
		commitVetValue(t, db, v, others)
		if v%2 == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRewriteVetsLeftSnapshot(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged=%v", damaged), func(t *testing.T) { vetLeftSnapshot(t, damaged) })
	}
}

func vetLeftSnapshot(t *testing.T, damaged bool) {
	dir := t.TempDir()
	commit := func(db *DB, v int64) { t.Helper(); commitVetValue(t, db, v, 50) }
	writeVetFixture(t, dir, 50)
	snap4 := filepath.Join(dir, snapshotDirName(4))
	// the modification times of the snapshot's files but the one damaged
	stamps := func() map[string]int64 {
		m := map[string]int64{}
		err := filepath.WalkDir(snap4, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() == "kvs" {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			m[path] = fi.ModTime().UnixNano()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := stamps()
	if damaged {
		flipInFile(t, filepath.Join(snap4, treeDirName("a"), "kvs"), []byte("value-4"), []byte("valuX-4"))
	}

	db, err := Open(dir, Options{TargetVersion: 3, OpenCheck: OpenCheckSync, SnapshotInterval: -1, SnapshotKeepRecent: 5})
	if err != nil {
		t.Fatal(err)
	}
	commit(db, 4) // the changes the log holds
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB, what string) {
		t.Helper()
		vw, err := db.ViewAt(4)
		if err != nil {
			t.Fatalf("%s: ViewAt(4): %v", what, err)
		}
		defer vw.Release()
		if got, err := vw.Get("a", []byte("k")); err != nil || string(got) != "value-4" {
			t.Fatalf("%s: version 4 reads %q, %v; want value-4", what, got, err)
		}
	}
	check(db, "after the rewrite")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rewritten := !maps.Equal(stamps(), before); rewritten != damaged {
		t.Errorf("snapshot 4 written anew: %v, want %v", rewritten, damaged)
	}
	db, err = Open(dir, Options{OpenCheck: OpenCheckSync, SnapshotInterval: -1, ReadOnly: true})
	if err != nil {
		t.Fatalf("open after the rewrite: %v", err)
	}
	defer db.Close()
	check(db, "reopened")
	if _, err := Verify(dir); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}
