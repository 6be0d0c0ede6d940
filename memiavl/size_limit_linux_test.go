package memiavl

import (
	"errors"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestSetTooLarge: a key or a value longer than MaxKeyValueSize (2^32-1
// bytes: the snapshot format records 32-bit lengths) is refused by Set with
// ErrTooLarge, leaving the tree unchanged.
func TestSetTooLarge(t *testing.T) {
	big := testutil.BigZeroSlice(t, 1<<32)
	tree, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	before, _, err := tree.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	for name, kv := range map[string][2][]byte{"value": {[]byte("x"), big}, "key": {big, []byte("x")}} {
		if _, err := tree.Set(kv[0], kv[1]); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Set with a %s of 2^32 bytes: %v, want ErrTooLarge", name, err)
		}
	}
	after, _, err := tree.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("a refused Set changed the tree")
	}
	if _, err := tree.Set(big[:MaxKeyValueSize/1024], []byte("x")); err != nil {
		t.Fatalf("a key of 4 MiB: %v", err)
	}
}
