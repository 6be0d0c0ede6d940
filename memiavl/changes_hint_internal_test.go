package memiavl

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestChangesHint: a tree opened on a snapshot sizes its first filter of
// changed keys by Options.ChangesHint, by the snapshot without one; a
// small hint still records every change (the set adds filters as it
// fills), and a negative one is refused.
func TestChangesHint(t *testing.T) {
	tr, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200000; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("k%07d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "snap")
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	firstWords := func(tr *Tree) int { return len((*tr.touched.chain.Load())[0].words) }

	byDefault, err := NewFromSnapshot(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := firstWords(byDefault), 65536/4; got != want { // a quarter of 200,000 keys, to a power of two
		t.Errorf("first filter of %d words without a hint, want %d", got, want)
	}
	small, err := NewFromSnapshot(s, Options{ChangesHint: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := firstWords(small), minTouchKeys/4; got != want {
		t.Errorf("first filter of %d words with hint 1, want %d", got, want)
	}
	// more changes than the hint: every changed key reads its new value
	for i := 0; i < 20000; i++ {
		if _, err := small.Set([]byte(fmt.Sprintf("k%07d", i*10)), []byte("w")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := small.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200000; i += 7 {
		want := "v"
		if i%10 == 0 {
			want = "w"
		}
		if got, err := small.Get([]byte(fmt.Sprintf("k%07d", i))); err != nil || string(got) != want {
			t.Fatalf("k%07d = %q, %v, want %q", i, got, err, want)
		}
	}
	if _, err := NewFromSnapshot(s, Options{ChangesHint: -1}); err == nil {
		t.Error("a negative changes hint is accepted")
	}
}
