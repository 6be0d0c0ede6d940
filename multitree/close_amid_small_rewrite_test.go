package multitree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCloseAmidSmallRewrite: a Close that cancels a background rewrite of
// small trees (the write fails with context.Canceled) returns nil (a
// cancellation is not a failure), leaves no staged .tmp directory, and the
// database reopens at the last version; a synchronous RewriteSnapshot then
// works.
func TestCloseAmidSmallRewrite(t *testing.T) {
	for i := 0; i < 30; i++ {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 1, SnapshotKeepRecent: 1})
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, db, int64(i), 3+i%4)
		want := db.Version()
		if i%3 == 0 {
			time.Sleep(time.Duration(i) * 50 * time.Microsecond)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("round %d: Close amid a small rewrite: %v", i, err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				t.Fatalf("round %d: leftover %s", i, filepath.Join(dir, e.Name()))
			}
		}
		db, err = Open(dir, Options{SnapshotInterval: -1})
		if err != nil || db.Version() != want {
			t.Fatalf("round %d: reopen: %v", i, err)
		}
		commitN(t, db, int64(i)+100, 1)
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatalf("round %d: RewriteSnapshot: %v", i, err)
		}
		db.Close()
	}
}
