package testutil

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// SnapshotToFormat1 rewrites the snapshot of one tree in dir, of format
// version 2, as format version 1 (snapshot/format.go): the kvs file without
// its entry headers (the leaves' offsets moved), no lookup file, and meta's
// format version, file lengths and checksums to match. It is what a build
// before format 2 wrote for the same tree.
func SnapshotToFormat1(t testing.TB, dir string) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	meta, leaves, kvs := read("meta"), read("leaves"), read("kvs")
	// meta: format version at 8, the data files' (length, CRC32C) entries
	// of 16 bytes from 72 (leaves, branches, kvs, index, lookup), its own
	// CRC32C at 188; leaf records of 64 bytes: kvs offset of the key at
	// 40, key and value lengths at 48 and 52
	if len(meta) != 192 || binary.LittleEndian.Uint32(meta[8:]) != 2 {
		t.Fatalf("%s: not a snapshot of format version 2", dir)
	}
	var out []byte
	for i := 0; i+64 <= len(leaves); i += 64 {
		rec := leaves[i : i+64]
		off := binary.LittleEndian.Uint64(rec[40:])
		kl, vl := binary.LittleEndian.Uint32(rec[48:]), binary.LittleEndian.Uint32(rec[52:])
		binary.LittleEndian.PutUint64(rec[40:], uint64(len(out)))
		out = append(out, kvs[off:off+uint64(kl)+uint64(vl)]...)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	binary.LittleEndian.PutUint32(meta[8:], 1)
	entry := func(i int, b []byte) {
		o := 72 + i*16
		binary.LittleEndian.PutUint64(meta[o:], uint64(len(b)))
		c := uint32(0)
		if len(b) > 0 {
			c = crc32.Checksum(b, table)
		}
		binary.LittleEndian.PutUint32(meta[o+8:], c)
	}
	entry(0, leaves)
	entry(2, out)
	entry(4, nil)
	binary.LittleEndian.PutUint32(meta[188:], crc32.Checksum(meta[:188], table))
	for name, b := range map[string][]byte{"meta": meta, "leaves": leaves, "kvs": out} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "lookup")); err != nil {
		t.Fatal(err)
	}
}

// SnapshotsToFormat1 rewrites every tree of every snapshot directory of the
// database in dir as SnapshotToFormat1 does.
func SnapshotsToFormat1(t testing.TB, dir string) {
	t.Helper()
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		trees, err := filepath.Glob(filepath.Join(s, "[sx]-*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trees {
			SnapshotToFormat1(t, tr)
		}
	}
}
