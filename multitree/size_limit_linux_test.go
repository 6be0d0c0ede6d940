package multitree

import (
	"errors"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestValueOver4GiBRefused: the snapshot format records a value's length
// in 32 bits. Set and ApplyChangeSets refuse a value of 2^32 bytes
// (memiavl.ErrTooLarge) before anything changes, instead of accepting it
// and failing the Commit that must write it into a snapshot (the entry is
// too large for the log), which would break the database; the database
// commits on. The value is a mapping of one 16 MiB file repeated (16 MiB
// of page cache, not 4 GiB).
func TestValueOver4GiBRefused(t *testing.T) {
	value := testutil.BigZeroSlice(t, 1<<32)
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	edgeCommit(t, db, "a", "k0", "v0")
	if err := db.Set("a", []byte("big"), value); !errors.Is(err, memiavl.ErrTooLarge) {
		t.Fatalf("Set of a value of 2^32 bytes: %v, want ErrTooLarge", err)
	}
	err = db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{
		{Key: []byte("small"), Value: []byte("v")}, {Key: []byte("big"), Value: value},
	}}})
	if !errors.Is(err, memiavl.ErrTooLarge) {
		t.Fatalf("ApplyChangeSets with a value of 2^32 bytes: %v, want ErrTooLarge", err)
	}
	if has, err := db.WorkingTree("a").Has([]byte("small")); err != nil || has {
		t.Fatalf("the refused change set applied a pair: %v %v", has, err)
	}
	edgeCommit(t, db, "a", "k1", "v1")
	if got, err := db.Get("a", []byte("big")); err != nil || got != nil {
		t.Fatalf("big after the refusals: %d bytes, %v", len(got), err)
	}
}
