package snapshot

import (
	"fmt"
	"testing"
)

// TestSyncGroupAddNil: SyncGroup.Add of a nil file is an error, as the
// package's other nil arguments are (TestEdgeNilArguments), not a panic, on
// an open group and on a synced one, and the group stays usable.
func TestSyncGroupAddNil(t *testing.T) {
	for _, synced := range []bool{false, true} {
		g := &SyncGroup{}
		if synced {
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
					t.Errorf("synced=%v: Add(nil) panicked: %v", synced, r)
				}
			}()
			err = g.Add(nil)
			if err == nil {
				t.Errorf("synced=%v: Add(nil) accepted", synced)
			}
		}()
		if !synced {
			if err := g.Sync(); err != nil {
				t.Errorf("Sync after a refused Add(nil): %v", err)
			}
		}
	}
}
