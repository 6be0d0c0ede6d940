// Package sysstat reads the process and file-system figures that the bench
// command and the benchmark suites report: resident set sizes and disk use.
package sysstat

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ProcStatus returns a size field of /proc/self/status (such as "VmHWM:" or
// "VmRSS:") in bytes, 0 when it cannot be read.
func ProcStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			if fields := strings.Fields(rest); len(fields) > 0 {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb << 10
				}
			}
			return 0
		}
	}
	return 0
}

// PeakRSS returns the process's peak resident set size in bytes: VmHWM from
// /proc/self/status, else getrusage's maxrss.
func PeakRSS() int64 {
	if n := ProcStatus("VmHWM:"); n > 0 {
		return n
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return ru.Maxrss * maxrssUnit
	}
	return 0
}

// DiskUsage returns the bytes allocated on disk to the regular files under
// path (see WalkFiles).
func DiskUsage(path string) int64 {
	var n int64
	WalkFiles(path, func(p string, _ fs.FileInfo) {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			n += st.Blocks * 512
		}
	})
	return n
}

// ApparentSize returns the sizes of the regular files under path added up
// (see WalkFiles).
func ApparentSize(path string) int64 {
	var n int64
	WalkFiles(path, func(_ string, fi fs.FileInfo) { n += fi.Size() })
	return n
}

// WalkFiles calls fn for each regular file under path, each file once. A
// symbolic link is followed when it is path itself or leads to a directory
// outside the directories already walked (a database's log moved to another
// disk and linked back), and not when it leads into them (a pointer to one
// of the database's own directories), so nothing is counted twice and a
// loop of links ends. Unreadable entries are skipped; a path that does not
// exist has no files.
func WalkFiles(path string, fn func(path string, fi fs.FileInfo)) {
	root, err := filepath.EvalSymlinks(path)
	if err != nil {
		return
	}
	var walked []string // resolved roots of the trees walked
	under := func(p string) bool {
		for _, w := range walked {
			if rel, err := filepath.Rel(w, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	var links []string
	roots := map[string]bool{}
	// the files reported, by their path with no link in it: a file
	// reached through a link to it and again in a tree walked later
	// through a link to a directory above it is reported once
	reported := map[string]bool{}
	report := func(p string, fi fs.FileInfo) {
		if !reported[p] {
			reported[p] = true
			fn(p, fi)
		}
	}
	walk := func(dir string) {
		walked = append(walked, dir)
		roots[dir] = true
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			switch {
			case d.IsDir() && p != dir && roots[p]:
				return fs.SkipDir // walked already, from a link to it
			case d.Type().IsRegular():
				if fi, err := d.Info(); err == nil {
					report(p, fi)
				}
			case d.Type()&fs.ModeSymlink != 0:
				links = append(links, p)
			}
			return nil
		})
	}
	walk(root)
	// links are resolved once every tree they could lead into is known
	for len(links) > 0 {
		p := links[0]
		links = links[1:]
		target, err := filepath.EvalSymlinks(p)
		if err != nil || under(target) {
			continue
		}
		fi, err := os.Stat(target)
		switch {
		case err != nil:
		case fi.IsDir():
			walk(target)
		case fi.Mode().IsRegular():
			walked = append(walked, target)
			report(target, fi)
		}
	}
}
