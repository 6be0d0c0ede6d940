package multitree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// countingLimiter forwards to a limiter and counts the bytes it lets
// through; first is closed at the first wait.
type countingLimiter struct {
	inner snapshot.Limiter
	mu    sync.Mutex
	total int
	first chan struct{}
}

func (l *countingLimiter) Burst() int { return l.inner.Burst() }

func (l *countingLimiter) WaitN(ctx context.Context, n int) error {
	l.mu.Lock()
	if l.total == 0 {
		close(l.first)
	}
	l.total += n
	l.mu.Unlock()
	return l.inner.WaitN(ctx, n)
}

// waitRewrite waits for the background rewrite running in db, if any.
func waitRewrite(db *DB) { WaitRewriteBehind(db, 0) }

// fillStore commits n keys of size-byte values into store "a".
func fillStore(t *testing.T, db *DB, n, size int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := db.Set("a", []byte(fmt.Sprintf("key-%08d", i)), make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRewriteRateLimit checks that a background rewrite's writes go
// through the limiter RewriteRateLimit sets, every byte of the trees'
// files, and that Close cancels a paced rewrite instead of waiting for it.
func TestRewriteRateLimit(t *testing.T) {
	t.Run("paced", func(t *testing.T) {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"},
			SnapshotInterval: 2, RewriteRateLimit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var limiters []*countingLimiter
		db.wrapLimiter = func(l snapshot.Limiter) snapshot.Limiter {
			c := &countingLimiter{inner: l, first: make(chan struct{})}
			limiters = append(limiters, c) // rewrites start in Commit, one at a time
			return c
		}
		fillStore(t, db, 2000, 100)
		fillStore(t, db, 10, 100) // version 2 starts a rewrite
		waitRewrite(db)
		fillStore(t, db, 1, 100) // switches to it
		if got := db.SnapshotVersion(); got != 2 {
			t.Fatalf("snapshot version %d, want 2", got)
		}
		if len(limiters) != 1 {
			t.Fatalf("%d paced rewrites, want 1", len(limiters))
		}
		data := 0
		for _, store := range []string{"a", "b"} {
			sdir := filepath.Join(dir, snapshotDirName(2), treeDirName(store))
			ents, err := os.ReadDir(sdir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name() == snapshot.FileMeta {
					continue
				}
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				data += int(fi.Size())
			}
		}
		if limiters[0].total != data {
			t.Fatalf("the limiter let %d bytes through, the snapshot's files hold %d", limiters[0].total, data)
		}
	})

	t.Run("close cancels", func(t *testing.T) {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"},
			SnapshotInterval: 2, RewriteRateLimit: MinRewriteRateLimit})
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		db.wrapLimiter = func(l snapshot.Limiter) snapshot.Limiter {
			return &countingLimiter{inner: l, first: started}
		}
		fillStore(t, db, 5000, 200) // about 1.4 MB of snapshot: 20 s at this pace
		fillStore(t, db, 1, 200)
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the rewrite wrote nothing through the limiter")
		}
		hash := db.LastCommitInfo().Hash()
		if err := db.Close(); err != nil {
			t.Fatalf("close during a paced rewrite: %v", err)
		}
		if got, err := listSnapshots(dir); err != nil || fmt.Sprint(got) != "[0]" {
			t.Fatalf("snapshots %v (%v), want only the initial one", got, err)
		}
		db, err = Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if db.Version() != 2 || fmt.Sprintf("%x", db.LastCommitInfo().Hash()) != fmt.Sprintf("%x", hash) {
			t.Fatalf("reopened at version %d", db.Version())
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				t.Fatalf("leftover %s after reopen", e.Name())
			}
		}
	})
}
