package wal

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// dirSyncRecorder is the operating system's file system, recording
// the directories that were fsynced.
type dirSyncRecorder struct {
	osFS
	mu     sync.Mutex
	synced map[string]bool
}

func (r *dirSyncRecorder) SyncDir(dir string) error {
	r.mu.Lock()
	r.synced[filepath.Clean(dir)] = true
	r.mu.Unlock()
	return r.osFS.SyncDir(dir)
}

// TestOpenCreatesParentsDurably: Open creates a missing log
// directory "and its entry in the parent durable, before any record in it
// can be acknowledged" (log.go, create): when several levels are missing,
// each new directory's parent is fsynced, so that a power loss cannot take
// the tree, acknowledged records included.
func TestOpenCreatesParentsDurably(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "wal")
	rec := &dirSyncRecorder{synced: map[string]bool{}}
	l, err := Open(dir, Options{fs: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(Entry{Version: 1}); err != nil { // acknowledged: durable under SyncEveryCommit
		t.Fatal(err)
	}
	mustClose(t, l)
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	// every directory that Open created must have its entry made durable:
	// root (holds a), a (holds b), b (holds wal)
	for _, d := range []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		if !rec.synced[d] {
			t.Errorf("Open created %s's child directory but never fsynced %s (synced: %v)", d, d, rec.synced)
		}
	}
}
