package multitree

import (
	"errors"
	"os"
	"testing"
)

// TestLockFileReplacedBeforeFlock: when the lock file is removed and
// created again between lockDir's open and its flock (a failed import gives
// up the lock file it made while another writer starts), the lock taken is
// on a file no other process can find. lockDir must open the path again
// and lock the file it names, so that a second writer is refused.
func TestLockFileReplacedBeforeFlock(t *testing.T) {
	dir := t.TempDir()
	replaced := 0
	lockFileOpened = func(path string) {
		if replaced > 0 {
			return
		}
		replaced++
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Error(err)
		}
	}
	defer func() { lockFileOpened = nil }()
	first, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlockDir(first)
	if replaced != 1 {
		t.Fatalf("the hook replaced the lock file %d times, want 1", replaced)
	}
	second, err := lockDir(dir)
	if err == nil {
		unlockDir(second)
		t.Fatal("a second lockDir took the lock while the first holds it: the first locked a replaced file")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lockDir: %v, want ErrLocked", err)
	}
}
