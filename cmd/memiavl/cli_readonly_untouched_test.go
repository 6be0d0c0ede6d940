package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// dirDigest hashes every path under dir with its mode, size, mtime (ns) and
// content: a read-only command may not change any of them, not even a
// directory's mtime (a file created and removed again).
func dirDigest(t *testing.T, dir string) (string, []string) {
	t.Helper()
	h := sha256.New()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d %d", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			line += " " + hex.EncodeToString(s[:8])
		}
		lines = append(lines, line)
		fmt.Fprintln(h, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), lines
}

// digestDiff lists the lines of a missing from b ("- ") and of b missing
// from a ("+ ").
func digestDiff(a, b []string) string {
	ma := map[string]bool{}
	for _, l := range a {
		ma[l] = true
	}
	mb := map[string]bool{}
	for _, l := range b {
		mb[l] = true
	}
	var out []string
	for _, l := range a {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCLIReadOnlyUntouched: the read-only commands (verify, dump, wal dump,
// export) change no byte, mode or modification time under the database
// directory, on a plain database, one with leftovers of an interrupted
// rewrite, a torn log tail, an unfinished rollback or no version, with and
// without a writer holding the lock; and rewrite-snapshot and import
// beside a writer refuse, naming the lock, and change nothing.
func TestCLIReadOnlyUntouched(t *testing.T) {
	out := t.TempDir()
	scen := map[string]func(t *testing.T) string{
		"plain": func(t *testing.T) string {
			dir := t.TempDir()
			makeDB(t, dir, 0.01, 25, 10, 20)
			return dir
		},
		"tmpleftover": func(t *testing.T) string {
			dir := t.TempDir()
			makeDB(t, dir, 0.01, 25, 10)
			copyDir(t, filepath.Join(dir, snapshotDirName(10)), filepath.Join(dir, snapshotDirName(25)+tmpSuffix))
			os.WriteFile(filepath.Join(dir, "current.tmp"), []byte("junk"), 0o644)
			return dir
		},
		"torn": func(t *testing.T) string {
			dir := t.TempDir()
			makeDB(t, dir, 0.01, 25, 10)
			segs := segmentFiles(t, dir)
			fi, _ := os.Stat(segs[len(segs)-1])
			os.Truncate(segs[len(segs)-1], fi.Size()-3)
			return dir
		},
		"rollback": func(t *testing.T) string {
			dir := t.TempDir()
			makeDB(t, dir, 0.01, 25, 10)
			writeUnfinishedRollback(t, dir, 15)
			return dir
		},
		"empty": func(t *testing.T) string { return makeEmptyDB(t) },
	}
	for name, mk := range scen {
		t.Run(name, func(t *testing.T) {
			dir := mk(t)
			for _, writer := range []bool{false, true} {
				var db *multitree.DB
				if writer && name != "rollback" && name != "tmpleftover" && name != "torn" {
					var err error
					db, err = multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
					if err != nil {
						t.Fatal(err)
					}
				}
				before, bl := dirDigest(t, dir)
				for _, args := range [][]string{
					{"verify", dir}, {"verify", "--json", "--strict", dir}, {"dump", dir}, {"dump", "--json", "--version", "12", dir},
					{"wal", "dump", dir}, {"wal", "dump", "--json", "--pairs", dir}, {"wal", "dump", filepath.Join(dir, "wal")},
					{"export", dir, filepath.Join(out, fmt.Sprintf("%s-%v", name, writer))},
				} {
					code, _, errs := runChecked(t, args...)
					after, al := dirDigest(t, dir)
					if after != before {
						t.Errorf("%s writer=%v: memiavl %v (exit %d %s) changed the directory:\n%s", name, writer, args, code, errs, digestDiff(bl, al))
						before, bl = after, al
					}
				}
				if db != nil && name == "plain" {
					stream := filepath.Join(out, fmt.Sprintf("%s-%v", name, writer))
					for _, args := range [][]string{
						{"rewrite-snapshot", "--progress", "none", dir},
						{"rewrite-snapshot", "--progress", "none", "--version", "12", "--rollback", dir},
						{"rewrite-snapshot", "--progress", "none", "--version", "12", "--rollback", "--skip-verify", dir},
						{"import", "--height", "25", stream, dir},
					} {
						code, _, errs := runChecked(t, args...)
						if code != exitFailure || !strings.Contains(errs, "LOCK") {
							t.Errorf("%s: memiavl %v beside a writer process: exit %d %s", name, args, code, errs)
						}
						after, al := dirDigest(t, dir)
						if after != before {
							t.Errorf("%s: memiavl %v beside a writer changed the directory:\n%s", name, args, digestDiff(bl, al))
							before, bl = after, al
						}
					}
				}
				if db != nil {
					db.Close()
				}
			}
		})
	}
}
