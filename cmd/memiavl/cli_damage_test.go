package main

// The command-line tool on damaged or odd directories and bad flags: never
// a panic, a clear failure, and verify, dump and wal dump change nothing.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// runChecked runs the built binary and returns its exit code and output, failing
// the test on a Go panic or runtime error in the output.
func runChecked(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	bin := buildBinary(t)
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := exitCode(cmd.Run())
	all := out.String() + errb.String()
	for _, bad := range []string{"panic:", "goroutine ", "runtime error", "[signal "} {
		if strings.Contains(all, bad) {
			t.Fatalf("memiavl %v: %q in the output (exit %d):\n%s", args, bad, code, all)
		}
	}
	return code, out.String(), errb.String()
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	sort.Strings(segs)
	return segs
}

// TestCLIDamageSweep damages a copy of a database in many ways and runs
// verify and dump on it: never a panic, never a changed directory, verify
// never exits 0 on damage it must find, and every failure exits 1 with a
// message.
func TestCLIDamageSweep(t *testing.T) {
	base := t.TempDir()
	makeDB(t, base, 0.01, 30, 10, 20)
	os.Remove(filepath.Join(base, "LOCK"))
	s20 := snapshotDirName(20)
	segs := segmentFiles(t, base)
	if len(segs) < 3 {
		t.Fatalf("segments %v", segs)
	}
	last := filepath.Base(segs[len(segs)-1])
	mid := filepath.Base(segs[1])
	write := func(rel string, b []byte) func(string) error {
		return func(d string) error { return os.WriteFile(filepath.Join(d, rel), b, 0o644) }
	}
	trunc := func(rel string, n int64) func(string) error {
		return func(d string) error { return os.Truncate(filepath.Join(d, rel), n) }
	}
	flip := func(rel string, frac int64) func(string) error {
		return func(d string) error {
			p := filepath.Join(d, rel)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			i := int64(len(b)) * frac / 100
			if i >= int64(len(b)) {
				i = int64(len(b)) - 1
			}
			b[i] ^= 0x10
			return os.WriteFile(p, b, 0o644)
		}
	}
	rm := func(rel string) func(string) error {
		return func(d string) error { return os.RemoveAll(filepath.Join(d, rel)) }
	}
	cases := []struct {
		name        string
		damage      func(string) error
		verifyFails bool
	}{
		{"none", func(string) error { return nil }, false},
		{"rm-current", rm("current"), true},
		{"empty-current", write("current", nil), true},
		{"garbage-current", write("current", []byte("PCTMxxxxxxxxxxxx")), true},
		{"current-dir", func(d string) error {
			os.Remove(filepath.Join(d, "current"))
			return os.Mkdir(filepath.Join(d, "current"), 0o755)
		}, true},
		{"rm-wal", rm("wal"), true},
		{"wal-file", func(d string) error {
			os.RemoveAll(filepath.Join(d, "wal"))
			return os.WriteFile(filepath.Join(d, "wal"), []byte("x"), 0o644)
		}, true},
		{"rm-mid-segment", rm(filepath.Join("wal", mid)), true},
		{"flip-last-segment", flip(filepath.Join("wal", last), 30), true},
		{"flip-mid-segment", flip(filepath.Join("wal", mid), 50), true},
		{"trunc-mid-segment", trunc(filepath.Join("wal", mid), 1000), true},
		{"trunc-last-segment-header", trunc(filepath.Join("wal", last), 10), true},
		{"rm-current-snapshot", rm(s20), true},
		{"rm-metadata", rm(filepath.Join(s20, "metadata")), true},
		{"trunc-metadata", trunc(filepath.Join(s20, "metadata"), 20), true},
		{"flip-metadata", flip(filepath.Join(s20, "metadata"), 50), true},
		{"rm-store", rm(filepath.Join(s20, "s-bank")), true},
	}
	for _, f := range []string{"leaves", "branches", "kvs", "index", "lookup", "meta"} {
		rel := filepath.Join(s20, "s-bank", f)
		cases = append(cases,
			struct {
				name        string
				damage      func(string) error
				verifyFails bool
			}{"rm-" + f, rm(rel), true},
			struct {
				name        string
				damage      func(string) error
				verifyFails bool
			}{"trunc-" + f, trunc(rel, 10), true},
			struct {
				name        string
				damage      func(string) error
				verifyFails bool
			}{"flip-start-" + f, flip(rel, 0), true},
			struct {
				name        string
				damage      func(string) error
				verifyFails bool
			}{"flip-mid-" + f, flip(rel, 50), true},
			struct {
				name        string
				damage      func(string) error
				verifyFails bool
			}{"flip-end-" + f, flip(rel, 100), true},
		)
	}
	for i, c := range cases {
		if testing.Short() && i%3 != 0 {
			continue // a third of the cases, the intact database first
		}
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			copyDir(t, base, dir)
			if err := c.damage(dir); err != nil {
				t.Fatal(err)
			}
			before := testutil.DirDigest(t, dir)
			for _, args := range [][]string{{"verify", dir}, {"verify", "--json", dir}, {"dump", dir}, {"dump", "--json", dir},
				{"dump", "--version", "15", dir}, {"wal", "dump", dir}} {
				code, out, errs := runChecked(t, args...)
				if code != 0 && (code != exitFailure || strings.TrimSpace(errs) == "") {
					t.Errorf("memiavl %v: exit %d, stderr %q", args, code, errs)
				}
				if args[0] == "verify" && c.verifyFails && code == 0 {
					t.Errorf("memiavl %v: exit 0 on damage\n%s", args, out)
				}
				if args[0] == "verify" && !c.verifyFails && code != 0 {
					t.Errorf("memiavl %v: exit %d on an intact database: %s", args, code, errs)
				}
				if after := testutil.DirDigest(t, dir); after != before {
					t.Fatalf("memiavl %v changed the directory", args)
				}
			}
		})
	}
}

// TestCLIBadArgs: wrong flags and values exit 2 (usage) or 1 with a
// message, never a panic, and leave the database as it was.
func TestCLIBadArgs(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 6)
	os.Remove(filepath.Join(dir, "LOCK"))
	file := filepath.Join(t.TempDir(), "afile")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := t.TempDir()
	stream := filepath.Join(t.TempDir(), "stream.bin")
	mustCLI(t, "export", dir, stream)
	before := testutil.DirDigest(t, dir)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"dump", "--version", "-1", dir}, exitUsage},
		{[]string{"dump", "--version", "13", dir}, exitFailure},
		{[]string{"dump", "--version", "9223372036854775807", dir}, exitFailure},
		{[]string{"dump", "--version", "99999999999999999999", dir}, exitUsage},
		{[]string{"dump", "--version", "abc", dir}, exitUsage},
		{[]string{"dump", empty}, exitFailure},
		{[]string{"dump", file}, exitFailure},
		{[]string{"verify", empty}, exitFailure},
		{[]string{"verify", file}, exitFailure},
		{[]string{"verify", filepath.Join(empty, "nope")}, exitFailure},
		{[]string{"wal", "dump", "--from", "-5", dir}, -1},
		{[]string{"wal", "dump", "--from", "10", "--to", "5", dir}, -1},
		{[]string{"wal", "dump", "--from", "100", dir}, -1},
		{[]string{"wal", "dump", "--to", "9223372036854775807", dir}, -1},
		{[]string{"wal", "dump", empty}, exitFailure},
		{[]string{"wal", "dump", file}, exitFailure},
		{[]string{"export", "--height", "-1", dir, filepath.Join(empty, "x")}, exitUsage},
		{[]string{"export", "--height", "13", dir, filepath.Join(empty, "x")}, exitFailure},
		{[]string{"export", dir, filepath.Join(empty, "nodir", "x")}, exitFailure},
		{[]string{"rewrite-snapshot", "--progress", "none", "--version", "13", dir}, exitFailure},
		{[]string{"rewrite-snapshot", "--progress", "none", "--version", "-2", dir}, exitUsage},
		{[]string{"rewrite-snapshot", "--progress", "none", "--keep-recent", "-1", dir}, exitUsage},
		{[]string{"import", "--height", "5", filepath.Join(empty, "nofile"), filepath.Join(empty, "o")}, exitFailure},
		{[]string{"import", "--height", "5", file, filepath.Join(empty, "o")}, exitFailure},
		{[]string{"import", "--height", "5", empty, filepath.Join(empty, "o")}, exitFailure},
		{[]string{"import", "--height", "9223372036854775807", stream, filepath.Join(empty, "o")}, exitUsage},
		{[]string{"import-iavl", file, filepath.Join(empty, "o")}, exitFailure},
		{[]string{"import-iavl", "--height", "-1", empty, filepath.Join(empty, "o")}, exitUsage},
		{[]string{"import-memiavl", empty, filepath.Join(filepath.Dir(empty), "o-memiavl")}, exitFailure},
		{[]string{"bench", "--blocks", "3", "--scale", "0.01", "--async-buffer", "70000"}, exitUsage},
		{[]string{"bench", "--blocks", "3", "--scale", "0.01", "--async-buffer", "-1"}, exitUsage},
		{[]string{"bench", "--blocks", "3", "--scale", "0.01", "--snapshot-interval", "0"}, exitUsage},
		{[]string{"bench", "--blocks", "3", "--scale", "0.01", "--sync", "sometimes"}, exitUsage},
		{[]string{"bench", "--blocks", "3", "--scale", "0.01", "--dir", dir}, exitFailure},
		{[]string{"bench", "--blocks", "3", "--scale", "0.01", "--dir", file}, exitFailure},
		{[]string{"import", "--height", "5", file, file}, exitFailure},
		{[]string{"import-memiavl", dir, filepath.Join(empty, "o")}, exitFailure},
	} {
		code, out, errs := runChecked(t, c.args...)
		switch {
		case c.code == -1 && code != 0 && code != exitFailure && code != exitUsage:
			t.Errorf("memiavl %v: exit %d", c.args, code)
		case c.code >= 0 && code != c.code:
			t.Errorf("memiavl %v: exit %d, want %d\nstdout %q\nstderr %q", c.args, code, c.code, out, errs)
		}
		if code != 0 && strings.TrimSpace(errs) == "" {
			t.Errorf("memiavl %v: exit %d without a message", c.args, code)
		}
		// a message that names the problem, not a system call's
		if code != 0 && (strings.Contains(errs, ": not a directory") || strings.Contains(errs, "readlink")) {
			t.Errorf("memiavl %v: a system call's error for a message: %s", c.args, errs)
		}
		if c.args[0] == "rewrite-snapshot" {
			os.Remove(filepath.Join(dir, "LOCK")) // a writer's open takes the lock file
		}
		if testutil.DirDigest(t, dir) != before {
			t.Fatalf("memiavl %v changed the database", c.args)
		}
	}
}
