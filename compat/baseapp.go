package compat

import (
	"errors"

	"cosmossdk.io/log"
	"cosmossdk.io/store/rootmulti"
	"github.com/cosmos/cosmos-sdk/baseapp"
)

// This file is the only one of the package that depends on the Cosmos SDK
// module (github.com/cosmos/cosmos-sdk); the rest needs only
// cosmossdk.io/store.

// SetupMemIAVL returns a BaseApp option that replaces the app's commit
// multistore (rootmulti) by a MultiStore on DBDir(homePath) when cfg.Enable
// is set, and does nothing otherwise. It panics on an invalid cfg, as BaseApp
// options report errors. Pass it before the options that configure the
// multistore, since those apply to the store present when they run; pruning
// options given before it are carried over (MultiStore records them for
// GetPruning), and the IAVL-specific ones are no-ops on MultiStore anyway.
//
//	cfg, err := compat.ConfigFromAppOptions(appOpts)
//	...
//	baseAppOptions = append([]func(*baseapp.BaseApp){compat.SetupMemIAVL(logger, homePath, cfg)}, baseAppOptions...)
//
// It panics after the options that cannot be carried over to it: the
// state-sync snapshot manager (SetSnapshot), which would keep the replaced
// store as its snapshotter and serve no snapshots, and a tracer
// (SetCommitMultiStoreTracer).
//
// When the app's database (application.db) holds rootmulti state and this
// database has no committed version, the load logs an error: the node starts
// from an empty state, which the consensus engine fills by replaying every
// block from genesis. Migrate the state first ('memiavl import-iavl'). When
// this database has versions but application.db a later one (the store was
// disabled for a while), the load logs a warning: the consensus engine
// replays the blocks after this database's height.
//
// BaseApp.Close does not close its multistore: the app's Close should close
// it (it implements io.Closer) so that an asynchronous log is flushed.
func SetupMemIAVL(logger log.Logger, homePath string, cfg Config) func(*baseapp.BaseApp) {
	return func(bapp *baseapp.BaseApp) {
		if !cfg.Enable {
			return
		}
		if bapp.SnapshotManager() != nil {
			panic(errors.New("compat: SetupMemIAVL after SetSnapshot: the snapshot manager would keep the replaced store; pass SetupMemIAVL before the other BaseApp options"))
		}
		prev := bapp.CommitMultiStore()
		if prev != nil && prev.TracingEnabled() {
			panic(errors.New("compat: SetupMemIAVL after SetCommitMultiStoreTracer: the tracer would stay on the replaced store; pass SetupMemIAVL before the other BaseApp options"))
		}
		if logger != nil {
			logger = logger.With("module", "memiavl")
		}
		ms, err := NewMultiStore(DBDir(homePath), logger, cfg)
		if err != nil {
			panic(err)
		}
		if rs, ok := prev.(*rootmulti.Store); ok {
			ms.appDBVersion = appDBVersion(rs)
			// SetPruning given before this option: the SDK validates the
			// options at startup through GetPruning.
			ms.SetPruning(rs.GetPruning())
		}
		bapp.SetCMS(ms)
	}
}

// appDBVersion returns the latest version rootmulti recorded in the app's
// database, 0 when it cannot be read.
func appDBVersion(rs *rootmulti.Store) (v int64) {
	defer func() {
		if recover() != nil { // rootmulti panics on a read error
			v = 0
		}
	}()
	return rs.LatestVersion()
}
