package osfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
)

// TestRealDirDotDotThroughLink: a dangling link whose relative target
// passes ".." after a component that is itself a symbolic link is resolved
// by the system through that link (the ".." is the link target's parent):
// FollowDangling (RealDir) names the place the system creates. It cleaned
// the target lexically, dropping the link with the "..", and named
// another place, where Open with CreateIfMissing, an import or the CLI's
// path checks would have created or looked for the database.
func TestRealDirDotDotThroughLink(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "other", "deep", "dir")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	r := filepath.Join(root, "r")
	if err := os.Mkdir(r, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(deep, filepath.Join(r, "sub")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(r, "db")
	if err := os.Symlink("sub/../newdb", link); err != nil {
		t.Fatal(err)
	}
	got := osfile.FollowDangling(link)
	// what the system creates through the link
	f, err := os.Create(link)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	want, err := filepath.EvalSymlinks(link)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("FollowDangling(%s) = %s; the system resolves the link to %s", link, got, want)
	}
}

// TestSystemPath: SystemPath names the file the system opens for a path,
// also when a ".." follows a symbolic link (where filepath.Abs names
// another place), for files that exist and files that opening the path
// would create; its last element stays a link; it keeps a trailing
// separator; a plain path comes back as filepath.Abs gives it.
func TestSystemPath(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(root, "db")
	if err := os.MkdirAll(filepath.Join(db, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(db, "current"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "wl")
	if err := os.Symlink(filepath.Join(db, "wal"), link); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(root, "cur")
	if err := os.Symlink(filepath.Join(db, "current"), fileLink); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })

	for _, tc := range []struct{ path, want string }{
		{link + "/../current", filepath.Join(db, "current")},
		{"wl/../current", filepath.Join(db, "current")},
		{"wl/../new-file", filepath.Join(db, "new-file")},
		{"wl/..", db},
		{"wl/../", db + "/"},
		{"wl/../wal/.", filepath.Join(db, "wal")},
		{"cur", fileLink},
		{"./db/../cur", fileLink},
		{"db/current", filepath.Join(db, "current")},
		{"missing/../x", filepath.Join(root, "x")},
		{"/", "/"},
	} {
		if got := osfile.SystemPath(tc.path); got != tc.want {
			t.Errorf("SystemPath(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	// the system agrees: the file opened through the path is the one named
	for _, p := range []string{"wl/../current", link + "/../current", "wl/..", "cur"} {
		a, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(osfile.SystemPath(p))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(a, b) {
			t.Errorf("%q and SystemPath(%q) = %q are different files", p, p, osfile.SystemPath(p))
		}
	}
	// and a file created through the path is where SystemPath says
	if err := os.WriteFile("wl/../created", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(osfile.SystemPath("wl/../created")); err != nil {
		t.Errorf("the file created through wl/../created is not at SystemPath's %s: %v", osfile.SystemPath("wl/../created"), err)
	}
}
