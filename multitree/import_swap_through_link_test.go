package multitree_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// midSwapThroughLink leaves the state of an import's two-rename
// swap interrupted between its renames (real moved to real.replaced.tmp,
// the whole staged database in real.import.tmp), with links/db a
// symbolic link to real (dangling meanwhile). It returns the link and real.
func midSwapThroughLink(t *testing.T) (link, real string) {
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real = filepath.Join(parent, "real")
	src := func(v string) map[string]multitree.NodeSource {
		return map[string]multitree.NodeSource{"s": leafSource("k", v, 7)}
	}
	if _, err := multitree.Import(real, 7, src("old"), multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Import(real+".import.tmp", 7, src("new"), multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(real, real+".replaced.tmp"); err != nil {
		t.Fatal(err)
	}
	links, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link = filepath.Join(links, "db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	return link, real
}

// checkLinkKept checks that link is still a symbolic link and that the
// directory it names, real, holds a database whose "k" is want.
func checkLinkKept(t *testing.T, link, real, want string) {
	t.Helper()
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symbolic link (%v, mode %v): the swap was finished onto the link", link, err, modeOf(fi))
	}
	db, err := multitree.Open(real, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the directory the link names, %s: %v", real, err)
	}
	defer db.Close()
	if v, _ := db.Get("s", []byte("k")); string(v) != want {
		t.Fatalf("%s holds %q, want %q", real, v, want)
	}
}

func modeOf(fi fs.FileInfo) fs.FileMode {
	if fi == nil {
		return 0
	}
	return fi.Mode()
}

// TestWritableOpenFinishesSwapThroughLink: a writable Open of a link to a
// database whose import swap was interrupted between its two renames
// finishes the swap in the directory the link names, keeping the link.
// finishSwap renamed onto the path as given, the link: every writable
// Open and RemoveDatabase through it failed ("not a directory") until an
// import, and a link to an empty directory would have been replaced.
func TestWritableOpenFinishesSwapThroughLink(t *testing.T) {
	link, real := midSwapThroughLink(t)
	db, err := multitree.Open(link, multitree.Options{})
	if err != nil {
		t.Fatalf("writable Open through the link: %v", err)
	}
	db.Close()
	checkLinkKept(t, link, real, "new")
}

// TestRemoveDatabaseFinishesSwapThroughLink: RemoveDatabase through
// the link finishes the swap first; it must do so in the directory the
// link names, not over the link.
func TestRemoveDatabaseFinishesSwapThroughLink(t *testing.T) {
	link, real := midSwapThroughLink(t)
	if err := multitree.RemoveDatabase(link); err != nil {
		t.Fatalf("RemoveDatabase through the link: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symbolic link (%v, mode %v)", link, err, modeOf(fi))
	}
	if _, err := os.Lstat(real + ".replaced.tmp"); err == nil {
		t.Errorf("%s.replaced.tmp left behind", real)
	}
	if _, err := os.Lstat(filepath.Join(real, "current")); err == nil {
		t.Errorf("%s still holds a database", real)
	}
}
