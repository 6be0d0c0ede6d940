package main

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// renameFirstStore rewrites the metadata file of the snapshot directory
// sdir (format in multitree/format.go) with its first store's name
// replaced by name, and a valid checksum.
func renameFirstStore(t *testing.T, sdir, name string) {
	t.Helper()
	p := filepath.Join(sdir, "metadata")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(b[24:]) == 0 {
		t.Fatal("no store")
	}
	l := int(binary.LittleEndian.Uint16(b[28:]))
	out := append([]byte{}, b[:28]...)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(name)))
	out = append(out, name...)
	out = append(out, b[30+l:len(b)-4]...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCLIHostileEmptyStoreName: `verify` and `dump` of a database whose
// snapshot metadata (valid checksum) names a store "", a name no database
// writes, fail with exit code 1 reporting corruption; they do not panic
// (the SDK's CommitInfo.Hash panics on an empty store name).
func TestCLIHostileEmptyStoreName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v < 2; v++ {
		if err := db.Set("a", []byte{byte(v)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := db.Set("b", []byte{byte(v)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sdir := filepath.Join(dir, "snapshot-00000000000000000002")
	if err := os.Rename(filepath.Join(sdir, "s-a"), filepath.Join(sdir, "x-")); err != nil {
		t.Fatal(err)
	}
	renameFirstStore(t, sdir, "")
	for _, args := range [][]string{{"verify", dir}, {"dump", dir}} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("memiavl %s panicked: %v", strings.Join(args, " "), p)
				}
			}()
			code, _, stderr := cli(t, args...)
			if code != exitFailure || !strings.Contains(stderr, "corrupt") {
				t.Errorf("memiavl %s: exit %d, stderr %q; want exit 1 reporting corruption", strings.Join(args, " "), code, stderr)
			}
		}()
	}
}
