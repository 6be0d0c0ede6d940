package multitree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPruneFailedRemovalKeepsViews: a prune whose removal of a snapshot
// fails leaves that snapshot in use: the views cached from it stay, and
// rebuilds from it are still cached. Before, the prune forgot every
// snapshot it meant to remove, removed or not, so the cache dropped their
// views and refused to cache any rebuilt from them, until a later prune
// removed them. A removal that renamed the directory away before failing
// does count: its views go.
func TestPruneFailedRemovalKeepsViews(t *testing.T) {
	for _, renamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("renamed=%v", renamed), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 0})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			commit := func(n int) {
				t.Helper()
				for i := 0; i < n; i++ {
					v := db.Version() + 1
					if err := db.Set("a", []byte("k"), []byte(fmt.Sprint(v))); err != nil {
						t.Fatal(err)
					}
					// a failed prune is reported by the next commit
					if _, err := db.Commit(); err != nil && !errors.Is(err, ErrRewrite) {
						t.Fatal(err)
					}
				}
			}
			waitPrune := func() {
				t.Helper()
				for i := 0; ; i++ {
					db.mu.Lock()
					busy := db.mu.pruning
					db.mu.Unlock()
					if !busy {
						return
					}
					if i == 1000 {
						t.Fatal("the prune did not end")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			commit(5)
			if err := db.RewriteSnapshot(context.Background()); err != nil { // 5
				t.Fatal(err)
			}
			waitPrune()
			commit(5)
			if err := db.RewriteSnapshot(context.Background()); err != nil { // 10; 5 kept until its prune
				t.Fatal(err)
			}
			waitPrune()
			// the prune after 10 removed 5: start over with 10 and 15
			commit(5)
			db.pruneRemove = func(string, int64) error { return errors.New("removal refused") }
			if err := db.RewriteSnapshot(context.Background()); err != nil { // 15, prune fails
				t.Fatal(err)
			}
			waitPrune()
			db.pruneRemove = nil
			if _, err := os.Stat(filepath.Join(dir, snapshotDirName(10))); err != nil {
				t.Fatalf("snapshot 10 after the failed prune: %v", err)
			}
			vw, err := db.ViewAt(12) // from snapshot 10, cached
			if err != nil {
				t.Fatal(err)
			}
			vw.Release()
			db.pruneRemove = func(dir string, v int64) error {
				if renamed {
					if err := os.Rename(filepath.Join(dir, snapshotDirName(v)), filepath.Join(dir, snapshotDirName(v)+prunedSuffix+tmpSuffix)); err != nil {
						return err
					}
				}
				return errors.New("removal refused")
			}
			commit(5)
			if err := db.RewriteSnapshot(context.Background()); err != nil { // 20, prune fails
				t.Fatal(err)
			}
			waitPrune()
			db.pruneRemove = nil
			db.views.Lock()
			_, cached := db.views.cache[12]
			db.views.Unlock()
			if cached == renamed {
				t.Errorf("view of version 12, rebuilt from snapshot 10, cached %v after a prune that failed to remove snapshot 10 (renamed away: %v)", cached, renamed)
			}
			if !renamed {
				vw, err := db.ViewAt(13)
				if err != nil {
					t.Fatal(err)
				}
				vw.Release()
				db.views.Lock()
				_, cached = db.views.cache[13]
				db.views.Unlock()
				if !cached {
					t.Error("a view rebuilt from snapshot 10, still in place after the failed prune, was not cached")
				}
			}
			if err := db.Close(); err != nil && !errors.Is(err, ErrRewrite) {
				t.Fatal(err)
			}
		})
	}
}
