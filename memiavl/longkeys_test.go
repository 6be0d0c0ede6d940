package memiavl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestLongKeysAndValuesAgainstIAVL drives both trees with keys and values
// whose lengths straddle the uvarint length boundaries of the node hash
// (127/128 and 16383/16384 bytes) and go past 64 KiB, across versions of
// inserts, updates and removals, and through a snapshot: the root hashes
// must match cosmos/iavl's after every version, the proofs must be iavl's
// byte for byte and verify, and the snapshot's tree must read back the
// same.
func TestLongKeysAndValuesAgainstIAVL(t *testing.T) {
	r := testutil.Rand(t)
	lengths := []int{0, 1, 127, 128, 129, 255, 300, 16383, 16384, 16385, 70000}
	ours, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := newIAVL(t, 0)
	fill := func(n int, tag byte) []byte {
		b := make([]byte, n)
		r.Read(b)
		if n > 0 {
			b[0] = tag
		}
		return b
	}
	var keys [][]byte
	for i, kl := range lengths {
		keys = append(keys, fill(kl, byte('a'+i))) // one empty key
	}
	save := func(what string) {
		t.Helper()
		saveBoth(t, what, ours, ref)
	}
	set := func(k, v []byte) {
		t.Helper()
		if _, err := ours.Set(k, v); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		set(k, fill(lengths[i%len(lengths)], 'v'))
	}
	save("inserts")
	for i, k := range keys {
		if i%2 == 0 {
			set(k, fill(lengths[(i+3)%len(lengths)], 'w'))
		}
	}
	save("updates")
	for i, k := range keys {
		if i%3 == 0 {
			if _, err := ours.Remove(k); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ref.Remove(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	save("removals")
	// proofs of every key, present or removed, and of absent long keys,
	// byte for byte against iavl's and verified against the root
	pp := &proofPair{t: t, ours: ours, ref: ref}
	for _, k := range keys {
		pp.compareProof(k)
	}
	for _, kl := range []int{128, 16384, 70000} {
		pp.compareProof(fill(kl, 'q'))
	}
	for _, k := range keys {
		want, err := ref.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ours.Get(k)
		if err != nil || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("Get of a %d-byte key: %d bytes (%v), iavl %d", len(k), len(got), err, len(want))
		}
	}
	nt := reopen(t, ours, filepath.Join(t.TempDir(), "snap"))
	sameContents(t, ours, nt)
	// a change on top of the snapshot
	k := fill(16384, 'z')
	if _, err := nt.Set(k, fill(128, 'y')); err != nil {
		t.Fatal(err)
	}
	if _, err := ours.Set(k, mustGet(t, nt, k)); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Set(k, mustGet(t, nt, k)); err != nil {
		t.Fatal(err)
	}
	h, _, err := nt.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	save("change on the snapshot")
	if !bytes.Equal(h, ours.RootHash()) {
		t.Fatalf("tree on the snapshot: hash %X, in memory %X", h, ours.RootHash())
	}
	if err := nt.WriteSnapshot(context.Background(), filepath.Join(t.TempDir(), "snap2")); err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, tr *memiavl.Tree, k []byte) []byte {
	t.Helper()
	v, err := tr.Get(k)
	if err != nil || v == nil {
		t.Fatalf("Get: %v", err)
	}
	return v
}
