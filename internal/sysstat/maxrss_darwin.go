package sysstat

// maxrssUnit is the unit of getrusage's maxrss: bytes on macOS.
const maxrssUnit = 1
