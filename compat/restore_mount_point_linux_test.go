package compat_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"cosmossdk.io/log"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// mountPointApp is a BaseApp with SetupMemIAVL on home and one IAVL store,
// loaded as an app constructor loads it.
func mountPointApp(t *testing.T, home string) *compat.MultiStore {
	t.Helper()
	app := baseapp.NewBaseApp("mp", log.NewNopLogger(), dbm.NewMemDB(), nil,
		compat.SetupMemIAVL(log.NewNopLogger(), home, testConfig()))
	app.MountStores(storetypes.NewKVStoreKey("bank"))
	if err := app.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	return app.CommitMultiStore().(*compat.MultiStore)
}

// TestRestoreIntoMountPoint: a node whose database directory
// (<home>/data/memiavl.db) is a file system of its own state-syncs. Its
// first load made an empty database there; the restore replaces it in
// place (a directory staged beside it could not be renamed over a mount
// point), writes nothing beside it, and after a refused stream the node is
// still at version 0 and takes the next one. It needs to mount a tmpfs.
func TestRestoreIntoMountPoint(t *testing.T) {
	home := t.TempDir()
	dir := compat.DBDir(home)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })

	// a state-sync snapshot of height 1 from another node
	src := mountPointApp(t, t.TempDir())
	src.GetKVStore(src.StoreKeysByName()["bank"]).Set([]byte("k"), []byte("v"))
	want := src.Commit()
	var stream bytes.Buffer
	if err := src.Snapshot(1, protoio.NewDelimitedWriter(&stream)); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	good := stream.Bytes()

	ms := mountPointApp(t, home) // the node's start: version 0 on its own file system
	defer ms.Close()
	restore := func(b []byte) error {
		_, err := ms.Restore(1, snapshottypes.CurrentFormat, protoio.NewDelimitedReader(bytes.NewReader(b), 1<<30))
		return err
	}
	if err := restore([]byte{5, 0xff, 0xff, 0xff, 0xff, 0xff}); err == nil {
		t.Fatal("a stream of garbage was restored")
	}
	if got := ms.LastCommitID(); got.Version != 0 {
		t.Fatalf("after a refused restore: %v, want version 0", got)
	}
	if err := restore(good); err != nil {
		t.Fatalf("state sync into %s (a mount point): %v", dir, err)
	}
	if got := ms.LastCommitID(); got.Version != 1 || !bytes.Equal(got.Hash, want.Hash) {
		t.Fatalf("after the restore: %v, want %v", got, want)
	}
	if got := ms.GetKVStore(ms.StoreKeysByName()["bank"]).Get([]byte("k")); string(got) != "v" {
		t.Fatalf("restored value %q", got)
	}
	ents, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != compat.DBDirName {
			t.Errorf("the restore left %s beside the database directory", e.Name())
		}
	}
}
