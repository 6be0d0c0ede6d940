package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// stoppingReader reads items from a stream until it has read left of them,
// then fails with context.Canceled, as the snapshot manager's reader does
// when its context ends.
type stoppingReader struct {
	inner protoio.Reader
	left  int
}

func (c *stoppingReader) ReadMsg(m proto.Message) error {
	if c.left == 0 {
		return fmt.Errorf("reading chunk: %w", context.Canceled)
	}
	c.left--
	return c.inner.ReadMsg(m)
}

func (c *stoppingReader) Close() error { return nil }

// TestEdgeRestoreStoppedByContext: a multistore restore whose reader stops
// with its context fails with the context's error (not ErrSnapshotStream),
// leaves the multistore at version 0 and usable, nothing beside its
// directory, and the same stream then restores to the source's app hash.
func TestEdgeRestoreStoppedByContext(t *testing.T) {
	r := testutil.Rand(t)
	src, hashes := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 8, 10))
	defer src.Close()
	stream := ssStream(t, src, 8)
	items := ssItems(t, stream)
	keys := keyring{}
	m := mount{iavl: ssStores}
	dir := filepath.Join(t.TempDir(), "db")
	ours := newOurs(t, dir, testConfig(), keys, m, nil)
	defer ours.Close()
	for _, at := range []int{0, 1, len(items) / 2, len(items) - 1} {
		_, err := ours.Restore(8, snapshottypes.CurrentFormat, &stoppingReader{inner: ssReader(stream), left: at})
		if !errors.Is(err, context.Canceled) || errors.Is(err, compat.ErrSnapshotStream) {
			t.Fatalf("restore stopped at item %d: %v", at, err)
		}
		if cid := ours.LastCommitID(); cid.Version != 0 {
			t.Fatalf("restore stopped at item %d left version %d", at, cid.Version)
		}
		for _, beside := range []string{".import.tmp", ".replaced.tmp"} {
			if _, err := os.Lstat(dir + beside); err == nil {
				t.Fatalf("restore stopped at item %d left %s", at, dir+beside)
			}
		}
	}
	if _, err := ours.Restore(8, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatal(err)
	}
	if cid := ours.LastCommitID(); cid.Version != 8 || !bytes.Equal(cid.Hash, hashes[8]) {
		t.Fatalf("restored version %d hash %X, want %X", cid.Version, cid.Hash, hashes[8])
	}
	if v, err := multitree.LatestVersion(dir); err != nil || v != 8 {
		t.Fatalf("LatestVersion %d %v", v, err)
	}
}
