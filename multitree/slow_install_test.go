package multitree

import (
	"fmt"
	"testing"
)

// TestSlowInstallCaughtUpOffCommitPath: the versions committed while a
// background rewrite makes its snapshot durable and current (an fsync
// whose time grows with the snapshot on a slow disk) are caught up by the
// rewrite after the install, not by the Commit that switches to it: the
// switch's pause does not grow with the install's time. Here the install
// waits until 30 versions more are committed; the switch then catches up
// at most the one version committed after the rewrite finished.
func TestSlowInstallCaughtUpOffCommitPath(t *testing.T) {
	const lag = 30
	db, err := Open(t.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	DelayInstalls(db, lag)
	commit := func(v int) {
		t.Helper()
		for _, name := range []string{"a", "b"} {
			for i := 0; i < 20; i++ {
				if err := db.Set(name, []byte(fmt.Sprintf("k%04d", (v*37+i*11)%400)), []byte(fmt.Sprint(v, i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	v := 1
	for ; v <= 10; v++ {
		commit(v)
	}
	// the rewrite of version 10 started; its install waits for 40
	for ; v <= 10+lag; v++ {
		commit(v)
	}
	waitRewrite(db) // the rewrite's job is done: the next Commit switches
	commit(v)
	if got := db.SnapshotVersion(); got != 10 {
		t.Fatalf("snapshot version %d after the switch, want 10", got)
	}
	rebased, skipped, failed := RebaseCounts(db)
	t.Logf("switch caught up %d versions; rounds: %d rebased, %d skipped, %d failed", SwitchGap(db), rebased, skipped, failed)
	if gap := SwitchGap(db); gap > 1 {
		t.Errorf("the switching Commit caught up %d versions itself, committed while the install waited", gap)
	}
	if skipped != 0 || failed != 0 {
		t.Errorf("rounds: %d skipped, %d failed", skipped, failed)
	}
}
