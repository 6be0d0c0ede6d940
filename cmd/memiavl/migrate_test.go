package main

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/internal/workload"
)

// makeIAVLApp writes blocks 1..blocks of a small workload through the SDK's
// rootmulti store over cosmos/iavl into <parent>/application.db and returns
// the last app hash.
func makeIAVLApp(t *testing.T, parent string, blocks int64) string {
	return makeIAVLAppOn(t, dbm.GoLevelDBBackend, parent, blocks)
}

// makeIAVLAppOn is makeIAVLApp on the given backend.
func makeIAVLAppOn(t *testing.T, backend dbm.BackendType, parent string, blocks int64) string {
	t.Helper()
	db, err := dbm.NewDB("application", backend, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return writeIAVLApp(t, db, blocks)
}

// writeIAVLApp commits blocks of the workload through rootmulti into db,
// which it leaves open, and returns the last app hash.
func writeIAVLApp(t *testing.T, db dbm.DB, blocks int64) string {
	t.Helper()
	gen, _ := workload.New(workload.Config{Seed: 5, Scale: 0.01})
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	for _, name := range gen.Stores() {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	var id storetypes.CommitID
	for v := int64(1); v <= blocks; v++ {
		for _, cs := range gen.Block(v) {
			st := rs.GetStoreByName(cs.Name).(storetypes.KVStore)
			for _, p := range cs.Pairs {
				if p.Delete {
					st.Delete(p.Key)
				} else {
					st.Set(p.Key, p.Value)
				}
			}
		}
		id = rs.Commit()
	}
	return hex.EncodeToString(id.Hash)
}

func TestImportIAVL(t *testing.T) {
	parent := t.TempDir()
	hash := makeIAVLApp(t, parent, 12)
	dst := filepath.Join(t.TempDir(), "memiavl.db")
	out := mustCLI(t, "import-iavl", filepath.Join(parent, "application.db"), dst)
	if !strings.Contains(strings.ToLower(out), hash) || !strings.Contains(out, "version 12") {
		t.Fatalf("import-iavl printed %q, want version 12 and app hash %s", out, hash)
	}
	mustCLI(t, "verify", dst)
	// a database in the destination is refused, an absent source too
	if code, _, _ := cli(t, "import-iavl", filepath.Join(parent, "application.db"), dst); code != exitFailure {
		t.Errorf("import into an existing database: exit %d", code)
	}
	if code, _, _ := cli(t, "import-iavl", filepath.Join(parent, "nosuch.db"), t.TempDir()); code != exitFailure {
		t.Errorf("import of an absent source: exit %d", code)
	}

	// --stores '' is the default, every store
	dst = filepath.Join(t.TempDir(), "memiavl.db")
	if out := mustCLI(t, "import-iavl", "--stores", "", filepath.Join(parent, "application.db"), dst); !strings.Contains(strings.ToLower(out), hash) {
		t.Errorf("import-iavl --stores '' printed %q, want app hash %s", out, hash)
	}
	// a source not named <name>.db is refused, and nothing is created
	// beside it (the backends would open <name>.db)
	copyDir(t, filepath.Join(parent, "application.db"), filepath.Join(parent, "backup"))
	if code, _, _ := cli(t, "import-iavl", filepath.Join(parent, "backup"), filepath.Join(t.TempDir(), "x")); code != exitFailure {
		t.Errorf("import of a source not named *.db: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(parent, "backup.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("import-iavl created %s: %v", filepath.Join(parent, "backup.db"), err)
	}
	if code, _, _ := cli(t, "import-iavl", "--backend", "nosuch", filepath.Join(parent, "application.db"), filepath.Join(t.TempDir(), "x")); code != exitUsage {
		t.Errorf("import-iavl --backend nosuch: exit %d", code)
	}
}

func TestImportMemIAVLMissing(t *testing.T) {
	if code, _, errs := cli(t, "import-memiavl", filepath.Join(t.TempDir(), "nosuch"), t.TempDir()); code != exitFailure {
		t.Errorf("import-memiavl of an absent directory: exit %d %s", code, errs)
	}
}

// TestImportIAVLPebble: import-iavl of a pebble application database
// reads it without changing a byte of its directory (cosmos-db's pebble
// backend always opens for writing: the tool opens it read-only), and an
// empty directory is refused without a database being created in it.
func TestImportIAVLPebble(t *testing.T) {
	parent := t.TempDir()
	hash := makeIAVLAppOn(t, dbm.PebbleDBBackend, parent, 12)
	src := filepath.Join(parent, "application.db")
	sum := testutil.DirDigest(t, src)
	dst := filepath.Join(t.TempDir(), "memiavl.db")
	out := mustCLI(t, "import-iavl", "--backend", "pebbledb", src, dst)
	if !strings.Contains(strings.ToLower(out), hash) || !strings.Contains(out, "version 12") {
		t.Fatalf("import-iavl printed %q, want version 12 and app hash %s", out, hash)
	}
	mustCLI(t, "verify", dst)
	if testutil.DirDigest(t, src) != sum {
		t.Fatal("import-iavl --backend pebbledb changed its source")
	}

	empty := filepath.Join(t.TempDir(), "application.db")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"pebbledb", "goleveldb"} {
		if code, _, _ := cli(t, "import-iavl", "--backend", backend, empty, filepath.Join(t.TempDir(), "out")); code != exitFailure {
			t.Errorf("import-iavl --backend %s of an empty directory: exit %d", backend, code)
		}
		if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
			t.Errorf("import-iavl --backend %s of an empty directory left %v (%v) in it", backend, ents, err)
		}
	}
}

// TestImportIAVLLocked: import-iavl of an application database open by a
// running node (goleveldb's lock) fails, says why, and creates nothing.
func TestImportIAVLLocked(t *testing.T) {
	parent := t.TempDir()
	makeIAVLApp(t, parent, 5)
	node, err := dbm.NewDB("application", dbm.GoLevelDBBackend, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	dst := filepath.Join(t.TempDir(), "memiavl.db")
	code, _, errs := cli(t, "import-iavl", filepath.Join(parent, "application.db"), dst)
	if code != exitFailure || !strings.Contains(errs, "locked (is a node running on it?") {
		t.Fatalf("exit %d, stderr %q: want a failure that says the database is locked", code, errs)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused import left %s: %v", dst, err)
	}
}

// TestImportIAVLWrongBackendRefused: a running node writes a goleveldb
// application database and keeps it open (goleveldb's flock on LOCK).
// import-iavl refuses it with the default backend ("locked") and with
// --backend pebbledb too: pebble would read a young goleveldb database's
// log, and its lock (fcntl) does not see goleveldb's, so the live files
// would be imported against the documented "a running node's lock
// refuses". The refusal names goleveldb and leaves no target behind.
func TestImportIAVLWrongBackendRefused(t *testing.T) {
	parent := t.TempDir()
	node, err := dbm.NewDB("application", dbm.GoLevelDBBackend, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	writeIAVLApp(t, node, 5)
	src := filepath.Join(parent, "application.db")
	// the default backend sees the node's lock
	if code, _, errs := cli(t, "import-iavl", src, filepath.Join(t.TempDir(), "memiavl.db")); code != exitFailure || !strings.Contains(errs, "locked") {
		t.Fatalf("default backend: exit %d %q, want the lock refusal", code, errs)
	}
	dst := filepath.Join(t.TempDir(), "memiavl.db")
	code, out, errs := cli(t, "import-iavl", "--backend", "pebbledb", src, dst)
	if code == exitOK {
		t.Fatalf("import-iavl --backend pebbledb of a goleveldb database held open by a running node: exit 0, stdout %q", out)
	}
	if !strings.Contains(errs, "--backend goleveldb") {
		t.Errorf("stderr %q: want a refusal that names the goleveldb backend", errs)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused import left %s: %v", dst, err)
	}
}
