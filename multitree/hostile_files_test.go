package multitree

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// Hostile files whose checksums are valid: a helper rewrites a store's
// snapshot after an edit, recomputing every node hash, the snapshot's
// meta (root hash, data files' lengths and CRC32Cs, its own CRC) and the
// database metadata's root hash for the store, so that only a check of
// the content can tell.

var hostileCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// hostileRehashTree recomputes every hash of the snapshot in tdir from its
// records and fixes its meta; it returns the root hash.
func hostileRehashTree(t *testing.T, tdir string) []byte {
	t.Helper()
	rd := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(tdir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return b
	}
	meta, leaves, branches, kvs := rd(snapshot.FileMeta), rd(snapshot.FileLeaves), rd(snapshot.FileBranches), rd(snapshot.FileKVs)
	nl, nb := uint64(len(leaves)/64), uint64(len(branches)/64)
	for i := uint64(0); i < nl; i++ {
		rec := leaves[i*64 : i*64+64]
		v := int64(binary.LittleEndian.Uint64(rec[32:]))
		off := binary.LittleEndian.Uint64(rec[40:])
		kl := uint64(binary.LittleEndian.Uint32(rec[48:]))
		vl := uint64(binary.LittleEndian.Uint32(rec[52:]))
		h := nodehash.Leaf(nil, kvs[off:off+kl], kvs[off+kl:off+kl+vl], v)
		copy(rec, h)
	}
	u40 := func(b []byte) uint64 { return binary.LittleEndian.Uint64(b) & (1<<40 - 1) }
	for i := uint64(0); i < nb; i++ {
		rec := branches[i*64 : i*64+64]
		v := int64(binary.LittleEndian.Uint64(rec[32:]))
		size, f, k := u40(rec[40:]), u40(rec[45:]), u40(rec[50:])
		e := f + size
		var lh, rh []byte
		if e-k == 1 {
			rh = leaves[k*64 : k*64+32]
		} else {
			rh = branches[(i-1)*64 : (i-1)*64+32]
		}
		if k-f == 1 {
			lh = leaves[f*64 : f*64+32]
		} else {
			j := i - (e - k)
			lh = branches[j*64 : j*64+32]
		}
		copy(rec, nodehash.Inner(nil, rec[55], int64(size), v, lh, rh))
	}
	root := nodehash.Empty()
	switch {
	case nb > 0:
		root = bytes.Clone(branches[(nb-1)*64 : (nb-1)*64+32])
	case nl == 1:
		root = bytes.Clone(leaves[:32])
	}
	copy(meta[40:72], root)
	wr := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(tdir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wr(snapshot.FileLeaves, leaves)
	wr(snapshot.FileBranches, branches)
	hostileFixMeta(t, tdir, meta)
	return root
}

// hostileFixMeta records the data files' lengths and checksums in meta (its
// bytes given) and rewrites it with its own checksum.
func hostileFixMeta(t *testing.T, tdir string, meta []byte) {
	t.Helper()
	for i, name := range []string{snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileKVs, snapshot.FileIndex, snapshot.FileLookup} {
		b, err := os.ReadFile(filepath.Join(tdir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		off := 72 + i*16
		binary.LittleEndian.PutUint64(meta[off:], uint64(len(b)))
		binary.LittleEndian.PutUint32(meta[off+8:], crc32.Checksum(b, hostileCastagnoli))
	}
	binary.LittleEndian.PutUint32(meta[188:], crc32.Checksum(meta[:188], hostileCastagnoli))
	if err := os.WriteFile(filepath.Join(tdir, snapshot.FileMeta), meta, 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostileEditMetadata decodes the metadata of the snapshot directory sdir,
// lets edit change it, and writes it back encoded (with its checksum).
func hostileEditMetadata(t *testing.T, sdir string, edit func(m *metadata)) {
	t.Helper()
	p := filepath.Join(sdir, metadataFileName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMetadata(p, b)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	if err := os.WriteFile(p, m.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostileEditStore edits the records of store's snapshot in sdir, rehashes it
// and records its new root hash in the metadata.
func hostileEditStore(t *testing.T, sdir, store string, edit func(leaves, branches []byte)) {
	t.Helper()
	tdir := filepath.Join(sdir, treeDirName(store))
	hostileEditRecords(t, tdir, edit)
	root := hostileRehashTree(t, tdir)
	hostileEditMetadata(t, sdir, func(m *metadata) {
		for i := range m.Stores {
			if m.Stores[i].Name == store {
				m.Stores[i].Hash = root
			}
		}
	})
}

// hostileEditRecords lets edit change the leaf and branch records of the
// snapshot in tdir, and writes them back.
func hostileEditRecords(t *testing.T, tdir string, edit func(leaves, branches []byte)) {
	t.Helper()
	lp, bp := filepath.Join(tdir, snapshot.FileLeaves), filepath.Join(tdir, snapshot.FileBranches)
	leaves, err := os.ReadFile(lp)
	if err != nil {
		t.Fatal(err)
	}
	branches, err := os.ReadFile(bp)
	if err != nil {
		t.Fatal(err)
	}
	edit(leaves, branches)
	for p, b := range map[string][]byte{lp: leaves, bp: branches} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostileDB makes a database with stores a and b, versions 1..6 (each sets
// keys of both), snapshots at 2, 4 and 6 (all kept), and returns its
// directory and the app hash of each version.
func hostileDB(t *testing.T) (string, map[int64][]byte) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for v := int64(1); v <= 6; v++ {
		for i := 0; i < 40; i++ {
			for _, s := range []string{"a", "b"} {
				if err := db.Set(s, []byte(fmt.Sprintf("k%03d", (int(v)*7+i)%60)), []byte(fmt.Sprintf("v%d-%d", v, i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		ci, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[v] = ci.Hash()
		if v%2 == 0 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, hashes
}

// hostileEditRaw edits the records of the snapshot in tdir and fixes its
// meta's lengths and checksums, without rehashing.
func hostileEditRaw(t *testing.T, tdir string, edit func(leaves, branches []byte)) {
	t.Helper()
	hostileEditRecords(t, tdir, edit)
	meta, err := os.ReadFile(filepath.Join(tdir, snapshot.FileMeta))
	if err != nil {
		t.Fatal(err)
	}
	hostileFixMeta(t, tdir, meta)
}

// TestHostileEmptyStoreName: a snapshot's metadata (valid checksum)
// naming a store "" (a name no database can create: validateStoreName) is
// refused as corruption by Verify and Open, before a Commit could log a
// version whose commit info the SDK's CommitInfo.Hash panics on ("key is
// nil").
func TestHostileEmptyStoreName(t *testing.T) {
	dir, _ := hostileDB(t)
	sdir := filepath.Join(dir, snapshotDirName(6))
	if err := os.Rename(filepath.Join(sdir, treeDirName("a")), filepath.Join(sdir, treeDirName(""))); err != nil {
		t.Fatal(err)
	}
	hostileEditMetadata(t, sdir, func(m *metadata) { m.Stores[0].Name = "" })

	noPanic := func(what string, f func() error) error {
		t.Helper()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", what, p)
				}
			}()
			err = f()
		}()
		return err
	}
	err := noPanic("Verify", func() error { _, err := Verify(dir); return err })
	if !t.Failed() && !errors.Is(err, ErrCorrupt) {
		t.Errorf("Verify: %v, want ErrCorrupt", err)
	}
	err = noPanic("Open and Commit", func() error {
		db, err := Open(dir, Options{SnapshotInterval: -1, OpenCheck: OpenCheckSync})
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Set("b", []byte("x"), []byte("y")); err != nil {
			return err
		}
		ci, err := db.Commit()
		if err != nil {
			return err
		}
		_ = ci.Hash()
		return nil
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open: %v, want ErrCorrupt (a metadata store name must be 1 to %d bytes)", err, maxStoreName-1)
	}
}

// TestHostileBranchHeightZero: a snapshot (checksums valid, so
// OpenCheckSync passes) whose branch records have height 0. An update of
// an existing key copies the branches on its path with their recorded
// height (persisted.mutableBranch), and an update does not recompute it,
// so a copy of height 0 would be taken for a leaf (the Commit's hashing
// would read its value from a nil pointer). The copy refuses such a
// branch: the Commit fails with ErrCorrupt.
func TestHostileBranchHeightZero(t *testing.T) {
	dir, _ := hostileDB(t)
	hostileEditRaw(t, filepath.Join(dir, snapshotDirName(6), treeDirName("a")), func(l, b []byte) {
		for i := 0; i < len(b)/64; i++ {
			b[i*64+55] = 0
		}
	})
	db, err := Open(dir, Options{SnapshotInterval: -1, OpenCheck: OpenCheckSync})
	if err != nil {
		t.Fatal(err) // the checksums are valid
	}
	defer db.Close()
	err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		if err := db.Set("a", []byte("k010"), []byte("new")); err != nil {
			return err
		}
		_, err = db.Commit()
		return err
	}()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("update of a key over branches of height 0, then Commit: %v, want ErrCorrupt", err)
	}
}

// TestVerifyOlderSnapshotVersions: an older kept snapshot holds node
// versions that Tree.Check and the Importer refuse (a leaf of version 0,
// children newer than their parent), with hashes, meta and metadata all
// recomputed: only the versions are wrong. ViewAt of its version gives a
// tree whose Check fails, and Verify reports ErrCorrupt (snapshot.Verify
// checks the versions; rolled forward to the next snapshot, its trees also
// differ from those recorded).
func TestVerifyOlderSnapshotVersions(t *testing.T) {
	for name, edit := range map[string]func(leaves, branches []byte){
		"leaf version 0": func(leaves, branches []byte) { binary.LittleEndian.PutUint64(leaves[32:], 0) },
		"children newer than parents": func(leaves, branches []byte) {
			for i := 0; i < len(branches)/64; i++ {
				binary.LittleEndian.PutUint64(branches[i*64+32:], 1)
			}
			for i := 0; i < len(leaves)/64; i++ {
				binary.LittleEndian.PutUint64(leaves[i*64+32:], 2)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := hostileDB(t)
			hostileEditStore(t, filepath.Join(dir, snapshotDirName(2)), "a", edit)
			_, verr := Verify(dir)
			db, err := Open(dir, Options{SnapshotInterval: -1, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			view, err := db.ViewAt(2)
			if err != nil {
				t.Fatal(err)
			}
			cerr := view.Tree("a").Check()
			view.Release()
			if cerr == nil {
				t.Fatal("the edit did not make the tree fail Check")
			}
			if !errors.Is(verr, ErrCorrupt) {
				t.Fatalf("Verify: %v, want ErrCorrupt: ViewAt(2)'s tree fails Check: %v", verr, cerr)
			}
		})
	}
}

// TestVerifyOlderSnapshotDropsStore: the metadata of an older kept
// snapshot (valid checksum) no longer lists store b. The snapshot is sound
// by itself, but ViewAt(2) serves an app hash that is not the one
// committed at version 2: Verify, which rolls each kept snapshot forward
// through the log to the next one and compares the stores and root hashes
// with those it records, reports ErrCorrupt.
func TestVerifyOlderSnapshotDropsStore(t *testing.T) {
	dir, hashes := hostileDB(t)
	hostileEditMetadata(t, filepath.Join(dir, snapshotDirName(2)), func(m *metadata) { m.Stores = m.Stores[:1] })
	_, verr := Verify(dir)
	db, err := Open(dir, Options{SnapshotInterval: -1, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	view, err := db.ViewAt(2)
	if err != nil {
		t.Fatal(err)
	}
	got := view.CommitInfo().Hash()
	view.Release()
	if bytes.Equal(got, hashes[2]) {
		t.Fatal("the edit did not change ViewAt(2)'s app hash")
	}
	if !errors.Is(verr, ErrCorrupt) {
		t.Fatalf("Verify: %v, want ErrCorrupt: ViewAt(2) serves app hash %X, version 2 committed %X", verr, got, hashes[2])
	}
}
