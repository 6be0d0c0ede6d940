package multitree

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenCreatesAtDanglingLink: Open with CreateIfMissing of a path that
// is a symbolic link to a missing directory (absolute or relative, through
// a chain of links) creates the database at the link's target, and the
// database opens again through the link.
func TestOpenCreatesAtDanglingLink(t *testing.T) {
	for _, c := range []struct {
		name string
		link func(parent, target string) string // makes the links, returns the path to open
	}{
		{"absolute", func(parent, target string) string {
			link := filepath.Join(parent, "db")
			mustSymlink(t, target, link)
			return link
		}},
		{"relative", func(parent, target string) string {
			link := filepath.Join(parent, "db")
			mustSymlink(t, filepath.Join("disk", "data"), link)
			return link
		}},
		{"chain", func(parent, target string) string {
			mid := filepath.Join(parent, "mid")
			mustSymlink(t, target, mid)
			link := filepath.Join(parent, "db")
			mustSymlink(t, "mid", link)
			return link
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "disk", "data")
			path := c.link(parent, target)
			db, err := Open(path, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
			if err != nil {
				t.Fatal(err)
			}
			want := edgeCommit(t, db, "a", "k", "v")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(filepath.Join(target, currentFileName)); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("no database at the link's target: %v", err)
			}
			db = edgeOpen(t, path, Options{})
			if db.Version() != 1 || string(db.LastCommitInfo().Hash()) != string(want) {
				t.Fatalf("reopened through the link at %d", db.Version())
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestOpenCreatesAtDanglingLinkThroughLinkedParent: a relative link target
// with ".." is resolved as the system does, against the directory that
// holds the link, also when that directory is reached through a symbolic
// link (a home or data directory linked to another disk): the database is
// created at the link's target and nowhere else.
func TestOpenCreatesAtDanglingLinkThroughLinkedParent(t *testing.T) {
	root := t.TempDir()
	realParent := filepath.Join(root, "real", "sub")
	if err := os.MkdirAll(realParent, 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(root, "alias") // alias -> real/sub
	mustSymlink(t, realParent, alias)
	// alias/db -> ../data, which the kernel resolves to real/data
	path := filepath.Join(alias, "db")
	mustSymlink(t, filepath.Join("..", "data"), path)

	db, err := Open(path, Options{CreateIfMissing: true, InitialStores: []string{"a"}})
	if err != nil {
		if _, serr := os.Stat(filepath.Join(root, "data")); serr == nil {
			t.Errorf("a stray %s was created (the lexical resolution of ../data from %s)", filepath.Join(root, "data"), alias)
		}
		t.Fatalf("Open(CreateIfMissing) through %s -> ../data: %v", path, err)
	}
	defer db.Close()
	if fi, err := os.Lstat(filepath.Join(root, "real", "data", currentFileName)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("no database at the link's target real/data: %v", err)
	}
}
