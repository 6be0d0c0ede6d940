package multitree

import (
	"context"
	"errors"
	"testing"
)

// TestReadOnlyGivesUpBusyBesidePrunes: a read-only open (and Verify, which
// opens the same way) beside a writer that, under every attempt, switches
// to a new snapshot and prunes the one the attempt mapped and the log
// after it gives up with ErrBusy, not ErrCorrupt: the replay's "the log
// holds versions ..." is the prune's doing, not damage.
func TestReadOnlyGivesUpBusyBesidePrunes(t *testing.T) {
	for name, read := range map[string]func(dir string) error{
		"open": func(dir string) error {
			db, err := Open(dir, Options{ReadOnly: true})
			if err == nil {
				db.Close()
			}
			return err
		},
		"verify": func(dir string) error {
			_, err := Verify(dir)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := openWithSnapshotAt(t, dir, 3)
			defer db.Close()
			commitN(t, db, 1, 2)
			attempts := 0
			beforeOpenLog = func(d string) {
				if d != dir {
					return
				}
				attempts++
				commitN(t, db, 1, 1)
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
				waitForPrune(t, db)
				commitN(t, db, 1, 1) // its entry starts a segment; the prune removes the older ones
				waitForPrune(t, db)
			}
			defer func() { beforeOpenLog = nil }()
			err := read(dir)
			if !errors.Is(err, ErrBusy) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("beside a writer that pruned under each of %d attempts: %v (want ErrBusy, not ErrCorrupt)", attempts, err)
			}
		})
	}
}
