package multitree

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// deletedMapsIn counts the lines of /proc/self/maps naming files under
// dir/sub (sub, or its name renamed by a removal) that were deleted.
func deletedMapsIn(t *testing.T, dir, sub string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, dir+"/"+sub) && strings.HasSuffix(l, "(deleted)") {
			n++
		}
	}
	return n
}

// TestReadOnlyCacheAfterRollbackRecreatedSnapshot: a read-only
// database caches a view rebuilt from snapshot 5; the writer rolls back to
// 3 (removing snapshot 5 and 10), re-commits other data and writes a new
// snapshot 5. The read-only database's next ViewAt of an older version
// drops its cached views (ViewCacheSize doc), so the deleted files are no
// longer mapped, and the discarded version 7 is not served. The sweep
// compared snapshot versions only, and took the new snapshot 5 for the one
// the cached view mapped: the view stayed, with 15 deleted files mapped,
// and ViewAt(7) served the discarded version.
func TestReadOnlyCacheAfterRollbackRecreatedSnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 5)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	old := commitN(t, db, 1, 5) // 6..10
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 2) // 11, 12
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	vw, err := ro.ViewAt(7)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(vw.CommitInfo().Hash(), old[7]) {
		t.Fatal("version 7 has another hash before the rollback")
	}
	vw.Release()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{TargetVersion: 3, Rollback: true, SnapshotInterval: -1, SnapshotKeepRecent: 2})
	if err != nil {
		t.Fatal(err)
	}
	fresh := commitN(t, db, 2, 2) // 4, 5 with other data
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k, v := range commitN(t, db, 2, 7) { // 6..12
		fresh[k] = v
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(fresh[7], old[7]) {
		t.Fatal("the re-committed version 7 has the old hash")
	}
	time.Sleep(10 * time.Millisecond)

	// a ViewAt of another old version sweeps the cache
	if vw, err := ro.ViewAt(9); err == nil {
		vw.Release()
	} else if !errors.Is(err, ErrVersion) {
		t.Fatalf("ViewAt(9) after the rollback: %v", err)
	}
	var deleted int
	for i := 0; i < 100; i++ {
		if deleted = deletedMapsIn(t, dir, snapshotDirName(5)); deleted == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if deleted > 0 {
		t.Errorf("after the writer's rollback removed snapshot 5 (and wrote another one of the same version), the read-only database keeps %d deleted files mapped through its cached view of 7", deleted)
	}
	vw, err = ro.ViewAt(7)
	if err == nil {
		got := vw.CommitInfo().Hash()
		vw.Release()
		switch {
		case bytes.Equal(got, old[7]):
			t.Errorf("ViewAt(7) after the rollback serves the discarded version 7 from the cache (the rebuilt ones fail with ErrVersion)")
		case !bytes.Equal(got, fresh[7]):
			t.Errorf("ViewAt(7) after the rollback: neither hash")
		}
	} else if !errors.Is(err, ErrVersion) {
		t.Errorf("ViewAt(7) after the rollback: %v", err)
	}
}
