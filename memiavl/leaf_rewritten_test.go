package memiavl_test

import (
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestWorkingLeafRewritten: it reports whether the last Set replaced the
// value of a leaf written earlier in the working version; a Set that
// fails replaces nothing, whatever the Set before it did.
func TestWorkingLeafRewritten(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(k, v []byte, want bool) {
		t.Helper()
		if _, err := tr.Set(k, v); err != nil {
			t.Fatal(err)
		}
		if got := tr.WorkingLeafRewritten(); got != want {
			t.Fatalf("Set(%q) then WorkingLeafRewritten() = %v, want %v", k, got, want)
		}
	}
	set([]byte("a"), []byte("1"), false)
	set([]byte("b"), []byte("1"), false)
	set([]byte("a"), []byte("2"), true)
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	set([]byte("a"), []byte("3"), false) // written in an earlier version
	set([]byte("a"), []byte("4"), true)
	for _, bad := range []struct{ k, v []byte }{{nil, []byte("x")}, {[]byte("a"), nil}} {
		if _, err := tr.Set(bad.k, bad.v); err == nil {
			t.Fatalf("Set(%q, %q) succeeded", bad.k, bad.v)
		}
		if tr.WorkingLeafRewritten() {
			t.Fatalf("a refused Set(%q, %q) reports a rewritten leaf", bad.k, bad.v)
		}
		set([]byte("a"), []byte("5"), true)
	}
}
