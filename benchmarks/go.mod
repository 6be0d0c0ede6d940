module github.com/seed-6dfbb450/memiavl/benchmarks

go 1.23

require (
	github.com/seed-6dfbb450/memiavl v0.0.0
	github.com/tidwall/wal v1.1.7
)

require (
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
)

replace github.com/seed-6dfbb450/memiavl => ../
