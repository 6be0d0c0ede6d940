package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIAfterTornRollback: a database whose rollback to version 5 a power
// loss interrupted inside the cut of the log (the rollback record, and a
// lost page after version 5's record with whole records after it) is at
// version 5, the state a writable open finishes. Every command reads it
// so: dump (text and JSON) and `wal dump` report version 5 and the torn
// tail instead of failing on the lost page as corruption, and verify,
// export and rewrite-snapshot work at version 5.
func TestCLIAfterTornRollback(t *testing.T) {
	orig := filepath.Join(t.TempDir(), "db")
	db, err := multitree.Open(orig, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 12; v++ {
		if err := db.Set("a", []byte(fmt.Sprint("k", v)), make([]byte, 1500)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const target = 5
	testutil.TearRollback(t, orig, target)
	fresh := func() string {
		dir := filepath.Join(t.TempDir(), "db")
		if out, err := exec.Command("cp", "-a", orig, dir).CombinedOutput(); err != nil {
			t.Fatalf("copy: %v %s", err, out)
		}
		return dir
	}

	dir := fresh()
	out := mustCLI(t, "dump", "--json", dir)
	var res DumpResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dump --json: %v\n%s", err, out)
	}
	if res.Version != target || res.WALLast != target || res.WALTornTail == nil {
		t.Errorf("dump: version %d, log to %d, torn tail %v; want %d, %d and the lost page reported", res.Version, res.WALLast, res.WALTornTail, target, target)
	}
	if out := mustCLI(t, "dump", dir); !strings.Contains(out, fmt.Sprintf("version        %d\n", target)) {
		t.Errorf("dump:\n%s", out)
	}
	for _, d := range []string{dir, filepath.Join(dir, "wal")} {
		code, out, errs := cli(t, "wal", "dump", d)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("versions 1..%d", target)) ||
			!strings.Contains(errs, fmt.Sprintf("a rollback to version %d is unfinished", target)) {
			t.Errorf("wal dump %s: exit %d\nstdout:\n%s\nstderr:\n%s", d, code, out, errs)
		}
	}
	if out := mustCLI(t, "verify", dir); !strings.Contains(out, fmt.Sprintf("version    %d\n", target)) {
		t.Errorf("verify:\n%s", out)
	}
	stream := filepath.Join(t.TempDir(), "stream")
	mustCLI(t, "export", dir, stream)
	if _, err := os.Stat(stream); err != nil {
		t.Errorf("export: %v", err)
	}

	dir = fresh()
	mustCLI(t, "rewrite-snapshot", dir)
	if v, err := multitree.LatestVersion(dir); err != nil || v != target {
		t.Errorf("after rewrite-snapshot: latest %d, %v; want %d", v, err, target)
	}
}
