module github.com/seed-6dfbb450/memiavl/benchmarks

go 1.23

require github.com/seed-6dfbb450/memiavl v0.0.0

replace github.com/seed-6dfbb450/memiavl => ../
