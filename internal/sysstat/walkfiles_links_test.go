package sysstat

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestWalkFilesFileLinkThenDirLink: WalkFiles promises each regular
// file once, also a file outside the walked tree reached through a link to
// it found before a link to the directory holding it. It was counted
// twice: through the file link, and when the directory link's tree was walked.
func TestWalkFilesFileLinkThenDirLink(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "db")
	ext := filepath.Join(base, "ext")
	for _, d := range []string{root, ext} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ext, "f"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	// "a" sorts before "b": the file link is resolved first
	if err := os.Symlink(filepath.Join(ext, "f"), filepath.Join(root, "a-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ext, filepath.Join(root, "b-dir")); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	WalkFiles(root, func(p string, _ fs.FileInfo) {
		r, _ := filepath.EvalSymlinks(p)
		seen[r]++
	})
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s reported %d times, want once", p, n)
		}
	}
	if got := ApparentSize(root); got != 1000 {
		t.Errorf("ApparentSize = %d, want 1000 (one 1000-byte file)", got)
	}
}
