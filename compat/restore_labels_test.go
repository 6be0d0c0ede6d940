package compat_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestRestoreMutatedStreamLabelled restores streams with items dropped,
// repeated, swapped or cut off, nodes with other heights, versions, keys or
// no value, and stores with other names: every refusal wraps
// ErrSnapshotStream (a full disk does not: TestImportFullDisk in
// cmd/memiavl) and leaves no database behind.
func TestRestoreMutatedStreamLabelled(t *testing.T) {
	r := testutil.Rand(t)
	src, _ := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 6, 10))
	defer src.Close()
	items := ssItems(t, ssStream(t, src, 6))
	trials := testutil.Size(false, 1000, 300, 60)
	refused := 0
	for trial := 0; trial < trials; trial++ {
		cp := make([]*snapshottypes.SnapshotItem, 0, len(items))
		for _, it := range items {
			cp = append(cp, proto.Clone(it).(*snapshottypes.SnapshotItem))
		}
		for m := 0; m < 1+r.Intn(3); m++ {
			if len(cp) == 0 {
				break
			}
			i := r.Intn(len(cp))
			switch r.Intn(9) {
			case 0:
				cp = append(cp[:i], cp[i+1:]...)
			case 1:
				cp = append(cp[:i+1], cp[i:]...)
			case 2:
				if n := cp[i].GetIAVL(); n != nil {
					n.Height = int32(r.Intn(5)) - 1
				}
			case 3:
				if n := cp[i].GetIAVL(); n != nil {
					n.Version = r.Int63n(10) - 2
				}
			case 4:
				if n := cp[i].GetIAVL(); n != nil {
					n.Key = []byte{byte(r.Intn(256))}
				}
			case 5:
				if n := cp[i].GetIAVL(); n != nil {
					n.Value = nil
				}
			case 6:
				if s := cp[i].GetStore(); s != nil {
					s.Name = []string{"", "zzz", "a", string(make([]byte, 200))}[r.Intn(4)]
				}
			case 7:
				j := r.Intn(len(cp))
				cp[i], cp[j] = cp[j], cp[i]
			case 8:
				cp = cp[:i]
			}
		}
		dir := filepath.Join(t.TempDir(), "db")
		_, err := compat.RestoreDB(dir, 6, snapshottypes.CurrentFormat, ssReader(ssEncode(t, cp)), multitree.Options{})
		if err == nil {
			continue
		}
		refused++
		if !errors.Is(err, compat.ErrSnapshotStream) {
			t.Errorf("trial %d: a refusal that does not wrap ErrSnapshotStream: %v", trial, err)
		}
		if _, serr := os.Lstat(filepath.Join(dir, "current")); serr == nil {
			t.Errorf("trial %d: the refused restore left a database", trial)
		}
	}
	if refused < trials/4 {
		t.Fatalf("only %d of %d mutated streams were refused", refused, trials)
	}
}

// TestRestoreItemOverReaderBound: an item longer than the stream reader's
// bound (the SDK's reader allows 64e6 bytes; protoio's reader then answers
// only "short buffer") is refused with an error that says so, wrapping
// ErrSnapshotStream, and leaves no database behind.
func TestRestoreItemOverReaderBound(t *testing.T) {
	r := testutil.Rand(t)
	src, _ := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 3, 10))
	defer src.Close()
	items := ssItems(t, ssStream(t, src, 3))
	// the stores' items, then the length of an item one byte over the
	// bound: the reader refuses it before reading its body
	stream := binary.AppendUvarint(ssEncode(t, items[:len(items)/2]), 64e6+1)
	dir := filepath.Join(t.TempDir(), "db")
	_, err := compat.RestoreDB(dir, 3, snapshottypes.CurrentFormat,
		protoio.NewDelimitedReader(bytes.NewReader(stream), 64e6), multitree.Options{})
	if !errors.Is(err, compat.ErrSnapshotStream) || !strings.Contains(err.Error(), "longer than the stream reader's bound") {
		t.Fatalf("restore of a stream with an item over the reader's bound: %v; want an ErrSnapshotStream naming the bound", err)
	}
	if _, serr := os.Lstat(filepath.Join(dir, "current")); serr == nil {
		t.Error("the refused restore left a database")
	}
}
