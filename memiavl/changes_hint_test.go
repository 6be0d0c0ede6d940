package memiavl_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestChangesHintAnySize: every ChangesHint that Options accepts opens a
// tree (the hint sizes a filter, clamped to its bound), the largest too.
func TestChangesHintAnySize(t *testing.T) {
	src, _ := memiavl.New(memiavl.Options{})
	if _, err := src.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "snap")
	if err := src.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, hint := range []int64{0, 1, 1 << 30, 1<<62 + 1, math.MaxInt64} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("NewFromSnapshot(ChangesHint: %d) panicked: %v", hint, r)
				}
			}()
			tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{ChangesHint: hint})
			if err != nil {
				t.Fatalf("NewFromSnapshot(ChangesHint: %d): %v", hint, err)
			}
			if v, err := tr.Get([]byte("a")); err != nil || string(v) != "1" {
				t.Errorf("ChangesHint %d: Get(a) = %q, %v", hint, v, err)
			}
			if _, err := tr.Set([]byte("b"), []byte("2")); err != nil {
				t.Errorf("ChangesHint %d: Set: %v", hint, err)
			}
		}()
	}
}
