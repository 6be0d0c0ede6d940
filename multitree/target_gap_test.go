package multitree

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestTargetBetweenLogEndAndSnapshot: when the log ends before the current
// snapshot, the versions between are in neither; a TargetVersion among
// them is refused with ErrVersion, read-only, writable and with a
// rollback, and the error names both ends rather than calling the log's
// end the latest version.
func TestTargetBetweenLogEndAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 20)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cutLog(t, dir, 17)
	for _, c := range []struct {
		name               string
		readOnly, rollback bool
	}{{"read-only", true, false}, {"writable", false, false}, {"rollback", false, true}} {
		o := opts
		o.CreateIfMissing, o.ReadOnly, o.Rollback, o.TargetVersion = false, c.readOnly, c.rollback, 18
		db, err := Open(dir, o)
		if err == nil {
			db.Close()
			t.Fatalf("%s: target 18 opened", c.name)
		}
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "17") || !strings.Contains(err.Error(), "20") || strings.Contains(err.Error(), "latest version 17") {
			t.Errorf("%s: %v, want ErrVersion naming the log's end 17 and the snapshot's 20", c.name, err)
		}
	}
}
