package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestCLIDumpStaleRollbackRecord: a rollback that discarded everything after
// its target and was interrupted before it removed its "rollback" file
// leaves a record whose target is the latest version the files hold, which
// Open takes for finished. dump reports no rollback there, as verify does.
func TestCLIDumpStaleRollbackRecord(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 30, 10, 20)
	os.Remove(filepath.Join(dir, "LOCK"))
	writeUnfinishedRollback(t, dir, 30) // the latest version: nothing left to discard

	var vj verifyJSON
	out := mustCLI(t, "verify", "--json", dir)
	mustOK(t, json.Unmarshal([]byte(out), &vj))
	var d DumpResult
	dout := mustCLI(t, "dump", "--json", dir)
	mustOK(t, json.Unmarshal([]byte(dout), &d))
	if d.RollbackTo != vj.RollbackTo {
		t.Errorf("dump --json rollback_to %d, verify --json rollback_to %d (the open took the record for finished)\ndump: %s\nverify: %s",
			d.RollbackTo, vj.RollbackTo, dout, out)
	}
}
