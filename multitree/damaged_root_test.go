package multitree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenDamagedRootRecord: a snapshot whose root record's hash was
// damaged (the last branch record of a tree of many keys, the only leaf
// record of a tree of one) is refused by every open, and by Verify, with
// ErrCorrupt naming the file, whatever Options.OpenCheck says: without the check every hash
// the database computes starts from that record, so a writable open would
// serve and commit app hashes the chain never had before a background
// check reported the damage, and OpenCheckNone never would.
func TestOpenDamagedRootRecord(t *testing.T) {
	for _, c := range []struct {
		store, file string
		keys        int
	}{{"many", "branches", 300}, {"one", "leaves", 1}} {
		t.Run(c.store, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"other", c.store}, SnapshotInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.keys; i++ {
				if err := db.Set(c.store, []byte(fmt.Sprintf("key-%05d", i)), []byte("value")); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Set("other", []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
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
			path := filepath.Join(dir, snapshotDirName(1), treeDirName(c.store), c.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-64] ^= 0x01 // the first byte of the last record's hash
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{
				{SnapshotInterval: -1},
				{SnapshotInterval: -1, OpenCheck: OpenCheckNone},
				{ReadOnly: true, OpenCheck: OpenCheckNone},
			} {
				db, err := Open(dir, opts)
				if err == nil {
					info := db.LastCommitInfo()
					db.Close()
					t.Fatalf("open (check %v, read-only %v) of a damaged root record succeeded, app hash %X", opts.OpenCheck, opts.ReadOnly, info.Hash())
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Fatalf("open (check %v, read-only %v): %v; want ErrCorrupt naming %s", opts.OpenCheck, opts.ReadOnly, err, path)
				}
			}
			// Verify names the damaged file, as for any damage it finds
			if _, err := Verify(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Verify: %v; want ErrCorrupt naming %s", err, path)
			}
		})
	}
}
