package snapshot

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
)

// TestSyncGroupDescriptorBound: the group promises to hold at
// most syncGroupMaxOpen descriptors (so that a database of many stores does
// not run out of them), also with more snapshots than that, each of which
// adds its own directory: a finished snapshot's directory gets no more
// entries, so the early flush may sync it (unlike one added by AddDir).
func TestSyncGroupDescriptorBound(t *testing.T) {
	defer func(n int) { syncGroupMaxOpen = n }(syncGroupMaxOpen)
	syncGroupMaxOpen = 4
	keys, values := sortedKVs(rand.New(rand.NewSource(7)), 20)
	parent := t.TempDir()
	fds := openFDs(t)
	g := &SyncGroup{}
	defer g.Close()
	for i := range 12 {
		name := fmt.Sprintf("s%02d", i)
		if err := finishInto(t, g, filepath.Join(parent, name), keys, values); err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		held := len(g.files)
		g.mu.Unlock()
		if n := openFDs(t); n > fds+syncGroupMaxOpen {
			t.Fatalf("%d descriptors open after finishing %s (the group holds %d), at most %d more than the %d before",
				n, name, held, syncGroupMaxOpen, fds)
		}
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
}
