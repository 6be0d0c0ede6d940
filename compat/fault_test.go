package compat_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestQueryDamagedSnapshot: a store query that meets a snapshot file cut
// short under its mapping (a failed disk read faults the same way) returns
// an error wrapping memiavl.ErrCorrupt that names the file, where
// iavl.Store panics: Query has an error to return.
func TestQueryDamagedSnapshot(t *testing.T) {
	for _, c := range []struct {
		file  string
		query types.RequestQuery
	}{
		{snapshot.FileLookup, types.RequestQuery{Path: "/a/key", Data: []byte("key-0007")}},
		{snapshot.FileKVs, types.RequestQuery{Path: "/a/key", Data: []byte("key-0007"), Prove: true}},
		{snapshot.FileKVs, types.RequestQuery{Path: "/a/subspace", Data: []byte("key-")}},
	} {
		t.Run(c.file+c.query.Path, func(t *testing.T) {
			dir := t.TempDir()
			db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2000; i++ {
				if err := db.Set("a", []byte(fmt.Sprintf("key-%04d", i)), []byte(strings.Repeat("v", 100))); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			cfg := compat.DefaultConfig()
			cfg.SnapshotInterval = -1
			cfg.OpenCheck = "none"
			ms := newOurs(t, dir, cfg, keyring{}, mount{iavl: []string{"a"}}, nil)
			defer ms.Close()
			path := filepath.Join(dir, "snapshot-00000000000000000001", "s-a", c.file)
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			var panicked any
			func() {
				defer func() { panicked = recover() }()
				req := c.query
				_, err = ms.Query(&req)
			}()
			if panicked != nil {
				t.Fatalf("Query panicked: %v", panicked)
			}
			if !errors.Is(err, memiavl.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Query: %v, want memiavl.ErrCorrupt naming %s", err, path)
			}
		})
	}
}
