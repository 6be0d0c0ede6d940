package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIVerifyStrictUnfinishedRollback: an unfinished rollback is a
// warning of verify, and with --strict a failure ("With --strict, warnings
// (a torn tail, an unfinished rollback) fail the check too, with exit code
// 1", verify --help), with and without --json (which then prints "ok":
// false on stdout). The torn-tail case is checked elsewhere; this is the
// other warning.
func TestCLIVerifyStrictUnfinishedRollback(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12)
	writeUnfinishedRollback(t, dir, 8)
	const warn = "a rollback to version 8 is unfinished"

	// without --strict: a warning, exit 0
	if code, out, errs := cli(t, "verify", dir); code != exitOK || !strings.Contains(out, warn) {
		t.Fatalf("verify of a database with an unfinished rollback: exit %d, want 0 with a warning\n%s%s", code, out, errs)
	}
	// --strict: exit 1, naming the rollback
	code, out, errs := cli(t, "verify", "--strict", dir)
	if code != exitFailure || !strings.Contains(errs, "rollback to version 8 is unfinished") {
		t.Errorf("verify --strict of a database with an unfinished rollback: exit %d, want %d naming the rollback\nstdout %q\nstderr %q",
			code, exitFailure, out, errs)
	}
	// --strict --json: exit 1 and "ok": false on stdout
	code, out, errs = cli(t, "verify", "--strict", "--json", dir)
	var res struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("verify --strict --json: stdout is not JSON (%v): %q", err, out)
	}
	if code != exitFailure || res.OK || !strings.Contains(res.Error, "rollback") {
		t.Errorf("verify --strict --json of a database with an unfinished rollback: exit %d, %+v; want exit %d and ok false\nstderr %q",
			code, res, exitFailure, errs)
	}
}
