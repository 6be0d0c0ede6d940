package osfile

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestExchangeDirs: the two directories trade places in one call, or the
// call fails with an error that says the file system cannot (the callers
// then swap by two renames) and changes nothing.
func TestExchangeDirs(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "from-"+filepath.Base(d)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := ExchangeDirs(a, b)
	unsupported := errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOTSUP)
	want := map[string]string{a: "from-b", b: "from-a"}
	switch {
	case err == nil:
	case unsupported:
		t.Logf("the file system cannot exchange: %v", err)
		want = map[string]string{a: "from-a", b: "from-b"}
	default:
		t.Fatal(err)
	}
	for d, name := range want {
		if _, err := os.Stat(filepath.Join(d, name)); err != nil {
			t.Errorf("%s after the exchange: %v", d, err)
		}
	}
	// a missing side is an error, not a rename
	if err := ExchangeDirs(a, filepath.Join(root, "missing")); err == nil {
		t.Error("exchange with a missing directory succeeded")
	}
	if _, err := os.Stat(a); err != nil {
		t.Errorf("a failed exchange moved %s: %v", a, err)
	}
}

// TestReadRegular: a regular file is read whole within its limit; one over
// it, a missing one, and anything but a regular file (a FIFO, without
// blocking) fail with errors that say which.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(file, 5); err != nil || string(b) != "12345" {
		t.Fatalf("at its limit: %q, %v", b, err)
	}
	if b, err := ReadRegular(file, -1); err != nil || string(b) != "12345" {
		t.Fatalf("unbounded: %q, %v", b, err)
	}
	if _, err := ReadRegular(file, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over its limit: %v", err)
	}
	if _, err := ReadRegular(filepath.Join(dir, "missing"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := ReadRegular(dir, 5); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadRegular(fifo, 5); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ReadRegular of a FIFO blocks")
	}
}

// TestReadRegularSocket: a Unix socket in place of the file is refused
// with ErrNotRegular, as a FIFO is (open(2) of a socket fails otherwise).
func TestReadRegularSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "osfile") // short: a socket path is at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	if _, err := ReadRegular(path, 5); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("socket: %v, want ErrNotRegular", err)
	}
}
