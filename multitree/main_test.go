package multitree

import (
	"flag"
	"os"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestMain runs a plain go test as one with -short (testutil.QuickByDefault).
func TestMain(m *testing.M) {
	testutil.QuickByDefault()
	os.Exit(m.Run())
}

var fullRun = flag.Bool("multitree.fullcrash", false, "run the crash tests at their largest size, even with -short (as MEMIAVL_FULL=1)")

// crashSize returns the size of a crash campaign: full with
// -multitree.fullcrash or MEMIAVL_FULL=1 (testutil.Full), short under
// -short, plain otherwise.
func crashSize(full, plain, short int) int { return testutil.Size(*fullRun, full, plain, short) }
