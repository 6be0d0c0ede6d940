package main

import (
	"path/filepath"
	"strings"
	"testing"

	dbm "github.com/cosmos/cosmos-db"
)

// TestImportIAVLPebbleUnderGlobMetaPath: a pebble application database
// whose path holds glob metacharacters ("node[1]*") is imported with
// --backend pebbledb, and refused under the default goleveldb backend
// with the hint naming pebbledb. The probe for pebble's OPTIONS files
// globbed the path, which read its own brackets as a pattern: the pebble
// database was refused as "a goleveldb database", and the hint was lost.
func TestImportIAVLPebbleUnderGlobMetaPath(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "node[1]*")
	makeIAVLAppOn(t, dbm.PebbleDBBackend, parent, 3)
	src := filepath.Join(parent, "application.db")
	if code, _, errs := cli(t, "import-iavl", src, filepath.Join(t.TempDir(), "memiavl.db")); code == exitOK || !strings.Contains(errs, "--backend pebbledb") {
		t.Errorf("default (goleveldb) backend: exit %d, stderr %q: want a refusal that names the pebbledb backend", code, errs)
	}
	if code, out, errs := cli(t, "import-iavl", "--backend", "pebbledb", src, filepath.Join(t.TempDir(), "memiavl.db")); code != exitOK {
		t.Errorf("--backend pebbledb: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
