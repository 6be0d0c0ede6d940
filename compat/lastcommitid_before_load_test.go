package compat_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"cosmossdk.io/log"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestLastCommitIDBeforeLoadDamagedLog: a database whose log is damaged
// (here the checksum of its segment's header) is refused by every open and
// by multitree.LatestVersion with an error wrapping multitree.ErrCorrupt.
// Asked before the load (as the SDK's upgrade store loader does),
// LastCommitID answers version 0 without panicking, and the load fails with
// ErrCorrupt.
func TestLastCommitIDBeforeLoadDamagedLog(t *testing.T) {
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"bank"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 5; v++ {
		if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "bank", Pairs: []wal.KVPair{{Key: []byte(fmt.Sprint("k", v)), Value: []byte("v")}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[17] ^= 0xff // the header's checksum
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	// what every open reports
	if _, err := multitree.Open(dir, multitree.Options{ReadOnly: true}); !errors.Is(err, multitree.ErrCorrupt) {
		t.Fatalf("read-only open: %v, want ErrCorrupt", err)
	}
	if _, err := multitree.LatestVersion(dir); !errors.Is(err, multitree.ErrCorrupt) {
		t.Errorf("LatestVersion: %v, want an error wrapping multitree.ErrCorrupt, as Open's", err)
	}

	cfg := testConfig()
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	keys := keyring{}
	mountAll(ms, keys, mount{iavl: []string{"bank"}})
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("LastCommitID before the load panicked: %v", p)
			}
		}()
		if id := ms.LastCommitID(); id.Version != 0 {
			t.Errorf("LastCommitID before the load: %v", id)
		}
	}()
	if err := ms.LoadLatestVersion(); !errors.Is(err, multitree.ErrCorrupt) {
		t.Errorf("load: %v, want ErrCorrupt", err)
	}
}

// TestLastCommitIDBeforeLoadReferenceLayout: a directory of the reference
// memiavl is refused by the load with multitree.ErrReferenceFormat;
// LastCommitID asked before the load (the SDK's upgrade store loader) does
// not panic on it, as on any directory the load refuses.
func TestLastCommitIDBeforeLoadReferenceLayout(t *testing.T) {
	dir := t.TempDir()
	snap := "snapshot-00000000000000000005"
	if err := os.MkdirAll(filepath.Join(dir, snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snap, "__metadata"), []byte{0x0a, 0x02, 0x08, 0x05}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(snap, filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	mountAll(ms, keyring{}, mount{iavl: []string{"bank"}})
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("LastCommitID before the load panicked: %v", p)
			}
		}()
		_ = ms.LastCommitID()
	}()
	if err := ms.LoadLatestVersion(); !errors.Is(err, multitree.ErrReferenceFormat) {
		t.Errorf("load: %v, want ErrReferenceFormat", err)
	}
}

// TestCommitBeforeLoadPanics: a Commit before any load panics with an
// error wrapping ErrNotLoaded (as its documentation says) and writes
// nothing: the load after it starts from an empty database at version 0.
func TestCommitBeforeLoadPanics(t *testing.T) {
	dir := t.TempDir()
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	mountAll(ms, keyring{}, mount{iavl: []string{"bank"}})
	func() {
		defer func() {
			p := recover()
			err, _ := p.(error)
			if !errors.Is(err, compat.ErrNotLoaded) {
				t.Errorf("Commit before the load: panic %v, want an error wrapping ErrNotLoaded", p)
			}
		}()
		ms.Commit()
	}()
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatalf("load after the refused commit: %v", err)
	}
	if id := ms.LastCommitID(); id.Version != 0 {
		t.Errorf("after the refused commit the database is at %v, want version 0", id)
	}
}
