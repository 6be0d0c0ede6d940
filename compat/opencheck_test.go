package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestOpenCheckStopsTheNode damages a value in the current snapshot: with
// open-check "sync" the store does not load; with "background" it loads and
// the next Commit panics naming the damaged file, after which a restart
// with "none" still loads (the operator's way to look at the state).
func TestOpenCheckStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	keys := keyring{}
	m := mount{iavl: []string{"bank", "acc"}}
	cfg := testConfig()
	cfg.SnapshotInterval = -1
	ms := newOurs(t, dir, cfg, keys, m, nil)
	bank := ms.GetKVStore(keys.key("bank", 0))
	for i := 0; i < 500; i++ {
		bank.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("value %d", i)))
	}
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	// the bank kvs of snapshot 1 (multitree/format.go): its last byte is
	// in the last value
	kvs := filepath.Join(dir, "snapshot-00000000000000000001", "s-bank", snapshot.FileKVs)
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	defer testutil.DamageByte(t, kvs, fi.Size()-1)()

	cfg.OpenCheck = "sync"
	ms, err = compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
	if err == nil {
		mountAll(ms, keys, m)
		err = ms.LoadLatestVersion()
		ms.Close()
	}
	if !errors.Is(err, multitree.ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
		t.Fatalf("sync open check: %v", err)
	}

	cfg.OpenCheck = "background"
	ms = newOurs(t, dir, cfg, keys, m, nil)
	if err := ms.DB().WaitOpenCheck(context.Background()); !errors.Is(err, multitree.ErrCorrupt) {
		t.Fatalf("background open check: %v", err)
	}
	func() {
		defer func() {
			r := recover()
			err, _ := r.(error)
			if !errors.Is(err, multitree.ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
				t.Fatalf("Commit after the check: panic %v", r)
			}
		}()
		ms.GetKVStore(keys.key("acc", 0)).Set([]byte("a"), []byte("b"))
		ms.Commit()
	}()
	ms.Close()

	cfg.OpenCheck = "none"
	ms = newOurs(t, dir, cfg, keys, m, nil)
	defer ms.Close()
	if got := ms.LastCommitID().Version; got != 2 {
		t.Fatalf("reopened at %d, want 2 (the version the panicking Commit committed)", got)
	}
	// a state-sync snapshot checks the files it reads from first
	var buf bytes.Buffer
	err = ms.Snapshot(2, protoio.NewDelimitedWriter(&buf))
	if !errors.Is(err, multitree.ErrCorrupt) || !strings.Contains(err.Error(), kvs) || buf.Len() != 0 {
		t.Fatalf("state-sync snapshot of a damaged store: %v, %d bytes written", err, buf.Len())
	}
}
