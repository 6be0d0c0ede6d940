package memiavl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestFormat1EmptyKVsProof: a format version 1 snapshot (still read) of one
// leaf with the empty key and an empty value has an empty kvs file, which
// is not mapped. The leaf's key reads back empty, not nil (which the proofs
// take for "no neighbour"): the non-membership proof of a key above it
// holds that leaf as its left neighbour, as cosmos/iavl's proof does and as
// the same tree in memory or on a format 2 snapshot gives.
func TestFormat1EmptyKVsProof(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		ours, err := memiavl.New(memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ref := newIAVL(t, 0)
		if _, err := ours.Set([]byte{}, []byte{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Set([]byte{}, []byte{}); err != nil {
			t.Fatal(err)
		}
		saveBoth(t, "v1", ours, ref)
		dir := filepath.Join(t.TempDir(), "snap")
		if err := ours.WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		if v1 {
			testutil.SnapshotToFormat1(t, dir)
		}
		s, err := snapshot.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Verify(); err != nil {
			t.Fatal(err)
		}
		if k, err := s.LeafKey(0); k == nil || err != nil {
			t.Errorf("format 1 snapshot %v: LeafKey(0) = %v, %v, want the empty key", v1, k, err)
		}
		tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		imm, err := ref.GetImmutable(ref.Version())
		if err != nil {
			t.Fatal(err)
		}
		key := []byte{0}
		got, err := tr.GetNonMembershipProof(key)
		if err != nil {
			t.Fatal(err)
		}
		want, err := imm.GetNonMembershipProof(key)
		if err != nil {
			t.Fatal(err)
		}
		a, b := marshalProof(t, got), marshalProof(t, want)
		if !bytes.Equal(a, b) {
			t.Errorf("format 1 snapshot %v: non-membership proof of 00 differs from iavl's:\n ours %X (left neighbour present: %v)\n iavl %X (left neighbour present: %v)",
				v1, a, got.GetNonexist().Left != nil, b, want.GetNonexist().Left != nil)
		}
	}
}
