package multitree_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestImportMarkerDamage: the directory a process killed during an
// import's Finish step leaves holds a complete database and the import
// marker "finishing\n", which makes every Open and Verify refuse it
// (ErrUnfinishedImport): it is not the import's result. The marker is a
// file of the database like the others; one damaged bit or byte of it
// must not turn the unfinished import into an accepted database (Verify
// passing, Open opening it and removing the marker).
func TestImportMarkerDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	crashed := filepath.Join(t.TempDir(), "crashed")
	_, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "v", 7)},
		multitree.ImportOptions{Finish: finishCommits(t, 3, func(db *multitree.DB, i int) {
			if i == 2 { // what a process killed during Finish leaves
				testutil.CopyDir(t, dir, crashed)
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Verify(crashed); !errors.Is(err, multitree.ErrUnfinishedImport) {
		t.Fatalf("undamaged: Verify: %v, want ErrUnfinishedImport", err)
	}
	marker := filepath.Join(crashed, "import")
	orig, err := os.ReadFile(marker)
	if err != nil || string(orig) != "finishing\n" {
		t.Fatalf("marker %q: %v", orig, err)
	}

	var failures []string
	for off := range orig {
		for _, xor := range []byte{0x01, 0x20, 0x80, 0xff} {
			c := filepath.Join(t.TempDir(), "c")
			testutil.CopyDir(t, crashed, c)
			b := append([]byte(nil), orig...)
			b[off] ^= xor
			if err := os.WriteFile(filepath.Join(c, "import"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("import offset %d xor %#02x (%q)", off, xor, b)
			rep, verr := multitree.Verify(c)
			if verr == nil {
				what += fmt.Sprintf(": Verify passes (version %d)", rep.Version)
			}
			db, oerr := multitree.Open(c, multitree.Options{OpenCheck: multitree.OpenCheckSync})
			if oerr == nil {
				what += fmt.Sprintf(", Open opens the unfinished import at version %d", db.Version())
				db.Close()
				if _, err := os.Stat(filepath.Join(c, "import")); errors.Is(err, os.ErrNotExist) {
					what += " and removes the marker"
				}
			}
			if verr == nil || oerr == nil {
				failures = append(failures, what)
			}
		}
	}
	for i, f := range failures {
		if i == 10 {
			t.Errorf("... and %d more of %d cases", len(failures)-10, 4*len(orig))
			break
		}
		t.Error(f)
	}
}
