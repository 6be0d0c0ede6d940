// Package benchmarks holds go test -bench suites that compare this database with
// cosmos/iavl and the reference memiavl on identical data. It is a separate
// module so that the rivals' dependencies stay out of the main module.
package benchmarks
