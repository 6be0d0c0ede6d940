package memiavl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/cosmos/iavl"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// proofPair is one memiavl tree and the cosmos/iavl tree built with the same
// operations.
type proofPair struct {
	t    *testing.T
	ours *memiavl.Tree
	ref  *iavl.MutableTree
	keys [][]byte // present keys
}

func newProofPair(t *testing.T, initial int64) *proofPair {
	ours, err := memiavl.New(memiavl.Options{InitialVersion: initial})
	if err != nil {
		t.Fatal(err)
	}
	ref := newIAVL(t, initial)
	return &proofPair{t: t, ours: ours, ref: ref}
}

func (p *proofPair) set(k, v []byte) {
	updated, err := p.ours.Set(k, v)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.ref.Set(k, v); err != nil {
		p.t.Fatal(err)
	}
	if !updated {
		p.keys = append(p.keys, k)
	}
}

// remove removes the i-th present key.
func (p *proofPair) remove(i int) {
	k := p.keys[i]
	if _, err := p.ours.Remove(k); err != nil {
		p.t.Fatal(err)
	}
	if _, _, err := p.ref.Remove(k); err != nil {
		p.t.Fatal(err)
	}
	p.keys[i] = p.keys[len(p.keys)-1]
	p.keys = p.keys[:len(p.keys)-1]
}

func (p *proofPair) save() {
	h1, v1, err := p.ours.SaveVersion()
	if err != nil {
		p.t.Fatal(err)
	}
	h2, v2, err := p.ref.SaveVersion()
	if err != nil {
		p.t.Fatal(err)
	}
	if v1 != v2 || !bytes.Equal(h1, h2) {
		p.t.Fatalf("version %d hash %X, iavl version %d hash %X", v1, h1, v2, h2)
	}
}

// reopenFromSnapshot replaces ours by a tree read from a snapshot of its
// saved version, so that proofs walk persisted nodes.
func (p *proofPair) reopenFromSnapshot(dir string) {
	t := p.t
	if err := p.ours.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	p.ours = openSnapshotTree(t, dir)
}

func marshalProof(t *testing.T, p *ics23.CommitmentProof) []byte {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// beyondSpec reports whether the saved version may be one whose proofs
// ICS23's IAVL spec cannot verify, iavl's as ours: a version of 2^48 or
// more takes 8 bytes or more in a node's prefix, which with the height and
// the size can pass the spec's bound on an inner op's prefix (12 bytes).
func (p *proofPair) beyondSpec() bool { return p.ours.Version() >= 1<<48 }

// compareProof checks the proofs of key on the saved version against iavl's,
// byte for byte, and verifies ours against the root hash.
func (p *proofPair) compareProof(key []byte) {
	t := p.t
	t.Helper()
	imm, err := p.ref.GetImmutable(p.ref.Version())
	if err != nil {
		t.Fatal(err)
	}
	tree := p.ours.Copy()
	root := tree.RootHash()
	if !bytes.Equal(root, imm.Hash()) {
		t.Fatalf("root %X, iavl %X", root, imm.Hash())
	}
	value, err := tree.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	var ours, want *ics23.CommitmentProof
	if value != nil {
		if ours, err = tree.GetMembershipProof(key); err != nil {
			t.Fatal(err)
		}
		if want, err = imm.GetMembershipProof(key); err != nil {
			t.Fatal(err)
		}
		ok, iok := ics23.VerifyMembership(ics23.IavlSpec, root, ours, key, value), ics23.VerifyMembership(ics23.IavlSpec, root, want, key, value)
		if ok != iok || (!p.beyondSpec() && ok != (len(value) > 0)) {
			t.Fatalf("existence proof of %X (value %X) at version %d verifies: %v, iavl's %v", key, value, tree.Version(), ok, iok)
		}
		if _, err := tree.GetNonMembershipProof(key); !errors.Is(err, memiavl.ErrKeyFound) {
			t.Fatalf("non-membership proof of a present key: %v", err)
		}
	} else {
		if ours, err = tree.GetNonMembershipProof(key); err != nil {
			t.Fatal(err)
		}
		if want, err = imm.GetNonMembershipProof(key); err != nil {
			t.Fatal(err)
		}
		// ics23 cannot verify an empty tree's proof nor a neighbour with
		// an empty value; iavl's proofs fail the same way
		ne := ours.GetNonexist()
		verifiable := (ne.Left != nil || ne.Right != nil) &&
			(ne.Left == nil || len(ne.Left.Value) > 0) && (ne.Right == nil || len(ne.Right.Value) > 0)
		ok, iok := ics23.VerifyNonMembership(ics23.IavlSpec, root, ours, key), ics23.VerifyNonMembership(ics23.IavlSpec, root, want, key)
		if ok != iok || (!p.beyondSpec() && ok != verifiable) {
			t.Fatalf("non-existence proof of %X at version %d verifies: %v, iavl's %v", key, tree.Version(), ok, iok)
		}
		if _, err := tree.GetMembershipProof(key); !errors.Is(err, memiavl.ErrKeyNotFound) {
			t.Fatalf("membership proof of an absent key: %v", err)
		}
	}
	if a, b := marshalProof(t, ours), marshalProof(t, want); !bytes.Equal(a, b) {
		t.Fatalf("proof of %X (present %v) differs from iavl's:\n ours %X\n iavl %X", key, value != nil, a, b)
	}
}

// someKey returns a present key or a random (most likely absent) one.
func (p *proofPair) someKey(r *rand.Rand, gen *testutil.KeyGen) []byte {
	if len(p.keys) > 0 && r.Intn(2) == 0 {
		return p.keys[r.Intn(len(p.keys))]
	}
	return gen.Key()
}

// TestProofsAgainstIAVL: proofs of random trees equal iavl's byte for
// byte and verify as iavl's do, also at versions from 2^55 and 2^62 on,
// where ICS23 verifies few of either's. (Versions near math.MaxInt64 have
// no oracle: iavl's SaveVersion searches its versions from 1 up to there.)
func TestProofsAgainstIAVL(t *testing.T) {
	for _, initial := range []int64{0, 50, 1 << 55, 1 << 62} {
		t.Run(fmt.Sprintf("initial=%d", initial), func(t *testing.T) {
			r := testutil.Rand(t)
			gen := testutil.NewKeyGen(r)
			p := newProofPair(t, initial)
			versions, ops := 60, 120
			if testing.Short() {
				versions = 20
			}
			for v := 0; v < versions; v++ {
				for i := 0; i < r.Intn(ops); i++ {
					if len(p.keys) > 0 && r.Intn(4) == 0 {
						p.remove(r.Intn(len(p.keys)))
					} else {
						// ics23 rejects leaves with empty values, so the
						// random trees have none (TestProofsSmallTrees has one)
						p.set(gen.Key(), append(gen.Value(40), 'v'))
					}
				}
				p.save()
				if v%7 == 3 {
					p.reopenFromSnapshot(filepath.Join(t.TempDir(), fmt.Sprint(v)))
				}
				for i := 0; i < 40; i++ {
					p.compareProof(p.someKey(r, gen))
				}
				// the ends of the key range
				p.compareProof([]byte{0})
				p.compareProof(bytes.Repeat([]byte{0xff}, 70))
			}
		})
	}
}

func TestProofsSmallTrees(t *testing.T) {
	p := newProofPair(t, 0)
	p.save()
	// empty tree: a non-existence proof without neighbours, as iavl's
	p.compareProof([]byte("a"))
	p.set([]byte("b"), []byte{})
	p.save()
	p.compareProof([]byte("b"))
	for _, k := range []string{"a", "b", "c"} {
		p.compareProof([]byte(k))
	}
	p.set([]byte("d"), []byte("dv"))
	p.save()
	p.reopenFromSnapshot(filepath.Join(t.TempDir(), "snap"))
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		p.compareProof([]byte(k))
	}
	// a nil key is the empty key, as for reads (and iavl's proofs)
	// (TestNilKeyMembershipProof: of a tree holding the empty key)
	p.compareProof(nil)
}

// TestProofOfWorkingTree checks that a proof over unsaved changes verifies
// against the working root hash.
func TestProofOfWorkingTree(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("k%03d", i)), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if i == 50 {
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := tr.RootHash()
	pr, err := tr.GetMembershipProof([]byte("k077"))
	if err != nil {
		t.Fatal(err)
	}
	if !ics23.VerifyMembership(ics23.IavlSpec, root, pr, []byte("k077"), []byte{77}) {
		t.Fatal("proof over the working tree does not verify")
	}
	pr, err = tr.GetNonMembershipProof([]byte("k0775"))
	if err != nil {
		t.Fatal(err)
	}
	if !ics23.VerifyNonMembership(ics23.IavlSpec, root, pr, []byte("k0775")) {
		t.Fatal("non-existence proof over the working tree does not verify")
	}
}
