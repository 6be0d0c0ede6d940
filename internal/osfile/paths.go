package osfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RealDir returns dir made absolute with its symbolic links resolved: those
// of the directories above it, and dir itself when it is a link, even one
// whose target is missing (in the middle of an import's swap, which moved
// the target aside). An import into a link replaces the directory it names,
// not the link. dir itself is made absolute by filepath.Abs, which takes a
// ".." in it as text (as every path the database joins does), where the
// system would go up from a symbolic link's target; a ".." in a link's
// target is taken as the system takes it.
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
			target = filepath.Dir(p) + string(filepath.Separator) + target
		}
		p = resolveUncleaned(target)
	}
	return p
}

// resolveUncleaned resolves the symbolic links of the longest prefix of
// path that exists and appends the rest, without cleaning path first: a
// ".." after a link goes up from the link's target, as the system
// resolves it (filepath.EvalSymlinks does too), where filepath.Clean
// would drop the link and the ".." together. The rest does not exist, so
// its own ".." can only be taken as written.
func resolveUncleaned(path string) string {
	sep := string(filepath.Separator)
	parts := strings.Split(path, sep)
	for i := len(parts); i > 0; i-- {
		prefix := strings.Join(parts[:i], sep)
		if prefix == "" {
			prefix = sep
		}
		if r, err := filepath.EvalSymlinks(prefix); err == nil {
			return filepath.Join(append([]string{r}, parts[i:]...)...)
		}
	}
	return filepath.Clean(path)
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
