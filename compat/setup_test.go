package compat_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/snapshots"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestSetupAfterCarriedOptions checks that SetupMemIAVL refuses to come
// after the BaseApp options it cannot carry over (the snapshot manager would
// snapshot the replaced store, the tracer would trace it), and works before
// them.
func TestSetupAfterCarriedOptions(t *testing.T) {
	snapshotOption := func() func(*baseapp.BaseApp) {
		st, err := snapshots.NewStore(dbm.NewMemDB(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return baseapp.SetSnapshot(st, snapshottypes.NewSnapshotOptions(10, 2))
	}
	for name, c := range map[string]struct {
		other func(*baseapp.BaseApp)
		want  string
	}{
		"snapshot": {snapshotOption(), "after SetSnapshot"},
		"tracer":   {func(b *baseapp.BaseApp) { b.SetCommitMultiStoreTracer(io.Discard) }, "after SetCommitMultiStoreTracer"},
	} {
		t.Run(name, func(t *testing.T) {
			setup := compat.SetupMemIAVL(log.NewNopLogger(), t.TempDir(), testConfig())
			func() {
				defer func() {
					if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
						t.Fatalf("SetupMemIAVL after the option: %v", r)
					}
				}()
				baseapp.NewBaseApp("setup", log.NewNopLogger(), dbm.NewMemDB(), nil, c.other, setup)
			}()
			app := baseapp.NewBaseApp("setup", log.NewNopLogger(), dbm.NewMemDB(), nil, setup, c.other)
			ms, ok := app.CommitMultiStore().(*compat.MultiStore)
			if !ok {
				t.Fatalf("multistore %T", app.CommitMultiStore())
			}
			if name == "tracer" && !ms.TracingEnabled() {
				t.Fatal("the tracer is not on the multistore")
			}
			if name == "snapshot" && app.SnapshotManager() == nil {
				t.Fatal("no snapshot manager")
			}
			if err := ms.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSetupCarriesPruning checks that pruning options given to BaseApp
// before SetupMemIAVL reach the MultiStore, where the SDK validates them at
// startup, as they do after it.
func TestSetupCarriesPruning(t *testing.T) {
	opts := pruningtypes.NewCustomPruningOptions(100, 10)
	for _, before := range []bool{true, false} {
		setup := compat.SetupMemIAVL(log.NewNopLogger(), t.TempDir(), testConfig())
		options := []func(*baseapp.BaseApp){setup, baseapp.SetPruning(opts)}
		if before {
			options = []func(*baseapp.BaseApp){baseapp.SetPruning(opts), setup}
		}
		app := baseapp.NewBaseApp("setup", log.NewNopLogger(), dbm.NewMemDB(), nil, options...)
		ms, ok := app.CommitMultiStore().(*compat.MultiStore)
		if !ok {
			t.Fatalf("multistore %T", app.CommitMultiStore())
		}
		if got := ms.GetPruning(); got != opts {
			t.Errorf("pruning given before SetupMemIAVL: %v: GetPruning %+v, want %+v", before, got, opts)
		}
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnableBesideRootMultiState checks that a node switched to the store
// without migrating its rootmulti state is told so at the load, that the
// message is gone once the store has its own versions, and that a load
// says so when rootmulti committed later heights meanwhile (the store
// disabled for a while).
func TestEnableBesideRootMultiState(t *testing.T) {
	appDB := dbm.NewMemDB()
	key := storetypes.NewKVStoreKey("bank")
	rs := rootmulti.NewStore(appDB, log.NewNopLogger(), metrics.NewNoOpMetrics())
	rs.MountStoreWithDB(key, storetypes.StoreTypeIAVL, nil)
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		rs.GetKVStore(key).Set([]byte{byte(i)}, []byte("v"))
		rs.Commit()
	}
	home := t.TempDir()
	load := func() (*compat.MultiStore, string) {
		t.Helper()
		var out bytes.Buffer
		logger := log.NewLogger(&out, log.ColorOption(false))
		app := baseapp.NewBaseApp("setup", logger, appDB, nil, compat.SetupMemIAVL(logger, home, testConfig()))
		app.MountStores(key)
		if err := app.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
		return app.CommitMultiStore().(*compat.MultiStore), out.String()
	}
	ms, out := load()
	if !strings.Contains(out, "import-iavl") || !strings.Contains(out, "replaces this database") || !strings.Contains(out, "application_db_height=3") {
		t.Fatalf("no message about the app database's state at the load:\n%s", out)
	}
	if v := ms.LastCommitID().Version; v != 0 {
		t.Fatalf("version %d", v)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	// the advice works: the import replaces the database the load created
	if err := compat.ImportIAVL(appDB, 3, nil, compat.DBDir(home), multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	ms, out = load()
	if cid := ms.LastCommitID(); strings.Contains(out, "import-iavl") || cid.Version != 3 || !bytes.Equal(cid.Hash, rs.LastCommitID().Hash) {
		t.Fatalf("after the import: %v, app hash %X, rootmulti's %X; log:\n%s", cid.Version, cid.Hash, rs.LastCommitID().Hash, out)
	}
	ms.GetKVStore(key).Set([]byte("k"), []byte("v"))
	ms.Commit()
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	// a database with versions is not replaced
	if err := compat.ImportIAVL(appDB, 3, nil, compat.DBDir(home), multitree.Options{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("import over a database at version 4: %v", err)
	}
	ms, out = load()
	if strings.Contains(out, "import-iavl") || ms.LastCommitID().Version != 4 {
		t.Fatalf("version %d, message at a load with versions of its own:\n%s", ms.LastCommitID().Version, out)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	// the store disabled for a while: rootmulti goes on from 3 to 6; the
	// load says this database is behind the app's database
	for i := 0; i < 3; i++ {
		rs.GetKVStore(key).Set([]byte{byte(i)}, []byte("w"))
		rs.Commit()
	}
	ms, out = load()
	defer ms.Close()
	if !strings.Contains(out, "later height than this database") || !strings.Contains(out, "version=4") || !strings.Contains(out, "application_db_height=6") {
		t.Fatalf("no message about the app database's later state at the load:\n%s", out)
	}
	if v := ms.LastCommitID().Version; v != 4 {
		t.Fatalf("version %d, want 4", v)
	}
}

// TestReferenceDirectoryRefused: a node of the reference memiavl keeps its
// state in <home>/data/memiavl.db too; the load refuses that directory
// with multitree.ErrReferenceFormat, naming the command that converts it,
// and leaves it alone.
func TestReferenceDirectoryRefused(t *testing.T) {
	home := t.TempDir()
	dir := compat.DBDir(home)
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
	app := baseapp.NewBaseApp("setup", log.NewNopLogger(), dbm.NewMemDB(), nil, compat.SetupMemIAVL(log.NewNopLogger(), home, testConfig()))
	app.MountStores(storetypes.NewKVStoreKey("bank"))
	err := app.LoadLatestVersion()
	if !errors.Is(err, multitree.ErrReferenceFormat) || !strings.Contains(err.Error(), "import-memiavl") {
		t.Fatalf("load of a reference memiavl directory: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "current")); err != nil || target != snap {
		t.Fatalf("current changed: %q %v", target, err)
	}
}
