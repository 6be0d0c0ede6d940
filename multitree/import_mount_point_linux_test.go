package multitree_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestImportOverMountPoint: a database directory that is a mount point (a
// file system of its own, or a bind mount of a directory of the same file
// system, whose device number is its parent's) cannot take a database
// staged beside it (the swap's renames and exchange cannot move a mount
// point). An import replaces a database there at version 0 in place,
// leaving nothing beside it; one at a committed version is refused before
// anything changes. It needs to mount a tmpfs, and to bind-mount. Before
// osfile.MountRoot, the bind mount was not seen: the import wrote the
// whole database beside it and then failed to exchange it in (EBUSY).
func TestImportOverMountPoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mount func(dir string) error
	}{
		{"tmpfs", func(dir string) error { return syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m") }},
		{"bind", func(dir string) error { return syscall.Mount(dir, dir, "", syscall.MS_BIND, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) { importOverMountPoint(t, tc.mount) })
	}
}

func importOverMountPoint(t *testing.T, mount func(dir string) error) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "db")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mount(dir); err != nil {
		t.Skipf("mount: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })

	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	opts := multitree.ImportOptions{Replace: true}
	info, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"a": leafSource("k", "v", 2)}, opts)
	if err != nil {
		t.Fatalf("import over a database at version 0 on a mount point: %v", err)
	}
	if ents, err := os.ReadDir(parent); err != nil || len(ents) != 1 {
		t.Fatalf("beside the database directory after the import: %v (%v)", ents, err)
	}
	before := testutil.DirDigest(t, dir)
	_, err = multitree.Import(dir, 3, map[string]multitree.NodeSource{"a": leafSource("k", "w", 3)}, opts)
	if !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("import over a database at version 3 on a mount point: %v, want ErrExists", err)
	}
	if after := testutil.DirDigest(t, dir); after != before {
		t.Fatalf("the refused import changed the database")
	}
	db, err = multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.LastCommitInfo().Hash(); string(got) != string(info.Hash()) {
		t.Fatalf("app hash %X, imported %X", got, info.Hash())
	}
}
