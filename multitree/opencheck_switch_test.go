package multitree

import (
	"context"
	"testing"
	"time"
)

// TestOpenCheckOutlivesSwitch: the background check of the opened
// snapshot's checksums (OpenCheckBackground, paced) keeps that snapshot's
// files mapped until it ends, even when a switch to a newer snapshot
// releases the database's own references and the prune removes the
// directory meanwhile: the check of the store after the current one then
// reads the mapping and the check reports the sound files as sound. A check
// that let go of its reference early would find the later store's snapshot
// closed and report a failure (which the next Commit returns too).
func TestOpenCheckOutlivesSwitch(t *testing.T) {
	dir := snapshotOf(t, 2200, "a", "b") // store "a", checked first, takes seconds at the pace below
	if err := func() error {
		db, err := Open(dir, Options{SnapshotInterval: -1, OpenCheck: OpenCheckNone})
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Set("b", []byte("k"), []byte("v")); err != nil {
			return err
		}
		if _, err := db.Commit(); err != nil {
			return err
		}
		return db.RewriteSnapshot(context.Background())
	}(); err != nil {
		t.Fatal(err)
	}
	cur := readCurrentT(t, dir)
	// paced at the lowest rate: the check of "a" takes seconds
	db, err := Open(dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 0, RewriteRateLimit: MinRewriteRateLimit})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx0, cancel0 := context.WithTimeout(context.Background(), time.Millisecond)
	running := db.WaitOpenCheck(ctx0) != nil
	cancel0()
	if err := db.Set("b", []byte("k2"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	// switches the working trees and the readers to a new snapshot and
	// prunes the one the check reads
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := db.WaitOpenCheck(ctx); err != nil {
		t.Fatalf("background check of the sound snapshot %d (running at the switch: %v): %v", cur, running, err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatalf("Commit after the check: %v", err)
	}
}

func readCurrentT(t *testing.T, dir string) int64 {
	t.Helper()
	v, err := readCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
