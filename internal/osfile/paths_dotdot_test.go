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
