package compat_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	storetypes "cosmossdk.io/store/types"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// boundedMemRefDir writes a reference memiavl (v0.1.0 layout) directory at
// version v holding n empty stores: per store a 12-byte metadata file and
// three empty data files, and a __metadata listing them. It returns the
// number of bytes of file content written.
func boundedMemRefDir(t *testing.T, ref string, v int64, n int) int {
	t.Helper()
	snap := fmt.Sprintf("snapshot-%020d", v)
	sdir := filepath.Join(ref, snap)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	empty := sha256.Sum256(nil)
	info := storetypes.CommitInfo{Version: v}
	total := 0
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%04d", i)
		info.StoreInfos = append(info.StoreInfos, storetypes.StoreInfo{
			Name: name, CommitId: storetypes.CommitID{Version: v, Hash: empty[:]},
		})
		tdir := filepath.Join(sdir, name)
		if err := os.Mkdir(tdir, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := make([]byte, 12)
		binary.LittleEndian.PutUint32(meta, 0x4C564149)
		binary.LittleEndian.PutUint32(meta[8:], uint32(v))
		total += len(meta)
		if err := os.WriteFile(filepath.Join(tdir, "metadata"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"nodes", "leaves", "kvs"} {
			if err := os.WriteFile(filepath.Join(tdir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ci, err := info.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	md := protowire.AppendTag(nil, 1, protowire.BytesType)
	md = protowire.AppendBytes(md, ci)
	total += len(md)
	if err := os.WriteFile(filepath.Join(sdir, "__metadata"), md, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(snap, filepath.Join(ref, "current")); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestBoundedMemImportMemIAVLManyStores: a reference memiavl directory of
// ~100 empty stores (a few KiB of file content) must import with memory
// bounded by the stores imported at once, not by the number of stores: a
// finished store's importer is kept until the database's Commit, but not
// its snapshot writer's ~850 KiB of write buffers.
func TestBoundedMemImportMemIAVLManyStores(t *testing.T) {
	const stores, v = 96, 3
	top := testutil.ShmTempDir(t)
	ref := filepath.Join(top, "ref")
	size := boundedMemRefDir(t, ref, v, stores)
	dir := filepath.Join(top, "db")
	// collect garbage early, so that the peak is what the import holds
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	base := testutil.LiveHeap()
	stop := testutil.PeakHeap()
	start := time.Now()
	err := compat.ImportMemIAVL(ref, dir, multitree.Options{RewriteConcurrency: 1})
	peak := stop()
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("reference of %d stores (%d bytes of file content): peak heap growth %.1f MiB, in %v",
		stores, size, float64(grew)/(1<<20), time.Since(start))
	if limit := int64(32 << 20); grew > limit {
		t.Fatalf("importing %d empty stores (%d bytes of file content) grew the heap by %.1f MiB (limit %.0f MiB)",
			stores, size, float64(grew)/(1<<20), float64(limit)/(1<<20))
	}
}
