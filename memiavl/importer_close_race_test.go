package memiavl_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestImporterCloseFromAnotherGoroutine: the Importer doc allows Close
// from another goroutine while one feeds it: Close waits for a running Add
// or Commit, the importer's later calls fail with ErrImport, and the
// partial snapshot (and its temporary directory) is removed, or, when the
// Commit won the race, the committed snapshot stays.
func TestImporterCloseFromAnotherGoroutine(t *testing.T) {
	src, _ := memiavl.New(memiavl.Options{})
	for i := 0; i < 3000; i++ {
		src.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"))
	}
	if _, _, err := src.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	nodes := exportAll(t, src.Export())
	for round := 0; round < 6; round++ {
		parent := t.TempDir()
		dir := filepath.Join(parent, "t")
		im, err := memiavl.NewImporter(dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var feedErr, commitErr error
		committed := false
		wg.Add(2)
		go func() {
			defer wg.Done()
			for _, n := range nodes {
				if feedErr = im.Add(n); feedErr != nil {
					return
				}
				_ = im.Size()
			}
			commitErr = im.Commit()
			committed = commitErr == nil
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < round*200; i++ {
				_ = im.Size()
			}
			if err := im.Close(); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if committed {
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("round %d: committed import lost: %v", round, err)
			}
			continue
		}
		if feedErr == nil && commitErr == nil {
			t.Fatalf("round %d: neither failed nor committed", round)
		}
		if err := feedErr; err != nil && !errors.Is(err, memiavl.ErrImport) {
			t.Fatalf("round %d: Add after Close: %v", round, err)
		}
		ents, _ := os.ReadDir(parent)
		if len(ents) != 0 {
			t.Fatalf("round %d: closed import left %d entries", round, len(ents))
		}
		if err := im.Add(nodes[0]); !errors.Is(err, memiavl.ErrImport) {
			t.Fatalf("round %d: Add after Close: %v", round, err)
		}
	}
}
