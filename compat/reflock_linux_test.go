//go:build linux

package compat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLockRefDir: the reference's writer locks its LOCK file with an open
// file description lock or with flock(2), depending on its lock library's
// probe; lockRefDir finds either held (ErrMigrate), and while it holds its
// own shared locks a writer of either kind cannot take its lock.
func TestLockRefDir(t *testing.T) {
	dir := t.TempDir()
	if unlock, err := lockRefDir(dir); err != nil {
		t.Fatalf("a directory without a lock file: %v", err)
	} else {
		unlock()
	}
	path := filepath.Join(dir, "LOCK")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ofd := func(f *os.File) error {
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	}
	flock := func(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
	for name, lock := range map[string]func(*os.File) error{"ofd": ofd, "flock": flock} {
		writer := open()
		if err := lock(writer); err != nil {
			t.Fatalf("%s: the writer's lock: %v", name, err)
		}
		if _, err := lockRefDir(dir); !errors.Is(err, ErrMigrate) {
			t.Errorf("%s: beside a writer's lock: %v; want ErrMigrate", name, err)
		}
		writer.Close()
		unlock, err := lockRefDir(dir)
		if err != nil {
			t.Fatalf("%s: after the writer closed: %v", name, err)
		}
		late := open()
		if err := lock(late); err == nil {
			t.Errorf("%s: a writer took its lock during the migration", name)
		}
		late.Close()
		unlock()
	}
}
