package multitree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

// tearLogTail appends the start of a record cut short (a torn tail) to the
// newest log segment of dir.
func tearLogTail(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	path := filepath.Join(dir, walDirName, names[len(names)-1])
	var frame [12 + 100]byte
	binary.LittleEndian.PutUint32(frame[0:4], 1000)
	binary.LittleEndian.PutUint32(frame[4:8], crc32.Checksum(frame[0:4], crc32.MakeTable(crc32.Castagnoli)))
	for i := 12; i < len(frame); i++ {
		frame[i] = byte(i)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(frame[:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestReadOnlyBesideRestartCuttingTornTail: a writer restarting after
// a crash cuts the torn tail of the log in place; read-only opens beside it
// must succeed or fail with ErrBusy.
func TestReadOnlyBesideRestartCuttingTornTail(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: stressStores, SnapshotInterval: -1}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 1500; v++ {
		if err := db.ApplyChangeSets(stressBlock(v)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		bad  []error
		oks  atomic.Int64
		fail atomic.Int64
	)
	for i := 0; i < 40 && len(bad) == 0; i++ {
		tearLogTail(t, dir)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					var err error
					if g == 0 {
						var ro *DB
						if ro, err = Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheckNone}); err == nil {
							ro.Close()
						}
					} else {
						_, err = LatestVersion(dir)
					}
					if err == nil {
						oks.Add(1)
						continue
					}
					if g == 1 {
						err = fmt.Errorf("LatestVersion: %w", err)
					}
					fail.Add(1)
					if !errors.Is(err, ErrBusy) {
						mu.Lock()
						bad = append(bad, err)
						mu.Unlock()
						return
					}
				}
			}()
		}
		w, err := Open(dir, Options{SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
	}
	t.Logf("%d opens, %d failed", oks.Load(), fail.Load())
	for _, err := range bad {
		t.Errorf("read-only open beside a writer's restart: %v", err)
	}
}
