package memiavl_test

import (
	"bytes"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestNilKeyMembershipProof: a nil key is the empty key for proofs as for
// reads (doc.go: "a read of a nil key reads the empty key, as iavl's do"):
// GetMembershipProof(nil) of a tree holding the empty key is iavl's proof
// of it, byte for byte.
func TestNilKeyMembershipProof(t *testing.T) {
	ours, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := newIAVL(t, 0)
	for _, k := range [][]byte{{}, {1}, {2}} {
		if _, err := ours.Set(k, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Set(k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := ours.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ref.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	// reads of nil agree
	if v, err := ours.Get(nil); err != nil || !bytes.Equal(v, []byte("v")) {
		t.Fatalf("Get(nil) = %q, %v", v, err)
	}
	want, err := ref.GetMembershipProof(nil)
	if err != nil {
		t.Fatalf("iavl: %v", err)
	}
	got, err := ours.GetMembershipProof(nil)
	if err != nil {
		t.Fatalf("GetMembershipProof(nil) = %v; iavl proves the empty key: %v", err, want)
	}
	if a, b := marshalProof(t, got), marshalProof(t, want); !bytes.Equal(a, b) {
		t.Fatalf("proof of nil differs:\n ours %X\n iavl %X", a, b)
	}
}
