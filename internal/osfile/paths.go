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

// SystemPath returns path made absolute with the elements above its last
// one resolved as the system resolves them when it opens path: symbolic
// links are followed and a ".." after a link goes up from the link's
// target, where filepath.Abs would drop the link and the ".." together
// and name another place. The last element is kept as it is (a link
// stays a link), unless it is "." or "..", which are resolved with the
// rest; a trailing separator is kept. Parts that do not exist are taken
// as written. The result names the file that opening path names, with no
// ".." in it, so that checks made on it textually (is it inside a
// database directory?) agree with what the system does with it.
func SystemPath(path string) string {
	if path == "" {
		return path
	}
	sep := string(filepath.Separator)
	p := path
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return path
		}
		p = wd + sep + p
	}
	trailing := strings.HasSuffix(p, sep)
	p = strings.TrimRight(p, sep)
	i := strings.LastIndex(p, sep)
	if p == "" || i < 0 {
		return sep // the root
	}
	var r string
	if base := p[i+1:]; base == "." || base == ".." {
		r = resolveUncleaned(p)
	} else {
		r = filepath.Join(resolveUncleaned(p[:i]), base)
	}
	if trailing && !strings.HasSuffix(r, sep) {
		r += sep
	}
	return r
}
