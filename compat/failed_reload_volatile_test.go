package compat_test

import (
	"fmt"
	"path/filepath"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	dbm "github.com/cosmos/cosmos-db"
)

// volatileContents reads the pair written by writeVolatile to the memory
// store m and the transient store t.
func volatileContents(get func(name string, key []byte) []byte) string {
	return fmt.Sprintf("memory %q transient %q", get("m", []byte("mem")), get("t", []byte("tr")))
}

// TestFailedRestoreKeepsVolatileStores: a Restore that fails (a stream
// whose leaves are out of order, an unknown format, height 0) leaves the
// memory and transient stores as they were, as rootmulti's does (it
// reloads only after a successful restore). The stores were rebuilt empty
// by the reload after the failure.
func TestFailedRestoreKeepsVolatileStores(t *testing.T) {
	m := mount{iavl: []string{"a"}, transient: "t", memory: "m"}
	bad := ssEncode(t, []*snapshottypes.SnapshotItem{storeItem("a"), ssEdgeLeaf("k", "v", 2), ssEdgeLeaf("j", "v", 2)})
	for _, c := range []struct {
		name   string
		height uint64
		format uint32
	}{
		{"bad stream", 3, snapshottypes.CurrentFormat},
		{"unknown format", 3, snapshottypes.CurrentFormat + 1},
		{"height 0", 0, snapshottypes.CurrentFormat},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := keyring{}
			rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
			ms := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
			defer ms.Close()
			for _, set := range []func(name string, k, v []byte){
				func(name string, k, v []byte) { ms.GetKVStore(keys[name]).Set(k, v) },
				func(name string, k, v []byte) { rs.GetKVStore(keys[name]).Set(k, v) },
			} {
				set("m", []byte("mem"), []byte("1"))
				set("t", []byte("tr"), []byte("1"))
			}
			_, e1 := ms.Restore(c.height, c.format, ssReader(bad))
			_, e2 := rs.Restore(c.height, c.format, ssReader(bad))
			if e1 == nil || e2 == nil {
				t.Fatalf("restored: ours %v | rootmulti %v", e1, e2)
			}
			a := volatileContents(func(name string, k []byte) []byte { return ms.GetKVStore(keys[name]).Get(k) })
			b := volatileContents(func(name string, k []byte) []byte { return rs.GetKVStore(keys[name]).Get(k) })
			if a != b {
				t.Errorf("after the failed restore (%v): ours %s, rootmulti %s", e1, a, b)
			}
			if ms.DB() == nil {
				t.Fatal("not loaded after the failed restore")
			}
		})
	}
}

// TestFailedReloadKeepsVolatileStores: a LoadVersion or RollbackToVersion
// that fails after the database was closed loads the latest version again
// and keeps the memory and transient stores, as rootmulti's failed loads
// leave its stores as they were. A successful reload starts them empty, as
// rootmulti's does.
func TestFailedReloadKeepsVolatileStores(t *testing.T) {
	for _, c := range []struct {
		name   string
		reload func(p *pair) error
	}{
		{"LoadVersion", func(p *pair) error { return p.ours.LoadVersion(7) }},
		{"RollbackToVersion", func(p *pair) error { return p.ours.RollbackToVersion(7) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := rfPair(t)
			get := func(name string, k []byte) []byte { return p.ours.GetKVStore(p.keys[name]).Get(k) }
			p.ours.GetKVStore(p.keys["m"]).Set([]byte("mem"), []byte("1"))
			p.ours.GetKVStore(p.keys["t"]).Set([]byte("tr"), []byte("1"))
			// snapshot 5, from which version 7 is loaded, damaged where
			// the checks before the reload do not read
			rfReplace(t, filepath.Join(rfSnapDir(p.dir, 5), "metadata"), 10)
			err := c.reload(p)
			if err == nil {
				t.Fatal("reloaded")
			}
			if p.ours.DB() == nil || p.ours.LastCommitID().Version != 12 {
				t.Fatalf("not loaded at the latest version after the failed reload: %v", err)
			}
			if got, want := volatileContents(get), `memory "1" transient "1"`; got != want {
				t.Errorf("after the failed reload (%v): %s, want %s", err, got, want)
			}
			if err := p.ours.LoadLatestVersion(); err != nil {
				t.Fatal(err)
			}
			if got, want := volatileContents(get), `memory "" transient ""`; got != want {
				t.Errorf("after a successful reload: %s, want %s", got, want)
			}
		})
	}
}
