package memiavl_test

// Hash, proof and export/import compatibility with cosmos/iavl on edge
// cases: empty, 1-byte and long keys, keys that are prefixes of each other,
// 0x00 and 0xFF bytes, empty values, initial versions, snapshots reopened
// between versions, deferred hashing and exclusive mutation.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"testing"

	"cosmossdk.io/log"
	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

type edgePair struct {
	t       *testing.T
	ours    *memiavl.Tree
	ref     *iavl.MutableTree
	present map[string][]byte
	snaps   []*snapshot.Snapshot
}

func newEdgePair(t *testing.T, initial int64) *edgePair {
	ours, err := memiavl.New(memiavl.Options{InitialVersion: initial})
	if err != nil {
		t.Fatal(err)
	}
	ref := newIAVL(t, initial)
	p := &edgePair{t: t, ours: ours, ref: ref, present: map[string][]byte{}}
	t.Cleanup(func() {
		for _, s := range p.snaps {
			s.Close()
		}
	})
	return p
}

func (p *edgePair) set(k, v []byte) {
	p.t.Helper()
	u1, err := p.ours.Set(k, v)
	if err != nil {
		p.t.Fatal(err)
	}
	u2, err := p.ref.Set(k, v)
	if err != nil {
		p.t.Fatal(err)
	}
	if u1 != u2 {
		p.t.Fatalf("Set(%X) updated %v, iavl %v", k, u1, u2)
	}
	p.present[string(k)] = v
}

func (p *edgePair) remove(k []byte) {
	p.t.Helper()
	r1, err := p.ours.Remove(k)
	if err != nil {
		p.t.Fatal(err)
	}
	_, r2, err := p.ref.Remove(k)
	if err != nil {
		p.t.Fatal(err)
	}
	if r1 != r2 {
		p.t.Fatalf("Remove(%X) removed %v, iavl %v", k, r1, r2)
	}
	delete(p.present, string(k))
}

func (p *edgePair) save() {
	p.t.Helper()
	if w1, w2 := p.ours.RootHash(), p.ref.WorkingHash(); !bytes.Equal(w1, w2) {
		p.t.Fatalf("working hash %X, iavl %X", w1, w2)
	}
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
	if int64(len(p.present)) != p.ours.Size() {
		p.t.Fatalf("size %d, want %d", p.ours.Size(), len(p.present))
	}
	if err := p.ours.Check(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *edgePair) reopen() {
	p.t.Helper()
	dir := filepath.Join(p.t.TempDir(), "snap")
	if err := p.ours.WriteSnapshot(context.Background(), dir); err != nil {
		p.t.Fatal(err)
	}
	s, tr := openSnapshot(p.t, dir)
	p.snaps = append(p.snaps, s)
	if !bytes.Equal(tr.RootHash(), p.ours.RootHash()) {
		p.t.Fatalf("reopened root %X, was %X", tr.RootHash(), p.ours.RootHash())
	}
	p.ours = tr
}

func (p *edgePair) sortedKeys() [][]byte {
	ks := make([][]byte, 0, len(p.present))
	for k := range p.present {
		ks = append(ks, []byte(k))
	}
	sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i], ks[j]) < 0 })
	return ks
}

// edgeKey returns an edge-case heavy key.
func edgeKey(r *rand.Rand) []byte {
	switch r.Intn(8) {
	case 0: // short keys over a tiny alphabet: many prefixes of each other
		n := r.Intn(4)
		k := make([]byte, n)
		for i := range k {
			k[i] = []byte{0x00, 0x01, 0xff}[r.Intn(3)]
		}
		return k
	case 1:
		return []byte{byte(r.Intn(256))}
	case 2: // long keys sharing a long prefix
		k := bytes.Repeat([]byte{0xab}, 200+r.Intn(3000))
		return append(k, byte(r.Intn(4)))
	case 3: // 8-byte boundary keys
		k := make([]byte, 7+r.Intn(3))
		for i := range k {
			k[i] = []byte{0x00, 0xff, 'a'}[r.Intn(3)]
		}
		return k
	default:
		k := make([]byte, 1+r.Intn(12))
		r.Read(k)
		return k
	}
}

func edgeValue(r *rand.Rand) []byte {
	switch r.Intn(5) {
	case 0:
		return []byte{}
	case 1:
		return []byte{byte(r.Intn(256))}
	case 2:
		return bytes.Repeat([]byte{0xcd}, 1+r.Intn(5000))
	default:
		v := make([]byte, 1+r.Intn(40))
		r.Read(v)
		return v
	}
}

func TestIAVLEdgeHashDifferential(t *testing.T) {
	for _, initial := range []int64{0, 1, 2, 7, 1000, 1 << 40} {
		for seed := int64(1); seed <= edgeSeeds(3); seed++ {
			t.Run(fmt.Sprintf("initial=%d/seed=%d", initial, seed), func(t *testing.T) {
				r := rand.New(rand.NewSource(seed*1000 + initial))
				p := newEdgePair(t, initial)
				for v := 0; v < 60; v++ {
					nops := r.Intn(60)
					if v%13 == 5 {
						nops = 0 // empty version
					}
					for i := 0; i < nops; i++ {
						if len(p.present) > 0 && r.Intn(3) == 0 {
							ks := p.sortedKeys()
							p.remove(ks[r.Intn(len(ks))])
						} else if r.Intn(10) == 0 {
							p.remove(edgeKey(r)) // mostly absent
						} else {
							p.set(edgeKey(r), edgeValue(r))
						}
					}
					if v%17 == 9 {
						// delete down to the empty tree
						for _, k := range p.sortedKeys() {
							p.remove(k)
						}
					}
					p.save()
					if v%9 == 4 {
						p.reopen()
					}
				}
			})
		}
	}
}

// edgeVerifyProofs generates existence and non-existence proofs from ours
// and iavl for the given keys and verifies both against the root.
func (p *edgePair) verifyProofs(keys [][]byte) {
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
	for _, key := range keys {
		value, present := p.present[string(key)]
		if present {
			ours, err := tree.GetMembershipProof(key)
			if err != nil {
				t.Fatalf("membership proof %X: %v", key, err)
			}
			want, err := imm.GetMembershipProof(key)
			if err != nil {
				t.Fatalf("iavl membership proof %X: %v", key, err)
			}
			okOurs := ics23.VerifyMembership(ics23.IavlSpec, root, ours, key, value)
			okRef := ics23.VerifyMembership(ics23.IavlSpec, root, want, key, value)
			if okOurs != okRef || okOurs != (len(value) > 0 && len(key) > 0) {
				t.Fatalf("existence proof of %X (value len %d): ours verifies %v, iavl's %v", key, len(value), okOurs, okRef)
			}
			a, _ := ours.Marshal()
			b, _ := want.Marshal()
			if !bytes.Equal(a, b) {
				t.Fatalf("existence proof of %X differs:\n%X\n%X", key, a, b)
			}
			continue
		}
		ours, err := tree.GetNonMembershipProof(key)
		if err != nil {
			t.Fatalf("non-membership proof %X: %v", key, err)
		}
		want, err := imm.GetNonMembershipProof(key)
		if err != nil {
			t.Fatalf("iavl non-membership proof %X: %v", key, err)
		}
		okOurs := ics23.VerifyNonMembership(ics23.IavlSpec, root, ours, key)
		okRef := ics23.VerifyNonMembership(ics23.IavlSpec, root, want, key)
		ne := ours.GetNonexist()
		verifiable := (ne.Left != nil || ne.Right != nil) &&
			(ne.Left == nil || len(ne.Left.Value) > 0 && len(ne.Left.Key) > 0) &&
			(ne.Right == nil || len(ne.Right.Value) > 0 && len(ne.Right.Key) > 0)
		if okOurs != okRef || okOurs != verifiable {
			t.Fatalf("non-existence proof of %X: ours verifies %v, iavl's %v, expected %v", key, okOurs, okRef, verifiable)
		}
		// check the neighbours are the real ones
		ks := p.sortedKeys()
		i := sort.Search(len(ks), func(i int) bool { return bytes.Compare(ks[i], key) >= 0 })
		var wantL, wantR []byte
		if i > 0 {
			wantL = ks[i-1]
		}
		if i < len(ks) {
			wantR = ks[i]
		}
		if (ne.Left == nil) != (wantL == nil) || (ne.Left != nil && !bytes.Equal(ne.Left.Key, wantL)) {
			t.Fatalf("non-existence proof of %X: left neighbour %v, want %X", key, ne.Left, wantL)
		}
		if (ne.Right == nil) != (wantR == nil) || (ne.Right != nil && !bytes.Equal(ne.Right.Key, wantR)) {
			t.Fatalf("non-existence proof of %X: right neighbour %v, want %X", key, ne.Right, wantR)
		}
		a, _ := ours.Marshal()
		b, _ := want.Marshal()
		if !bytes.Equal(a, b) {
			t.Fatalf("non-existence proof of %X differs:\n%X\n%X", key, a, b)
		}
	}
}

func (p *edgePair) probeKeys(r *rand.Rand) [][]byte {
	ks := p.sortedKeys()
	var probes [][]byte
	probes = append(probes, []byte{}, []byte{0}, []byte{0, 0}, []byte{0xff}, bytes.Repeat([]byte{0xff}, 100))
	for _, k := range ks {
		probes = append(probes, k)
		probes = append(probes, append(bytes.Clone(k), 0))
		probes = append(probes, append(bytes.Clone(k), 0xff))
		if len(k) > 0 {
			probes = append(probes, k[:len(k)-1])
		}
		if len(probes) > 400 {
			break
		}
	}
	for i := 0; i < 50; i++ {
		probes = append(probes, edgeKey(r))
	}
	// dedupe: the non-existence proof of the empty key on an empty key
	return probes
}

func TestIAVLEdgeProofsDifferential(t *testing.T) {
	for _, initial := range []int64{0, 5} {
		for seed := int64(1); seed <= edgeSeeds(3); seed++ {
			t.Run(fmt.Sprintf("initial=%d/seed=%d", initial, seed), func(t *testing.T) {
				r := rand.New(rand.NewSource(seed*77 + initial))
				p := newEdgePair(t, initial)
				p.save()
				p.verifyProofs(p.probeKeys(r)) // empty tree
				p.set([]byte("m"), []byte("v"))
				p.save()
				p.verifyProofs(p.probeKeys(r)) // one key
				p.set([]byte{}, []byte("empty key"))
				p.save()
				p.verifyProofs(p.probeKeys(r))
				for v := 0; v < 25; v++ {
					for i := 0; i < r.Intn(40); i++ {
						if len(p.present) > 0 && r.Intn(4) == 0 {
							ks := p.sortedKeys()
							p.remove(ks[r.Intn(len(ks))])
						} else {
							p.set(edgeKey(r), edgeValue(r))
						}
					}
					p.save()
					if v%5 == 2 {
						p.reopen()
					}
					p.verifyProofs(p.probeKeys(r))
				}
				for _, k := range p.sortedKeys() {
					p.remove(k)
				}
				p.save()
				p.verifyProofs(p.probeKeys(r))
			})
		}
	}
}

func TestIAVLEdgeExportImportRoundTrip(t *testing.T) {
	for _, initial := range []int64{0, 3, 1000} {
		for seed := int64(1); seed <= edgeSeeds(2); seed++ {
			t.Run(fmt.Sprintf("initial=%d/seed=%d", initial, seed), func(t *testing.T) {
				r := rand.New(rand.NewSource(seed*31 + initial))
				p := newEdgePair(t, initial)
				for v := 0; v < 20; v++ {
					for i := 0; i < r.Intn(50); i++ {
						if len(p.present) > 0 && r.Intn(4) == 0 {
							ks := p.sortedKeys()
							p.remove(ks[r.Intn(len(ks))])
						} else {
							p.set(edgeKey(r), edgeValue(r))
						}
					}
					if v == 7 {
						for _, k := range p.sortedKeys() {
							p.remove(k)
						}
					}
					p.save()
					if v == 11 {
						p.reopen()
					}
					ver := p.ours.Version()
					ours := exportAll(t, p.ours.Export())
					theirs := exportIAVL(t, p.ref, ver)
					if len(ours) != len(theirs) {
						t.Fatalf("v%d: %d nodes, iavl %d", ver, len(ours), len(theirs))
					}
					for i := range ours {
						a, b := ours[i], theirs[i]
						if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || a.Version != b.Version || a.Height != b.Height {
							t.Fatalf("v%d node %d: %+v, iavl %+v", ver, i, a, b)
						}
					}
					// ours -> iavl
					it := iavl.NewMutableTree(iavldb.NewMemDB(), 0, true, log.NewNopLogger())
					im, err := it.Import(ver)
					if err != nil {
						t.Fatal(err)
					}
					for i, n := range ours {
						if err := im.Add((*iavl.ExportNode)(n)); err != nil {
							t.Fatalf("v%d iavl import node %d: %v", ver, i, err)
						}
					}
					if err := im.Commit(); err != nil {
						t.Fatal(err)
					}
					im.Close()
					if !bytes.Equal(it.Hash(), p.ours.RootHash()) {
						t.Fatalf("v%d: iavl import hash %X, ours %X", ver, it.Hash(), p.ours.RootHash())
					}
					// iavl -> ours
					dir := filepath.Join(t.TempDir(), "imp")
					mi, err := memiavl.NewImporter(dir, ver)
					if err != nil {
						t.Fatal(err)
					}
					for i, n := range theirs {
						if err := mi.Add(n); err != nil {
							t.Fatalf("v%d import node %d: %v", ver, i, err)
						}
					}
					if err := mi.Commit(); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(mi.RootHash(), p.ref.Hash()) {
						t.Fatalf("v%d: import hash %X, iavl %X", ver, mi.RootHash(), p.ref.Hash())
					}
					s, tr := openSnapshot(t, dir)
					if !bytes.Equal(tr.RootHash(), p.ref.Hash()) || tr.Version() != ver {
						t.Fatalf("v%d: imported tree hash %X v%d", ver, tr.RootHash(), tr.Version())
					}
					for k, v := range p.present {
						got, err := tr.Get([]byte(k))
						if err != nil || !bytes.Equal(got, v) || got == nil {
							t.Fatalf("imported Get(%X) = %X, %v; want %X", k, got, err, v)
						}
					}
					// continue both after the import
					ref2 := it
					tr.Set([]byte("zz-after"), []byte("x"))
					ref2.Set([]byte("zz-after"), []byte("x"))
					h1, v1, err := tr.SaveVersion()
					if err != nil {
						t.Fatal(err)
					}
					h2, v2, err := ref2.SaveVersion()
					if err != nil {
						t.Fatal(err)
					}
					if v1 != v2 || !bytes.Equal(h1, h2) {
						t.Fatalf("after import: v%d %X, iavl v%d %X", v1, h1, v2, h2)
					}
					s.Close()
				}
			})
		}
	}
}

// TestIAVLEdgeTrees: empty tree snapshots, deferred hashing and exclusive
// mutation against iavl.
func TestIAVLEdgeTrees(t *testing.T) {
	for _, initial := range []int64{0, 9} {
		t.Run(fmt.Sprint(initial), func(t *testing.T) {
			p := newEdgePair(t, initial)
			p.save()
			p.reopen() // empty tree snapshot
			p.save()
			p.set([]byte{0}, []byte{})
			p.set([]byte{}, []byte{})
			p.set([]byte{0xff}, []byte{0})
			p.save()
			p.reopen()
			p.remove([]byte{})
			p.save()
			p.remove([]byte{0})
			p.remove([]byte{0xff})
			p.save()
			p.reopen()
			p.save()
			p.set([]byte("a"), []byte("b"))
			p.save()
		})
	}
	t.Run("defer-exclusive", func(t *testing.T) {
		r := rand.New(rand.NewSource(5))
		p := newEdgePair(t, 3)
		for v := 0; v < 80; v++ {
			p.ours.SetExclusive(p.ours.Version())
			for i := 0; i < r.Intn(40); i++ {
				if len(p.present) > 0 && r.Intn(3) == 0 {
					ks := p.sortedKeys()
					p.remove(ks[r.Intn(len(ks))])
				} else {
					p.set(edgeKey(r), edgeValue(r))
				}
			}
			if v%4 != 3 {
				v1, err1 := p.ours.SaveVersionDeferHash()
				_, v2, err := p.ref.SaveVersion()
				if err1 != nil || err != nil || v1 != v2 {
					t.Fatalf("deferred save v%d %v, iavl v%d %v", v1, err1, v2, err)
				}
				continue
			}
			p.ours.ClearExclusive()
			p.save()
			if v%8 == 7 {
				p.reopen()
			}
		}
	})
}

// edgeSeeds is how many seeds a test of this file runs: n, one under
// -short.
func edgeSeeds(n int64) int64 {
	if testing.Short() {
		return 1
	}
	return n
}
