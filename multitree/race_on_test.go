//go:build race

package multitree

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true
