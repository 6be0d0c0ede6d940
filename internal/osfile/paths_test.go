package osfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRealDir: links above the directory and the directory itself (also a
// chain of links, relative and absolute, and one whose target is missing)
// resolve to the directory they name; a plain path comes back absolute and
// clean; a loop of links ends instead of spinning.
func TestRealDir(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(root, "disk", "data")
	must(os.MkdirAll(data, 0o755))
	must(os.Symlink(filepath.Join(root, "disk"), filepath.Join(root, "parent")))     // a link above
	must(os.Symlink("data", filepath.Join(root, "disk", "rel")))                     // a relative link
	must(os.Symlink(filepath.Join(root, "disk", "rel"), filepath.Join(root, "abs"))) // a chain
	must(os.Symlink(filepath.Join(root, "disk", "gone"), filepath.Join(root, "dangling")))
	must(os.Symlink("loop-b", filepath.Join(root, "loop-a")))
	must(os.Symlink("loop-a", filepath.Join(root, "loop-b")))

	for _, tc := range []struct{ in, want string }{
		{data, data},
		{filepath.Join(root, "disk", ".", "data", ".."), filepath.Join(root, "disk")},
		{filepath.Join(root, "parent", "data"), data},
		{filepath.Join(root, "disk", "rel"), data},
		{filepath.Join(root, "abs"), data},
		{filepath.Join(root, "parent", "rel"), data},
		{filepath.Join(root, "dangling"), filepath.Join(root, "disk", "gone")},
		{filepath.Join(root, "parent", "new"), filepath.Join(root, "disk", "new")}, // missing, under a link
	} {
		if got := RealDir(tc.in); got != tc.want {
			t.Errorf("RealDir(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := RealDir(filepath.Join(root, "loop-a")); filepath.Dir(got) != root {
		t.Errorf("RealDir of a loop of links = %s, want a path in %s", got, root)
	}

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	must(os.Chdir(root))
	defer os.Chdir(wd)
	if got := RealDir("parent/rel"); got != data {
		t.Errorf("RealDir of a relative path = %s, want %s", got, data)
	}
}

// TestFollowDangling: only a link whose target is missing is followed (a
// create at the link creates the target); a link to an existing file, a
// plain file and a missing path come back as given.
func TestFollowDangling(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-file": file, "to-missing": filepath.Join(root, "missing")} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{filepath.Join(root, "to-missing"), filepath.Join(root, "missing")},
		{filepath.Join(root, "to-file"), filepath.Join(root, "to-file")},
		{file, file},
		{filepath.Join(root, "absent"), filepath.Join(root, "absent")},
	} {
		if got := FollowDangling(tc.in); got != tc.want {
			t.Errorf("FollowDangling(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
