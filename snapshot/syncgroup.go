package snapshot

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// SyncGroup gathers the fsyncs of several snapshot writes so that they run
// at once, concurrently, when all the writes have finished (see
// Writer.DeferSync). A Writer's Finish makes its snapshot durable with a
// chain of fsyncs that wait on each other: the data files, meta, the
// directory, then its parent. Each waits for a journal commit of its own,
// and a database that writes one snapshot per store pays that chain once
// per store. Issued together, the fsyncs share the journal's commits.
//
// A snapshot finished into a group is not durable until Sync returns nil;
// its directory must stay out of reach (inside a temporary directory that
// is renamed into place after Sync) until then. Sync or Close must be
// called, to close the files the group holds. A SyncGroup is safe for
// concurrent use by the writers that finish into it.
type SyncGroup struct {
	mu    sync.Mutex
	files []groupFile
	early []error // of the fsyncs run early to bound the open files
	done  bool
	// synced is set by Sync, with its outcome in result, which later
	// calls return
	synced bool
	result error
}

// groupFile is a file of a SyncGroup and the path its errors name.
type groupFile struct {
	f    *os.File
	name string
	dir  bool // synced at Sync only, after every entry made in it
}

// syncGroupParallel bounds the fsyncs Sync runs at once.
const syncGroupParallel = 16

// syncGroupMaxOpen bounds the files a group holds open (seven per snapshot):
// adding one more syncs and closes those held first, so that a database of
// many stores does not run out of descriptors. A variable for tests.
var syncGroupMaxOpen = 256

// fsyncFile is the fsync of Sync and Finish; tests replace it to fail.
var fsyncFile = (*os.File).Sync

// add hands f to the group, which closes it; errors name it as name. It
// closes f and returns ErrClosed after Sync or Close.
func (g *SyncGroup) add(f *os.File, name string, dir bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		_ = f.Close()
		return fmt.Errorf("%w: the sync group has synced or closed", ErrClosed)
	}
	if len(g.files) >= syncGroupMaxOpen {
		// synced under the lock: the other writers wait, as they
		// would for the descriptors. Directories stay for Sync: entries
		// made in them later (the renames of snapshots finished after
		// this) must be durable too.
		var flush, keep []groupFile
		for _, gf := range g.files {
			if gf.dir {
				keep = append(keep, gf)
			} else {
				flush = append(flush, gf)
			}
		}
		if err := syncAll(flush); err != nil {
			g.early = append(g.early, err)
		}
		g.files = keep
	}
	g.files = append(g.files, groupFile{f: f, name: name, dir: dir})
	return nil
}

// AddDir opens the directory dir for Sync: its entries become durable with
// the group, for example the rename of a snapshot into it.
func (g *SyncGroup) AddDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return g.add(d, dir, true)
}

// addFinishedDir is AddDir for a directory that gets no further entries
// (a finished snapshot's own): the early flush may sync it with the files.
func (g *SyncGroup) addFinishedDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return g.add(d, dir, false)
}

// Add hands the open file f to the group, which syncs and closes it: a
// file written beside the snapshots that becomes durable with them. After
// Sync or Close it closes f and returns an error wrapping ErrClosed.
func (g *SyncGroup) Add(f *os.File) error {
	if f == nil {
		return errors.New("snapshot: SyncGroup.Add of a nil file")
	}
	return g.add(f, f.Name(), false)
}

// Sync fsyncs every file and directory of the group concurrently, closes
// them and returns the errors, each naming its path. Later calls return
// the same outcome (a failed group never becomes durable by retrying),
// also calls beside it on other goroutines, which wait for it, and a call
// after Close an error wrapping ErrClosed; Close after Sync does nothing.
func (g *SyncGroup) Sync() error {
	// the files are taken and the outcome recorded in one critical
	// section: a concurrent Sync must not find the group ended but not
	// yet synced, which reads as closed
	g.mu.Lock()
	defer g.mu.Unlock()
	files, early := g.takeLocked()
	if files == nil {
		if g.synced {
			return g.result
		}
		return fmt.Errorf("%w: the sync group was closed without syncing", ErrClosed)
	}
	g.synced = true
	g.result = errors.Join(errors.Join(early...), syncAll(files))
	return g.result
}

// syncAll fsyncs and closes files concurrently and returns the errors.
func syncAll(files []groupFile) error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	sem := make(chan struct{}, syncGroupParallel)
	for i, gf := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fsyncFile(gf.f); err != nil {
				errs[i] = fmt.Errorf("snapshot: sync %s: %w", gf.name, err)
			}
			if err := gf.f.Close(); err != nil && errs[i] == nil {
				errs[i] = fmt.Errorf("snapshot: close %s: %w", gf.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes the group's files without syncing them, after a failure
// that abandons the snapshots. It does nothing after Sync.
func (g *SyncGroup) Close() error {
	var errs []error
	files, _ := g.take()
	for _, gf := range files {
		if err := gf.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// take ends the group and returns its files, nil if it had ended, and the
// errors of its early fsyncs.
func (g *SyncGroup) take() ([]groupFile, []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeLocked()
}

// takeLocked is take with g.mu held.
func (g *SyncGroup) takeLocked() ([]groupFile, []error) {
	if g.done {
		return nil, nil
	}
	g.done = true
	files := g.files
	g.files = nil
	if files == nil {
		files = []groupFile{}
	}
	return files, g.early
}
