// Package compat adapts the database to the Cosmos SDK's store interfaces
// (cosmossdk.io/store v1.1.x, SDK v0.50): MultiStore is a drop-in
// types.CommitMultiStore in place of rootmulti.Store, TreeStore the
// CommitKVStore of one module store, and Config the [memiavl] section of
// app.toml. SetupMemIAVL (baseapp.go) installs the multistore in a BaseApp.
//
// For the same blocks the app hashes, query results and ICS23 proofs are
// byte-identical to rootmulti's over cosmos/iavl, so a chain can switch
// stores without changing its app hash.
//
// # Reads and writes
//
// The mounted IAVL stores read the database's working trees directly. Their
// writes are buffered per store and applied through the database, which logs
// each block's changes: all stores' buffers at once, in parallel per store,
// by WorkingHash and Commit, and one store's buffer before any read of that
// store, so reads see every earlier write. Cache
// branches (CacheMultiStore) are the SDK's cachemulti and cachekv over them.
// Historical branches (CacheMultiStoreWithVersion) and queries read committed
// versions through database views kept in a small cache; see views.go for
// how their lifetime is bounded without finalizers.
//
// # Lifetime of returned slices
//
// Unless Config.ZeroCopy is set, no key or value returned by a store is a
// slice of a memory map: values read from a snapshot are copied, iterators
// copy their keys and values. With ZeroCopy, reads of the working state may
// return slices of the current snapshot's memory map; they must not be kept
// past the block, since the snapshot is unmapped after the next background
// rewrite replaces it.
package compat
