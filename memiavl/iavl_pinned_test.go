package memiavl_test

// Replays of cosmos/iavl v1.2.2's own tests (basic_test.go, tree_test.go,
// mutable_tree_test.go, iterator_test.go, proof*_test.go, import_test.go)
// with the expectations those tests pin.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

const pinnedEmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func pinnedNew(t *testing.T, initial int64) *memiavl.Tree {
	t.Helper()
	tr, err := memiavl.New(memiavl.Options{InitialVersion: initial})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func pinnedSet(t *testing.T, tr *memiavl.Tree, k, v string, wantUpdated bool) {
	t.Helper()
	up, err := tr.Set([]byte(k), []byte(v))
	if err != nil || up != wantUpdated {
		t.Fatalf("Set(%q) = %v, %v; iavl: %v, nil", k, up, err, wantUpdated)
	}
}

func pinnedSave(t *testing.T, tr *memiavl.Tree) ([]byte, int64) {
	t.Helper()
	h, v, err := tr.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	return h, v
}

// pinnedReopen writes the tree's saved version to a snapshot and opens it.
func pinnedReopen(t *testing.T, tr *memiavl.Tree) *memiavl.Tree {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	_, re := openSnapshot(t, dir)
	return re
}

// iavl basic_test.go TestBasic: Set's updated flag and GetWithIndex/Get of
// present and absent keys (index of the position an absent key would take).
func TestIavlPinnedBasic(t *testing.T) {
	tr := pinnedNew(t, 0)
	pinnedSet(t, tr, "1", "one", false)
	pinnedSet(t, tr, "2", "two", false)
	pinnedSet(t, tr, "2", "TWO", true)
	pinnedSet(t, tr, "5", "five", false)
	cases := []struct {
		key   []byte
		idx   int64
		value []byte
	}{
		{[]byte{0x00}, 0, nil},
		{[]byte("1"), 0, []byte("one")},
		{[]byte("2"), 1, []byte("TWO")},
		{[]byte("4"), 2, nil},
		{[]byte("6"), 3, nil},
	}
	check := func(t *testing.T, tr *memiavl.Tree) {
		for _, c := range cases {
			idx, val, err := tr.GetWithIndex(c.key)
			if err != nil || idx != c.idx || !bytes.Equal(val, c.value) || (val == nil) != (c.value == nil) {
				t.Errorf("GetWithIndex(%x) = %d, %q, %v; iavl %d, %q", c.key, idx, val, err, c.idx, c.value)
			}
			val, err = tr.Get(c.key)
			if err != nil || !bytes.Equal(val, c.value) || (val == nil) != (c.value == nil) {
				t.Errorf("Get(%x) = %q, %v; iavl %q", c.key, val, err, c.value)
			}
		}
	}
	t.Run("working", func(t *testing.T) { check(t, tr) })
	pinnedSave(t, tr)
	t.Run("saved", func(t *testing.T) { check(t, tr) })
	t.Run("snapshot", func(t *testing.T) { check(t, pinnedReopen(t, tr)) })
}

// i2b is iavl's testutils i2b: a zigzag varint.
func pinnedI2b(i int) []byte {
	var buf [binary.MaxVarintLen64]byte
	return append([]byte(nil), buf[:binary.PutVarint(buf[:], int64(i))]...)
}

func pinnedB2i(b []byte) int {
	i, _ := binary.Varint(b)
	return int(i)
}

// pinnedShape is a tree shape in iavl's N(l, r) notation: an int leaf or a pair.
type pinnedShape struct {
	leaf        int
	left, right *pinnedShape
}

func pinnedN(l, r any) *pinnedShape {
	conv := func(x any) *pinnedShape {
		if s, ok := x.(*pinnedShape); ok {
			return s
		}
		return &pinnedShape{leaf: x.(int)}
	}
	return &pinnedShape{left: conv(l), right: conv(r)}
}

// stream returns the post-order export of the shape, all at version 1, with
// empty values, and its height, size and smallest key.
func (s *pinnedShape) stream(out *[]*memiavl.ExportNode) (height int8, min []byte) {
	if s.left == nil {
		k := pinnedI2b(s.leaf)
		*out = append(*out, &memiavl.ExportNode{Key: k, Value: []byte{}, Version: 1})
		return 0, k
	}
	lh, lmin := s.left.stream(out)
	rh, rmin := s.right.stream(out)
	h := lh
	if rh > h {
		h = rh
	}
	*out = append(*out, &memiavl.ExportNode{Key: rmin, Version: 1, Height: h + 1})
	return h + 1, lmin
}

// pinnedPrint prints the saved version of tr as iavl's P does.
func pinnedPrint(t *testing.T, tr *memiavl.Tree) string {
	t.Helper()
	var stack []string
	for _, n := range exportAll(t, tr.Export()) {
		if n.Height == 0 {
			stack = append(stack, fmt.Sprint(pinnedB2i(n.Key)))
			continue
		}
		l, r := stack[len(stack)-2], stack[len(stack)-1]
		stack = append(stack[:len(stack)-2], "("+l+" "+r+")")
	}
	if len(stack) != 1 {
		t.Fatalf("export left %d subtrees", len(stack))
	}
	return stack[0]
}

// iavl basic_test.go TestUnit: the shapes after one insert or removal into
// fixed trees (built here by importing them).
func TestIavlPinnedUnit(t *testing.T) {
	build := func(t *testing.T, s *pinnedShape) *memiavl.Tree {
		var nodes []*memiavl.ExportNode
		s.stream(&nodes)
		return importTree(t, filepath.Join(t.TempDir(), "t"), 1, nodes)
	}
	type op struct {
		set  bool
		i    int
		want string
	}
	cases := []struct {
		tree *pinnedShape
		ops  []op
	}{
		{pinnedN(4, 20), []op{{true, 8, "((4 8) 20)"}, {true, 25, "(4 (20 25))"}}},
		{pinnedN(4, pinnedN(20, 25)), []op{{true, 8, "((4 8) (20 25))"}, {true, 30, "((4 20) (25 30))"}}},
		{pinnedN(pinnedN(1, 2), 6), []op{{true, 4, "((1 2) (4 6))"}, {true, 8, "((1 2) (6 8))"}}},
		{pinnedN(pinnedN(1, 2), pinnedN(pinnedN(5, 6), pinnedN(7, 9))), []op{{true, 8, "(((1 2) (5 6)) ((7 8) 9))"}, {true, 10, "(((1 2) (5 6)) (7 (9 10)))"}}},
		{pinnedN(pinnedN(1, 2), 3), []op{{false, 2, "(1 3)"}, {false, 3, "(1 2)"}}},
		{pinnedN(pinnedN(pinnedN(1, 2), 3), pinnedN(4, 5)), []op{{false, 4, "((1 2) (3 5))"}, {false, 3, "((1 2) (4 5))"}}},
	}
	for ci, c := range cases {
		for _, o := range c.ops {
			tr := build(t, c.tree)
			if o.set {
				up, err := tr.Set(pinnedI2b(o.i), []byte{})
				if err != nil || up {
					t.Fatalf("case %d: Set(%d) = %v, %v", ci, o.i, up, err)
				}
			} else {
				removed, err := tr.Remove(pinnedI2b(o.i))
				if err != nil || !removed {
					t.Fatalf("case %d: Remove(%d) = %v, %v", ci, o.i, removed, err)
				}
			}
			pinnedSave(t, tr)
			if err := tr.Check(); err != nil {
				t.Fatal(err)
			}
			if got := pinnedPrint(t, tr); got != o.want {
				t.Errorf("case %d: op %v on %v: %s, iavl %s", ci, o.i, ci, got, o.want)
			}
		}
	}
}

// iavl basic_test.go TestIterateRange.
func TestIavlPinnedIterateRange(t *testing.T) {
	records := [][2]string{
		{"abc", "123"}, {"low", "high"}, {"fan", "456"}, {"foo", "a"}, {"foobaz", "c"},
		{"good", "bye"}, {"foobang", "d"}, {"foobar", "b"}, {"food", "e"}, {"foml", "f"},
	}
	tr := pinnedNew(t, 0)
	for _, r := range records {
		pinnedSet(t, tr, r[0], r[1], false)
	}
	var keys []string
	for _, r := range records {
		keys = append(keys, r[0])
	}
	sort.Strings(keys)
	bs := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	cases := []struct {
		start, end  string
		asc         bool
		first, last string
		count       int
	}{
		{"foo", "goo", true, "foo", "food", 5},
		{"aaa", "abb", true, "", "", 0},
		{"", "flap", true, "abc", "fan", 2},
		{"foob", "", true, "foobang", "low", 6},
		{"very", "", true, "", "", 0},
		{"fooba", "food", true, "foobang", "foobaz", 3},
		{"fooba", "food", false, "foobaz", "foobang", 3},
		{"g", "", false, "low", "good", 2},
		{"a", "a", true, "", "", 0}, // iterator_test.go TestIterator_Empty_Invalid
	}
	check := func(t *testing.T, tr *memiavl.Tree) {
		var all []string
		for it := tr.Iterator(nil, nil, true); it.Valid(); it.Next() {
			all = append(all, string(it.Key()))
		}
		if fmt.Sprint(all) != fmt.Sprint(keys) {
			t.Errorf("full iteration %v, iavl %v", all, keys)
		}
		for _, c := range cases {
			var first, last string
			n := 0
			it := tr.Iterator(bs(c.start), bs(c.end), c.asc)
			s, e := it.Domain()
			if !bytes.Equal(s, bs(c.start)) || !bytes.Equal(e, bs(c.end)) {
				t.Errorf("Domain %q %q", s, e)
			}
			for ; it.Valid(); it.Next() {
				if n == 0 {
					first = string(it.Key())
				}
				last = string(it.Key())
				n++
			}
			if it.Error() != nil {
				t.Errorf("error %v", it.Error())
			}
			if first != c.first || last != c.last || n != c.count {
				t.Errorf("[%q,%q) asc=%v: %q..%q (%d), iavl %q..%q (%d)", c.start, c.end, c.asc, first, last, n, c.first, c.last, c.count)
			}
		}
	}
	t.Run("working", func(t *testing.T) { check(t, tr) })
	pinnedSave(t, tr)
	t.Run("snapshot", func(t *testing.T) { check(t, pinnedReopen(t, tr)) })
}

// iavl tree_test.go TestVersionedEmptyTree and TestVersionedTreeHash and
// TestVersionedTree (hash4 == hash3): empty saves hash to sha256(""), an
// unchanged save repeats the hash, a proof at the last version.
func TestIavlPinnedVersionedHashes(t *testing.T) {
	tr := pinnedNew(t, 0)
	for want := int64(1); want <= 4; want++ {
		h, v := pinnedSave(t, tr)
		if hex.EncodeToString(h) != pinnedEmptyHash || v != want {
			t.Fatalf("empty save: %x %d, iavl %s %d", h, v, pinnedEmptyHash, want)
		}
	}
	if tr.Version() != 4 {
		t.Fatalf("Version %d", tr.Version())
	}
	// an empty tree's snapshot at version 4
	re := pinnedReopen(t, tr)
	if re.Version() != 4 || hex.EncodeToString(re.RootHash()) != pinnedEmptyHash || !re.IsEmpty() {
		t.Fatalf("empty snapshot: v%d %x", re.Version(), re.RootHash())
	}

	// TestVersionedTreeHash: Hash() is the last saved hash in iavl; here
	// the working tree's hash differs from the saved one until the save.
	tr = pinnedNew(t, 0)
	pinnedSet(t, tr, "I", "D", false)
	if hex.EncodeToString(tr.Copy().RootHash()) != pinnedEmptyHash {
		t.Fatal("saved hash before the first save is not sha256(\"\")")
	}
	h1, _ := pinnedSave(t, tr)
	pinnedSet(t, tr, "I", "F", true)
	if !bytes.Equal(tr.Copy().RootHash(), h1) {
		t.Fatal("saved hash changed by an unsaved Set")
	}
	h2, v2 := pinnedSave(t, tr)
	if v2 != 2 {
		t.Fatal(v2)
	}
	p, err := tr.GetMembershipProof([]byte("I"))
	if err != nil || !bytes.Equal(p.GetExist().Value, []byte("F")) {
		t.Fatalf("proof %v %v", p, err)
	}
	if !ics23.VerifyMembership(ics23.IavlSpec, h2, p, []byte("I"), []byte("F")) {
		t.Fatal("proof does not verify")
	}
	h3, _ := pinnedSave(t, tr)
	if !bytes.Equal(h3, h2) {
		t.Fatal("unchanged save changed the hash")
	}
}

// iavl proof_iavl_test.go TestProofOp and proof_test.go TestTreeGetProof,
// TestTreeKeyExistsProof: membership and non-membership proofs of one-byte
// keys (absent keys below, between and above the present ones) verify
// against the working and the saved root.
func TestIavlPinnedProofOp(t *testing.T) {
	tr := pinnedNew(t, 0)
	// empty tree: GetProof errors in iavl
	if _, err := tr.GetMembershipProof([]byte("foo")); !errors.Is(err, memiavl.ErrKeyNotFound) {
		t.Fatalf("membership proof in an empty tree: %v", err)
	}
	present := []byte{0x0a, 0x11, 0x2e, 0x32, 0x50, 0x72, 0x99, 0xa1, 0xe4, 0xf7}
	for _, k := range present {
		if _, err := tr.Set([]byte{k}, []byte{k}); err != nil {
			t.Fatal(err)
		}
	}
	probes := []struct {
		k       byte
		present bool
	}{
		{0x00, false}, {0x0a, true}, {0x0b, false}, {0x11, true}, {0x60, false},
		{0x72, true}, {0x99, true}, {0xaa, false}, {0xe4, true}, {0xf7, true}, {0xff, false},
		{0x01, false}, // TestTreeGetProof
	}
	check := func(t *testing.T, tr *memiavl.Tree) {
		root := tr.RootHash()
		for _, p := range probes {
			key := []byte{p.k}
			if p.present {
				proof, err := tr.GetMembershipProof(key)
				if err != nil || !ics23.VerifyMembership(ics23.IavlSpec, root, proof, key, key) {
					t.Errorf("%02x: membership %v", p.k, err)
				}
				if _, err := tr.GetNonMembershipProof(key); !errors.Is(err, memiavl.ErrKeyFound) {
					t.Errorf("%02x: non-membership proof of a present key: %v", p.k, err)
				}
			} else {
				proof, err := tr.GetNonMembershipProof(key)
				if err != nil || !ics23.VerifyNonMembership(ics23.IavlSpec, root, proof, key) {
					t.Errorf("%02x: non-membership %v", p.k, err)
				}
				if _, err := tr.GetMembershipProof(key); !errors.Is(err, memiavl.ErrKeyNotFound) {
					t.Errorf("%02x: membership proof of an absent key: %v", p.k, err)
				}
			}
		}
	}
	t.Run("working", func(t *testing.T) { check(t, tr) })
	pinnedSave(t, tr)
	t.Run("snapshot", func(t *testing.T) { check(t, pinnedReopen(t, tr)) })
}
