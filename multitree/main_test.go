package multitree

import "flag"

var fullRun = flag.Bool("multitree.fullcrash", false, "run the crash test at full size even with -short")
