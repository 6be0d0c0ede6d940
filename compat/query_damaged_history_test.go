package compat_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// olderSnapshotDamaged builds a database of store "a" with kept
// snapshots at 20 and 40 and versions up to 50, then flips a byte in the
// older snapshot's leaves file, which Open does not check.
func olderSnapshotDamaged(t *testing.T) string {
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 50; v++ {
		for i := 0; i < 20; i++ {
			if err := db.Set("a", []byte(fmt.Sprintf("key-%04d", (v*31+i*7)%500)), []byte(fmt.Sprintf("value-%d-%d", v, i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if v == 20 || v == 40 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "snapshot-00000000000000000020", "s-a", "leaves")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestQueryOlderVersionDamaged: a query of a version rebuilt from a damaged
// older snapshot, proven or not, fails with an error wrapping
// memiavl.ErrCorrupt (as CacheMultiStoreWithVersion of the same version
// fails with multitree.ErrCorrupt); it does not answer as for a height not
// kept ("version does not exist", no error), which would hide the damage.
func TestQueryOlderVersionDamaged(t *testing.T) {
	dir := olderSnapshotDamaged(t)
	cfg := compat.DefaultConfig()
	cfg.SnapshotInterval = -1
	cfg.SnapshotKeepRecent = 1
	ms := newOurs(t, dir, cfg, keyring{}, mount{iavl: []string{"a"}}, nil)
	defer ms.Close()
	_, berr := ms.CacheMultiStoreWithVersion(31)
	if !errors.Is(berr, multitree.ErrCorrupt) {
		t.Fatalf("CacheMultiStoreWithVersion(31): %v, want multitree.ErrCorrupt", berr)
	}
	for _, prove := range []bool{false, true} {
		res, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte("key-0007"), Height: 31, Prove: prove})
		// Query's doc: a damaged snapshot met by a read is an error
		// wrapping memiavl.ErrCorrupt
		if !errors.Is(err, memiavl.ErrCorrupt) {
			t.Errorf("Query(height 31, prove %v) of a damaged snapshot: err %v, log %q; want an error wrapping memiavl.ErrCorrupt (CacheMultiStoreWithVersion: %v)",
				prove, err, res.Log, berr)
		}
	}
}
