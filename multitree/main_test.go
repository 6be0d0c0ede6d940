package multitree

import (
	"flag"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

var fullRun = flag.Bool("multitree.fullcrash", false, "run the crash tests at their largest size, even with -short (as MEMIAVL_FULL=1)")

// crashSize returns the size of a crash campaign: full with
// -multitree.fullcrash or MEMIAVL_FULL=1 (testutil.Full), short under
// -short, plain otherwise.
func crashSize(full, plain, short int) int { return testutil.Size(*fullRun, full, plain, short) }
