package osfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
