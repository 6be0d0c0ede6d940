package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestSyncGroupConcurrentSync: Sync may be called from several goroutines;
// each gets the group's outcome. Sync ended the group and recorded that it
// synced in two critical sections, so a Sync between them found the group
// ended but not synced and failed with "closed without syncing" although
// nothing closed it. The window is a few instructions wide: the test runs
// pairs of Syncs on fresh groups for a while (longer without -short).
func TestSyncGroupConcurrentSync(t *testing.T) {
	old := fsyncFile
	fsyncFile = func(*os.File) error { return nil } // no disk work: more tries
	t.Cleanup(func() { fsyncFile = old })
	budget := 5 * time.Second
	if testing.Short() {
		budget = time.Second
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n := 0
	for ; time.Since(start) < budget; n++ {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		g := &SyncGroup{}
		if err := g.Add(f); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = g.Sync()
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("try %d: a Sync beside another Sync of a group never closed: %v (closed: %v)", n, err, errors.Is(err, ErrClosed))
			}
		}
	}
	t.Logf("%d pairs of Syncs", n)
}
