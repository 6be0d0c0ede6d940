package main

import (
	"bytes"
	"compress/zlib"
	"os"
	"path/filepath"
	"strings"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
)

// TestCLIImportBadStoreNameIsNotUsage: a stream file whose store item has a
// name the database cannot hold (empty, or 120 bytes or more) is a bad input
// file, not a bad command line: `import` fails with exit 1 like for every
// other bad stream (TestCLIImportBadStreams), not with a usage error.
func TestCLIImportBadStoreNameIsNotUsage(t *testing.T) {
	for name, store := range map[string]string{"empty": "", "long": strings.Repeat("n", 130)} {
		t.Run(name, func(t *testing.T) {
			var plain bytes.Buffer
			w := protoio.NewDelimitedWriter(&plain)
			for _, it := range []*snapshottypes.SnapshotItem{
				{Item: &snapshottypes.SnapshotItem_Store{Store: &snapshottypes.SnapshotStoreItem{Name: store}}},
				{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte("k"), Value: []byte("v"), Version: 1}}},
			} {
				if err := w.WriteMsg(it); err != nil {
					t.Fatal(err)
				}
			}
			var comp bytes.Buffer
			zw := zlib.NewWriter(&comp)
			zw.Write(plain.Bytes())
			zw.Close()
			f := filepath.Join(t.TempDir(), "s.bin")
			if err := os.WriteFile(f, comp.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "db")
			code, _, errs := cli(t, "import", "--height", "3", f, dst)
			if code != exitFailure || strings.Contains(errs, "--help") {
				t.Errorf("import of a stream with store name %q: exit %d (want %d, a failed import, not a usage error)\nstderr %q", store, code, exitFailure, errs)
			}
		})
	}
}
