package compat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefTreeMappedFault: a reference tree's kvs file cut short under its
// mapping (a failed disk read faults the same way) makes the node source's
// Next fail with ErrMigrate naming the file, where it handed out a value
// whose pages the importer then read outside any guard, ending the
// process.
func TestRefTreeMappedFault(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta := binary.LittleEndian.AppendUint32(nil, refSnapshotMagic)
	meta = binary.LittleEndian.AppendUint32(meta, refSnapshotFormat)
	write("metadata", binary.LittleEndian.AppendUint32(meta, 3))
	key, value := []byte("k"), bytes.Repeat([]byte("v"), 16<<10)
	kvs := binary.LittleEndian.AppendUint32(nil, uint32(len(key)))
	kvs = append(kvs, key...)
	kvs = binary.LittleEndian.AppendUint32(kvs, uint32(len(value)))
	write("kvs", append(kvs, value...))
	leaf := make([]byte, refRecordSize) // version 3, the key at offset 0
	binary.LittleEndian.PutUint32(leaf, 3)
	binary.LittleEndian.PutUint32(leaf[4:], uint32(len(key)))
	write("leaves", leaf)
	write("nodes", nil)
	tree, err := openRefTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.close()
	if err := os.Truncate(filepath.Join(dir, "kvs"), 4096); err != nil {
		t.Fatal(err)
	}
	n, err := (&refTreeSource{t: tree}).Next()
	if !errors.Is(err, ErrMigrate) || !strings.Contains(err.Error(), filepath.Join(dir, "kvs")) {
		t.Fatalf("Next: node %v, error %v; want ErrMigrate naming the kvs file", n != nil, err)
	}
	if _, err := tree.checkedRootHash(); err != nil {
		t.Fatalf("root hash (in the leaves file): %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, "leaves"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tree.checkedRootHash(); !errors.Is(err, ErrMigrate) || !strings.Contains(err.Error(), filepath.Join(dir, "leaves")) {
		t.Fatalf("root hash with the leaves cut: %v, want ErrMigrate naming the leaves file", err)
	}
}
