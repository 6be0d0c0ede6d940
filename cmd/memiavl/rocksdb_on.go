//go:build rocksdb

package main

// rocksdbBuilt tells whether cosmos-db's rocksdb backend is compiled in
// (the rocksdb build tag).
const rocksdbBuilt = true
