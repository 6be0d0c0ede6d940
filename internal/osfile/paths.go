package osfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// RealDir returns dir made absolute with its symbolic links resolved: those
// of the directories above it, and dir itself when it is a link, even one
// whose target is missing (in the middle of an import's swap, which moved
// the target aside). An import into a link replaces the directory it names,
// not the link.
func RealDir(dir string) string {
	p, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	for hops := 0; hops < 40; hops++ {
		if parent, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			p = filepath.Join(parent, filepath.Base(p))
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p
		}
		target, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	return p
}

// FollowDangling returns RealDir(path) when path is a symbolic link to a
// missing file (where creating path creates that file), else path.
func FollowDangling(path string) string {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return path
	}
	return RealDir(path)
}
