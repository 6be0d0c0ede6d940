package compat

import (
	"cosmossdk.io/log"
	"github.com/cosmos/cosmos-sdk/baseapp"
)

// This file is the only one of the package that depends on the Cosmos SDK
// module (github.com/cosmos/cosmos-sdk); the rest needs only
// cosmossdk.io/store.

// SetupMemIAVL returns a BaseApp option that replaces the app's commit
// multistore (rootmulti) by a MultiStore on DBDir(homePath) when cfg.Enable
// is set, and does nothing otherwise. It panics on an invalid cfg, as BaseApp
// options report errors. Pass it before the options that configure the
// multistore (pruning, caches), since those apply to the store present when
// they run; the IAVL-specific ones are no-ops on MultiStore anyway.
//
//	cfg, err := compat.ConfigFromAppOptions(appOpts)
//	...
//	baseAppOptions = append([]func(*baseapp.BaseApp){compat.SetupMemIAVL(logger, homePath, cfg)}, baseAppOptions...)
//
// BaseApp.Close does not close its multistore: the app's Close should close
// it (it implements io.Closer) so that an asynchronous log is flushed.
func SetupMemIAVL(logger log.Logger, homePath string, cfg Config) func(*baseapp.BaseApp) {
	return func(bapp *baseapp.BaseApp) {
		if !cfg.Enable {
			return
		}
		if logger != nil {
			logger = logger.With("module", "memiavl")
		}
		ms, err := NewMultiStore(DBDir(homePath), logger, cfg)
		if err != nil {
			panic(err)
		}
		bapp.SetCMS(ms)
	}
}
