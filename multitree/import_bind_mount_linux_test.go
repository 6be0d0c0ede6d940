package multitree_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestImportOverBindMount: a database directory that is a bind
// mount of a directory of the same file system is a mount point too: no
// directory can be renamed over it. An import replacing a database at
// version 0 there must take the mount point's way (import in place), as
// for a file system of its own, not fail in the swap (EBUSY) after writing
// the whole database beside it: a comparison of device numbers does not
// see such a mount.
func TestImportOverBindMount(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "db")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = multitree.Import(dir, 3, map[string]multitree.NodeSource{"a": leafSource("k", "v", 3)}, multitree.ImportOptions{Replace: true})
	ents, _ := os.ReadDir(parent)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if err != nil {
		t.Fatalf("import over a version-0 database on a bind mount: %v (beside it: %v)", err, names)
	}
	if len(names) != 1 {
		t.Fatalf("beside the database directory after the import: %v", names)
	}
	db, err = multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get("a", []byte("k")); err != nil || string(v) != "v" || db.Version() != 3 {
		t.Fatalf("after the import: version %d, k = %q, %v", db.Version(), v, err)
	}
}
