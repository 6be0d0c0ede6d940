package multitree

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestVerifyLogDamage: Verify of a database whose log has a flipped byte
// away from its tail fails with an error wrapping ErrCorrupt, as Open and
// LatestVersion classify the log's damage.
func TestVerifyLogDamage(t *testing.T) {
	dir, _ := verifyDB(t)
	segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if len(segs) == 0 {
		t.Fatal("no log segments")
	}
	seg := segs[0]
	orig, _ := os.ReadFile(seg)
	c := bytes.Clone(orig)
	c[len(c)/3] ^= 1
	os.WriteFile(seg, c, 0o644)

	_, verr := Verify(dir)
	_, oerr := Open(dir, Options{ReadOnly: true})
	_, lerr := LatestVersion(dir)
	t.Logf("Verify: %v\nOpen: %v\nLatestVersion: %v", verr, oerr, lerr)
	if !errors.Is(verr, ErrCorrupt) {
		t.Errorf("Verify of a damaged log: %v, want an error wrapping multitree.ErrCorrupt", verr)
	}
}
