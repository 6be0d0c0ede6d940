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
// path.
func DiskUsage(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}
