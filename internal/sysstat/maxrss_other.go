//go:build !darwin

package sysstat

// maxrssUnit is the unit of getrusage's maxrss: kilobytes on Linux and the
// BSDs.
const maxrssUnit = 1024
