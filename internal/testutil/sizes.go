package testutil

import (
	"flag"
	"os"
	"testing"
)

// LongEnv, set to 1, makes the tests of a run without -short take their
// middle size (see QuickByDefault).
const LongEnv = "MEMIAVL_LONG"

// QuickByDefault, called by the TestMain of the packages with long
// campaigns before m.Run, makes a run that does not set -short run as one
// with -short: plain `go test ./...` takes the quick slice, well inside
// go test's default timeout of 10 minutes a package on two processors
// with the packages running side by side. The middle size runs with
// -short=false given explicitly or MEMIAVL_LONG=1 (a -short=false also
// sets MEMIAVL_LONG=1 for the child processes the tests start), the
// largest with MEMIAVL_FULL=1 (Full).
func QuickByDefault() {
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.short" {
			explicit = true
		}
	})
	switch {
	case Full():
	case explicit:
		if !testing.Short() {
			_ = os.Setenv(LongEnv, "1")
		}
	case os.Getenv(LongEnv) == "1":
	default:
		_ = flag.Set("test.short", "true")
	}
}
