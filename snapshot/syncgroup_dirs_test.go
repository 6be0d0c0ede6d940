package snapshot

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// TestSyncGroupDirAddedFirst: AddDir documents that a directory's
// entries "become durable with the group, for example the rename of a
// snapshot into it", also when the parent directory is added first and
// snapshots are finished into it afterwards: the early fsync of the files
// held once the group holds syncGroupMaxOpen keeps the directory for Sync,
// whose fsync of it comes after every rename.
func TestSyncGroupDirAddedFirst(t *testing.T) {
	defer func(n int) { syncGroupMaxOpen = n }(syncGroupMaxOpen)
	syncGroupMaxOpen = 4
	keys, values := sortedKVs(rand.New(rand.NewSource(9)), 50)
	parent := filepath.Join(t.TempDir(), "parent")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	synced := recordSyncs(t)
	g := &SyncGroup{}
	if err := g.AddDir(parent); err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c"}
	for _, name := range names {
		if err := finishInto(t, g, filepath.Join(parent, name), keys, values); err != nil {
			t.Fatal(err)
		}
	}
	mark := len(synced()) // the last rename into parent is done by now
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	all := synced()
	last := -1
	for i, n := range all {
		if n == filepath.Base(parent) {
			last = i
		}
	}
	if last < mark {
		t.Errorf("the parent directory added to the group was last fsynced at sync #%d, before the rename of %s into it (%d fsyncs had run by then); Sync returned nil", last, names[len(names)-1], mark)
	}
}
