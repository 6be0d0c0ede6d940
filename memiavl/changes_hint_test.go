package memiavl_test

import (
	"math"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestChangesHintAnySize: every ChangesHint that Options accepts opens a
// tree (the hint sizes a filter, clamped to its bound), the largest too.
func TestChangesHintAnySize(t *testing.T) {
	_, s, _ := mappedTree(t, keysTree(t, 1, ""))
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
			if v, err := tr.Get([]byte("key-00000")); err != nil || string(v) != "value-0" {
				t.Errorf("ChangesHint %d: Get(key-00000) = %q, %v", hint, v, err)
			}
			if _, err := tr.Set([]byte("b"), []byte("2")); err != nil {
				t.Errorf("ChangesHint %d: Set: %v", hint, err)
			}
		}()
	}
}
