package memiavl_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cosmos/iavl"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// fuzzStream builds a valid export stream from the first bytes of data
// (a few versions of sets and removes of short keys) and then damages it
// with the rest: each 3-byte group picks a node, an operation and an
// operand.
func fuzzStream(t *testing.T, data []byte) (nodes []*memiavl.ExportNode, version int64) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if len(data) > 0 {
		n, data = int(data[0]%64), data[1:]
	}
	for i := 0; i < n && len(data) >= 2; i++ {
		op, k := data[0], data[1]
		data = data[2:]
		key := []byte{k % 32}
		if k&0x80 != 0 {
			key = append(key, k%5) // keys that are prefixes of others
		}
		if op%4 == 0 {
			if _, err := tr.Remove(key); err != nil {
				t.Fatal(err)
			}
		} else if _, err := tr.Set(key, []byte{op}); err != nil {
			t.Fatal(err)
		}
		if op%3 == 0 {
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	version = tr.Version()
	nodes = exportAll(t, tr.Export())
	for len(data) >= 3 && len(nodes) > 0 {
		i, op, x := int(data[0])%len(nodes), data[1], data[2]
		data = data[3:]
		c := *nodes[i]
		c.Key = bytes.Clone(c.Key)
		c.Value = bytes.Clone(c.Value)
		switch op % 8 {
		case 0:
			c.Height = int8(x % 8)
		case 1:
			c.Version = int64(x % 8)
		case 2:
			if len(c.Key) > 0 {
				c.Key[int(x)%len(c.Key)] ^= 1 << (x % 8)
			} else {
				c.Key = []byte{x}
			}
		case 3:
			c.Key = append(c.Key, x)
		case 4:
			if len(c.Key) > 0 {
				c.Key = c.Key[:len(c.Key)-1]
			}
		case 5: // drop the node
			nodes = append(nodes[:i:i], nodes[i+1:]...)
			continue
		case 6: // swap with another
			j := int(x) % len(nodes)
			nodes[i], nodes[j] = nodes[j], nodes[i]
			continue
		case 7: // duplicate
			nodes = append(nodes[:i+1:i+1], nodes[i:]...)
			continue
		}
		nodes[i] = &c
	}
	return nodes, version
}

// FuzzImportDifferential: a damaged export stream that the importer
// accepts must be exactly the export of the tree it builds (the importer
// recomputes every hash, so a field it does not check would be silently
// replaced), and cosmos/iavl must import it to the same root hash.
func FuzzImportDifferential(f *testing.F) {
	f.Add([]byte{10, 1, 1, 1, 2, 1, 3, 3, 4, 1, 5, 1, 6, 3, 7, 1, 8, 1, 9, 1, 10})
	f.Add([]byte{20, 1, 1, 1, 2, 1, 3, 3, 4, 1, 5, 1, 6, 3, 7, 1, 8, 1, 9, 1, 10, 4, 1, 2, 5, 1, 2, 3, 0, 5})
	f.Add([]byte{30, 1, 1, 1, 0x82, 1, 3, 3, 0x84, 1, 5, 1, 6, 3, 7, 1, 8, 1, 9, 1, 10, 2, 3, 1, 4, 5, 2, 7, 1, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, version := fuzzStream(t, data)
		dir := filepath.Join(t.TempDir(), "t")
		im, err := memiavl.NewImporter(dir, version)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		for _, n := range nodes {
			if err = im.Add(n); err != nil {
				break
			}
		}
		if err == nil {
			err = im.Commit()
		}
		if err != nil {
			if !errors.Is(err, memiavl.ErrImport) {
				t.Fatalf("refused with an error that is not ErrImport: %v", err)
			}
			return
		}
		tr := importTree(t, filepath.Join(t.TempDir(), "again"), version, nodes)
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
		sameNodes(t, exportAll(t, tr.Export()), nodes)
		ref := newIAVL(t, 0)
		rim, err := ref.Import(version)
		if err != nil {
			t.Fatal(err)
		}
		defer rim.Close()
		for i, n := range nodes {
			if err := rim.Add((*iavl.ExportNode)(n)); err != nil {
				t.Fatalf("memiavl accepted the stream, iavl refuses node %d: %v", i, err)
			}
		}
		if err := rim.Commit(); err != nil {
			t.Fatalf("memiavl accepted the stream, iavl's Commit refuses it: %v", err)
		}
		if !bytes.Equal(ref.Hash(), im.RootHash()) {
			t.Fatalf("root hash %X, iavl %X", im.RootHash(), ref.Hash())
		}
	})
}
