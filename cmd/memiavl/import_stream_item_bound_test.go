package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCLIImportItemOverSDKBound: an item longer than the SDK's bound for
// one snapshot item (64e6 bytes, which its snapshot stream reader refuses,
// so that no node restores the stream) is refused by import too, with an
// error that says so; one of exactly the bound is read. The item is an
// extension payload after the stores, which import otherwise reads and
// ignores.
func TestCLIImportItemOverSDKBound(t *testing.T) {
	items := tailStreamItems(t)
	ext := wasmExtension()
	for _, c := range []struct {
		name string
		size int // the payload item's encoded size
		ok   bool
	}{
		{"at the bound", 64e6, true},
		{"over the bound", 64e6 + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// an ExtensionPayload item is a field (1 byte tag, 4 byte
			// length) holding the payload message's field of the same
			// shape: 10 bytes of framing
			pay := extensionPayload(bytes.Repeat([]byte{'w'}, c.size-10))
			if n := pay.Size(); n != c.size {
				t.Fatalf("payload item of %d bytes, want %d", n, c.size)
			}
			f := filepath.Join(t.TempDir(), "s.bin")
			if err := os.WriteFile(f, tailEncode(t, append(append([]snapshottypes.SnapshotItem{}, items...), ext, pay)), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errs := cli(t, "import", "--height", "20", f, filepath.Join(t.TempDir(), "db"))
			switch {
			case c.ok && code != 0:
				t.Errorf("exit %d: %s", code, errs)
			case !c.ok && code == 0:
				t.Error("imported a stream whose item the SDK's reader refuses")
			case !c.ok && !strings.Contains(errs, "longer than 64000000 bytes"):
				t.Errorf("error does not name the bound: %s", errs)
			}
		})
	}
}

// TestCLIExportItemOverSDKBound: export refuses a tree whose node would
// be an item longer than the SDK's bound for one snapshot item (a value of
// 64e6 bytes), since no node (nor import) restores such a stream, and
// writes no file; a value that fits is exported and imported back.
func TestCLIExportItemOverSDKBound(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		ok   bool
	}{
		{"under the bound", 1 << 20, true},
		{"over the bound", 64e6, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := makeEmptyDB(t)
			commitBankPairs(t, dir,
				wal.KVPair{Key: []byte("big"), Value: bytes.Repeat([]byte{'v'}, c.size)},
				wal.KVPair{Key: []byte("small"), Value: []byte("v")})
			f := filepath.Join(t.TempDir(), "s.bin")
			code, _, errs := cli(t, "export", dir, f)
			_, serr := os.Stat(f)
			switch {
			case c.ok && code != exitOK:
				t.Fatalf("exit %d: %s", code, errs)
			case c.ok:
				mustCLI(t, "import", "--height", "1", f, filepath.Join(t.TempDir(), "db"))
			case code != exitFailure || !strings.Contains(errs, "the item of key 626967 is") || !strings.Contains(errs, "the SDK's bound"):
				t.Errorf("exit %d (want %d), stderr: %s", code, exitFailure, errs)
			case serr == nil:
				t.Error("the refused export left its file")
			}
		})
	}
}
