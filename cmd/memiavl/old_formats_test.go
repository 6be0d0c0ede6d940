package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

const oldFmtFixture = "../../testdata/multitree-v1"

func oldFmtCopy(t *testing.T, old bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	copyDir(t, oldFmtFixture, dir)
	if old {
		testutil.SnapshotsToFormat1(t, dir)
	}
	return dir
}

var oldFmtSizes = regexp.MustCompile(`"(snapshot_bytes|disk_bytes|wal_bytes|dir)":\s*("[^"]*"|\d+)|/tmp/\S+| in [0-9.]+s|[0-9.]+ [KMG]?i?B\b`)

// oldFmtRun runs every read-only command, then rewrite-snapshot, and returns
// their outputs with sizes and paths taken out.
func oldFmtRun(t *testing.T, dir string) []string {
	t.Helper()
	var outs []string
	add := func(s string) {
		outs = append(outs, oldFmtSizes.ReplaceAllString(strings.ReplaceAll(s, dir, "DIR"), ""))
	}
	for v := 0; v <= 12; v++ {
		args := []string{"dump", "--json", dir}
		if v > 0 {
			args = []string{"dump", "--json", "--version", fmt.Sprint(v), dir}
		}
		code, out, errs := cli(t, args...)
		add(fmt.Sprintf("dump %d: %d %s %s", v, code, out, errs))
	}
	add(mustCLI(t, "verify", dir))
	add(mustCLI(t, "wal", "dump", "--pairs", dir))
	add(mustCLI(t, "wal", "dump", "--json", dir))
	for _, h := range []string{"12", "10", "7", "5"} {
		file := filepath.Join(t.TempDir(), "s.bin")
		mustCLI(t, "export", "--height", h, dir, file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		add(fmt.Sprintf("export %s: %x", h, b))
		dst := filepath.Join(t.TempDir(), "imp")
		add(mustCLI(t, "import", "--height", h, file, dst))
		mustCLI(t, "verify", dst)
	}
	mustCLI(t, "rewrite-snapshot", dir)
	add(mustCLI(t, "verify", dir))
	var res DumpResult
	if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res); err != nil {
		t.Fatal(err)
	}
	add(fmt.Sprintf("after rewrite: %d %s %v", res.Version, res.AppHash, res.Snapshots))
	return outs
}

func TestOldFormatsCLI(t *testing.T) {
	newer := oldFmtRun(t, oldFmtCopy(t, false))
	older := oldFmtRun(t, oldFmtCopy(t, true))
	for i := range newer {
		if newer[i] != older[i] {
			t.Errorf("output %d differs between snapshot formats:\nformat 2: %.600s\nformat 1: %.600s", i, newer[i], older[i])
		}
	}
}
