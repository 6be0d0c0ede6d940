package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestVerifyChecksumsReplacedByFIFO: a file its path no longer names is
// checked through the mapping, which is what reads serve (VerifyChecksums),
// also when the path now names a FIFO (or any other non-regular file, which
// the mapped file was not): the intact snapshot passes, and the check
// never blocks on the FIFO.
func TestVerifyChecksumsReplacedByFIFO(t *testing.T) {
	dir := writeHostile(t, 40)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := filepath.Join(dir, FileKVs)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	if err := s.VerifyChecksums(context.Background()); err != nil {
		t.Errorf("VerifyChecksums of an intact mapping whose path now names a FIFO: %v, want nil (checked through the mapping)", err)
	}
}
