package memiavl_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestRebaseZeroCopyBytes (passes): later leaves set with keys
// and values that are slices of the old snapshot's map (iterator keys,
// GetZeroCopy values) are copied by Rebase, so the rebased tree reads right
// after the old snapshot is unmapped; its filter of changed keys is
// adopted and agrees with a plain in-memory model.
func TestRebaseZeroCopyBytes(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewSource(7))
	model := map[string]string{}
	tr, _ := memiavl.New(memiavl.Options{})
	for i := 0; i < 500; i++ {
		k, v := fmt.Sprintf("k%04d", i), fmt.Sprintf("v%d", i)
		tr.Set([]byte(k), []byte(v))
		model[k] = v
	}
	tr.SaveVersion()
	dir := t.TempDir()
	// the tree reads from snapshot 0
	if err := tr.WriteSnapshot(ctx, filepath.Join(dir, "0")); err != nil {
		t.Fatal(err)
	}
	s0, cur := openSnapshot(t, filepath.Join(dir, "0"))
	if !cur.StartNextTouches() {
		t.Fatal("StartNextTouches refused")
	}
	written := cur.Copy()
	m, err := written.WriteSnapshotMapped(ctx, filepath.Join(dir, "1"))
	if err != nil {
		t.Fatal(err)
	}
	// later versions on snapshot 0, with its bytes as keys and values
	for v := 0; v < 3; v++ {
		it := cur.Copy().Iterator(nil, nil, r.Intn(2) == 0)
		var ks [][]byte
		for ; it.Valid(); it.Next() {
			ks = append(ks, it.Key())
		}
		it.Close()
		for j := 0; j < 60; j++ {
			k := ks[r.Intn(len(ks))]
			src := ks[r.Intn(len(ks))]
			val, err := cur.GetZeroCopy(src)
			if err != nil {
				t.Fatal(err)
			}
			switch r.Intn(4) {
			case 0:
				cur.Remove(k)
				delete(model, string(k))
			case 1: // a new key: a snapshot key with a suffix... made of snapshot bytes
				nk := k[:len(k)-1] // a prefix of a snapshot key, in the map
				if val == nil {
					continue
				}
				cur.Set(nk, val)
				model[string(nk)] = string(val)
			default:
				if val == nil {
					continue
				}
				cur.Set(k, val)
				model[string(k)] = string(val)
			}
		}
		cur.SaveVersion()
	}
	s1, base := openSnapshot(t, filepath.Join(dir, "1"))
	defer s1.Close()
	rb, err := memiavl.NewRebaser(base, m)
	if err != nil {
		t.Fatal(err)
	}
	nt, err := rb.Rebase(ctx, cur.Copy())
	if err != nil {
		t.Fatal(err)
	}
	want := cur.RootHash()
	s0.Close() // the old snapshot is unmapped
	if !bytes.Equal(nt.RootHash(), want) {
		t.Fatalf("rebased hash %X, want %X", nt.RootHash(), want)
	}
	if err := nt.Check(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for it := nt.Iterator(nil, nil, true); it.Valid(); it.Next() {
		if model[string(it.Key())] != string(it.Value()) {
			t.Fatalf("%q = %q, model %q", it.Key(), it.Value(), model[string(it.Key())])
		}
		n++
	}
	if n != len(model) {
		t.Fatalf("%d pairs, model %d", n, len(model))
	}
	for i := 0; i < 600; i++ {
		k := fmt.Sprintf("k%04d", i)
		for _, key := range []string{k, k[:len(k)-1]} {
			got, err := nt.Get([]byte(key))
			w, ok := model[key]
			if err != nil || (got != nil) != ok || string(got) != w {
				t.Fatalf("Get(%q) = %q, %v; model %q %v", key, got, err, w, ok)
			}
		}
	}
}
