// Package testutil holds helpers shared by the tests of several packages:
// seeded randomness that reports its seed, generators of keys and values
// shaped like a chain's state, damage to a file's bytes, and measures of the
// heap and of goroutines for the tests of bounded memory and leaks.
package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seed returns the seed for a randomized test: MEMIAVL_SEED when set, else a
// fresh one. The seed is logged so a failure can be replayed with
// MEMIAVL_SEED=<seed>.
func Seed(t testing.TB) int64 {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv("MEMIAVL_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad MEMIAVL_SEED %q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with MEMIAVL_SEED=%d)", seed, seed)
	return seed
}

// Rand returns a seeded source, logging the seed (see Seed).
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewSource(Seed(t)))
}

// KeyGen makes keys of 1 to 64 bytes that share prefixes, like the prefixed
// keys of Cosmos SDK module stores.
type KeyGen struct {
	r        *rand.Rand
	prefixes [][]byte
}

// NewKeyGen returns a key generator drawing from r.
func NewKeyGen(r *rand.Rand) *KeyGen {
	g := &KeyGen{r: r}
	for i := 0; i < 16; i++ {
		p := make([]byte, 1+r.Intn(24))
		r.Read(p)
		if i < 4 {
			p = p[:1]
		}
		g.prefixes = append(g.prefixes, p)
	}
	return g
}

// Key returns a new random key of 1 to 64 bytes.
func (g *KeyGen) Key() []byte {
	p := g.prefixes[g.r.Intn(len(g.prefixes))]
	n := 1 + g.r.Intn(64)
	k := make([]byte, n)
	copy(k, p)
	if n > len(p) {
		g.r.Read(k[len(p):])
	}
	// Some keys get a small alphabet so that keys often share long prefixes.
	if g.r.Intn(4) == 0 {
		for i := len(p); i < n; i++ {
			k[i] = 'a' + k[i]%3
		}
	}
	return k
}

// Value returns a random value of 0 to maxLen bytes; one in ten is empty.
func (g *KeyGen) Value(maxLen int) []byte {
	if g.r.Intn(10) == 0 {
		return []byte{}
	}
	v := make([]byte, g.r.Intn(maxLen+1))
	g.r.Read(v)
	return v
}

// DamageByte flips bits of the byte at off in the file at path, in place,
// so that mappings of the file see the change, and returns the function
// that restores it.
func DamageByte(t testing.TB, path string, off int64) (restore func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0x24}, off); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// Chdir makes dir the working directory, failing t on an error, and returns
// a function that restores the previous one; the test's cleanup restores it
// too if the function was not called. Tests that use it must not run in
// parallel.
func Chdir(t testing.TB, dir string) (restore func()) {
	t.Helper()
	prev, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		if err := os.Chdir(prev); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// CopyDir copies the directory tree src to dst (files, directories and
// symbolic links, which are copied as links), failing t on an error.
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", src, dst, err)
	}
}

// DirDigest hashes every entry under dir: names, types, modes, sizes and
// contents of regular files, symlink targets.
func DirDigest(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(h, "-> %s\n", l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ReadAppHashRecord reads a file of two lines, "version <n>" and
// "apphash <hex>" (the record of a fixture's latest version and app hash).
func ReadAppHashRecord(t testing.TB, path string) (int64, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	var h []byte
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, val, _ := strings.Cut(line, " ")
		switch k {
		case "version":
			v, err = strconv.ParseInt(val, 10, 64)
		case "apphash":
			h, err = hex.DecodeString(val)
		}
		if err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
	}
	if v <= 0 || len(h) != 32 {
		t.Fatalf("%s: no version or app hash", path)
	}
	return v, h
}

// Full reports whether the tests run at their largest size: MEMIAVL_FULL=1
// in the environment (FULL=1 of scripts/test.sh sets it). Without it, a
// run with -short=false (or MEMIAVL_LONG=1, see QuickByDefault) takes the
// middle size of the largest campaigns; -short, and a plain go test, the
// quick slice.
func Full() bool { return os.Getenv("MEMIAVL_FULL") == "1" }

// Size returns the size of a test that has three: full when fullFlag (a
// package's flag asking for the largest size) is set or Full reports
// true, short under -short, plain otherwise.
func Size(fullFlag bool, full, plain, short int) int {
	switch {
	case fullFlag || Full():
		return full
	case testing.Short():
		return short
	}
	return plain
}
