package workload

import (
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestFinishKeepsLastChange: finish sorts a block's pairs by key and
// keeps the last change of a key changed twice (an update after an insert,
// a delete after an update), as applying them in order would leave it.
func TestFinishKeepsLastChange(t *testing.T) {
	got := finish([]wal.KVPair{
		{Key: []byte("b"), Value: []byte("b1")},
		{Key: []byte("a"), Value: []byte("a1")},
		{Key: []byte("b"), Value: []byte("b2")},
		{Key: []byte("c"), Value: []byte("c1")},
		{Key: []byte("a"), Delete: true},
		{Key: []byte("b"), Value: []byte("b3")},
	})
	want := []wal.KVPair{
		{Key: []byte("a"), Delete: true},
		{Key: []byte("b"), Value: []byte("b3")},
		{Key: []byte("c"), Value: []byte("c1")},
	}
	if len(got) != len(want) {
		t.Fatalf("finish: %d pairs, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if string(got[i].Key) != string(want[i].Key) || got[i].Delete != want[i].Delete || string(got[i].Value) != string(want[i].Value) {
			t.Errorf("finish: pair %d is %q delete=%v value=%q, want %q delete=%v value=%q", i,
				got[i].Key, got[i].Delete, got[i].Value, want[i].Key, want[i].Delete, want[i].Value)
		}
	}
}
