package compat

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// Config is the [memiavl] section of app.toml. The zero value is not valid;
// start from DefaultConfig.
type Config struct {
	// Enable replaces the SDK's IAVL store (rootmulti over LevelDB) by this
	// database. The app hash does not change.
	Enable bool `mapstructure:"enable"`
	// SnapshotInterval is how many blocks pass between background snapshot
	// rewrites. A restart replays about this many blocks from the log (plus
	// those committed while a rewrite runs; more after a failed rewrite,
	// which is tried again an interval later).
	// Negative disables background rewrites.
	SnapshotInterval int64 `mapstructure:"snapshot-interval"`
	// SnapshotKeepRecent is how many snapshots older than the current one
	// are kept, with the log after them: historical queries reach back to the
	// oldest kept snapshot, and so does a rollback.
	SnapshotKeepRecent int `mapstructure:"snapshot-keep-recent"`
	// AsyncCommitBuffer is how many blocks' log entries may wait for the
	// background log writer, up to multitree.MaxAsyncCommitBuffer. 0
	// writes each block's entry before Commit returns.
	AsyncCommitBuffer int `mapstructure:"async-commit-buffer"`
	// Fsync is the log's fsync policy: "every-commit", "grouped" or "none".
	// A crash loses nothing committed with "every-commit" and a synchronous
	// log; otherwise the last blocks may be lost and are replayed by the
	// consensus engine on restart.
	Fsync string `mapstructure:"fsync"`
	// ZeroCopy lets reads of the working state return slices into the
	// memory-mapped snapshot instead of copies. Such a slice must not be kept
	// past the block: it is unmapped when the next snapshot replaces the
	// current one. Off by default. Not for a node that serves the gRPC
	// Simulate service (or the REST gateway over it) to others: a
	// simulation's branch of the check state keeps the slices it read, and
	// a simulation that lasts past the next commits (the snapshot replaced
	// and its views released) reads memory unmapped or reused by another
	// mapping: wrong bytes, or a memory fault that ends the process.
	ZeroCopy bool `mapstructure:"zero-copy"`
	// RewriteConcurrency is how many stores a snapshot rewrite writes in
	// parallel; 0 means GOMAXPROCS.
	RewriteConcurrency int `mapstructure:"rewrite-concurrency"`
	// RewriteRateLimit bounds how fast a background snapshot rewrite writes,
	// in bytes per second, leaving the disk to the node's reads and log
	// writes; 0 means no bound, and a bound must be at least
	// multitree.MinRewriteRateLimit. A rewrite writes about the size of
	// the state, which at this pace must take well under snapshot-interval
	// blocks' time.
	RewriteRateLimit int64 `mapstructure:"rewrite-rate-limit"`
	// OpenCheck is how opening the database checks the checksums of the
	// snapshot it maps: "background" (after the store opens; damage stops
	// the node at the next Commit), "sync" (before it opens, reading every
	// snapshot file once) or "none".
	OpenCheck string `mapstructure:"open-check"`
	// QueryViews is how many versions the store keeps open for queries and
	// historical branches (CacheMultiStoreWithVersion); the least recently
	// used one is closed first. A branch whose version has been evicted fails its next read
	// (ErrVersionReleased) as a pruned version does in rootmulti.
	QueryViews int `mapstructure:"query-views"`
}

// Defaults of Config.
const (
	DefaultSnapshotInterval   = multitree.DefaultSnapshotInterval
	DefaultSnapshotKeepRecent = 1
	DefaultFsync              = "every-commit"
	DefaultQueryViews         = 8
	DefaultOpenCheck          = "background"
)

// DBDirName is the database directory under the node's data directory.
const DBDirName = "memiavl.db"

// DBDir returns the database directory of a node home: <home>/data/memiavl.db.
func DBDir(homePath string) string {
	return filepath.Join(homePath, "data", DBDirName)
}

// DefaultConfig returns the default configuration (disabled).
func DefaultConfig() Config {
	return Config{
		SnapshotInterval:   DefaultSnapshotInterval,
		SnapshotKeepRecent: DefaultSnapshotKeepRecent,
		Fsync:              DefaultFsync,
		QueryViews:         DefaultQueryViews,
		OpenCheck:          DefaultOpenCheck,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.SnapshotInterval == 0:
		return bad("snapshot-interval must not be 0 (negative disables background snapshots)")
	case c.SnapshotKeepRecent < 0:
		return bad("negative snapshot-keep-recent %d", c.SnapshotKeepRecent)
	case c.AsyncCommitBuffer < 0:
		return bad("negative async-commit-buffer %d", c.AsyncCommitBuffer)
	case c.AsyncCommitBuffer > multitree.MaxAsyncCommitBuffer:
		return bad("async-commit-buffer %d above the maximum of %d", c.AsyncCommitBuffer, multitree.MaxAsyncCommitBuffer)
	case c.RewriteConcurrency < 0:
		return bad("negative rewrite-concurrency %d", c.RewriteConcurrency)
	case c.RewriteRateLimit < 0:
		return bad("negative rewrite-rate-limit %d", c.RewriteRateLimit)
	case c.RewriteRateLimit > 0 && c.RewriteRateLimit < multitree.MinRewriteRateLimit:
		return bad("rewrite-rate-limit %d below the minimum of %d bytes per second", c.RewriteRateLimit, multitree.MinRewriteRateLimit)
	case c.QueryViews < 1:
		return bad("query-views must be at least 1, got %d", c.QueryViews)
	}
	if _, err := ParseFsync(c.Fsync); err != nil {
		return err
	}
	if _, err := ParseOpenCheck(c.OpenCheck); err != nil {
		return err
	}
	return nil
}

// ParseOpenCheck parses the name of an open check: "background", "sync" or
// "none"; the empty string means the default, "background".
func ParseOpenCheck(s string) (multitree.OpenCheck, error) {
	if strings.TrimSpace(s) == "" {
		return multitree.OpenCheckBackground, nil
	}
	for _, c := range []multitree.OpenCheck{multitree.OpenCheckBackground, multitree.OpenCheckSync, multitree.OpenCheckNone} {
		if strings.EqualFold(strings.TrimSpace(s), c.String()) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown open-check %q (want %q, %q or %q)", ErrInvalidConfig, s,
		multitree.OpenCheckBackground, multitree.OpenCheckSync, multitree.OpenCheckNone)
}

// ParseFsync parses an fsync policy name: "every-commit", "grouped" or
// "none"; the empty string means the default, "every-commit".
func ParseFsync(s string) (wal.SyncPolicy, error) {
	if strings.TrimSpace(s) == "" {
		return wal.SyncEveryCommit, nil
	}
	for _, p := range []wal.SyncPolicy{wal.SyncEveryCommit, wal.SyncGrouped, wal.SyncNone} {
		if strings.EqualFold(strings.TrimSpace(s), p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown fsync policy %q (want %q, %q or %q)", ErrInvalidConfig, s,
		wal.SyncEveryCommit, wal.SyncGrouped, wal.SyncNone)
}

// dbOptions returns the database options of a valid configuration.
func (c Config) dbOptions() multitree.Options {
	sync, _ := ParseFsync(c.Fsync)
	check, _ := ParseOpenCheck(c.OpenCheck)
	return multitree.Options{
		OpenCheck:          check,
		SnapshotInterval:   c.SnapshotInterval,
		SnapshotKeepRecent: c.SnapshotKeepRecent,
		RewriteConcurrency: c.RewriteConcurrency,
		RewriteRateLimit:   c.RewriteRateLimit,
		AsyncCommitBuffer:  c.AsyncCommitBuffer,
		Sync:               sync,
		// historical versions are cached by the multistore (see viewCache)
		ViewCacheSize: -1,
	}
}

// AppOptions is the part of the SDK's servertypes.AppOptions that
// ConfigFromAppOptions needs (viper satisfies it).
type AppOptions interface {
	Get(key string) interface{}
}

// App options keys of the [memiavl] section.
const (
	FlagEnable             = "memiavl.enable"
	FlagSnapshotInterval   = "memiavl.snapshot-interval"
	FlagSnapshotKeepRecent = "memiavl.snapshot-keep-recent"
	FlagAsyncCommitBuffer  = "memiavl.async-commit-buffer"
	FlagFsync              = "memiavl.fsync"
	FlagZeroCopy           = "memiavl.zero-copy"
	FlagRewriteConcurrency = "memiavl.rewrite-concurrency"
	FlagRewriteRateLimit   = "memiavl.rewrite-rate-limit"
	FlagOpenCheck          = "memiavl.open-check"
	FlagQueryViews         = "memiavl.query-views"
)

// ConfigFromAppOptions reads the [memiavl] section from the app options,
// starting from DefaultConfig for absent keys, and validates it.
func ConfigFromAppOptions(opts AppOptions) (Config, error) {
	c := DefaultConfig()
	var err error
	getBool := func(key string, dst *bool) {
		if v := opts.Get(key); v != nil && err == nil {
			var b bool
			if b, err = toBool(v); err != nil {
				err = fmt.Errorf("%w: %s: %w", ErrInvalidConfig, strings.TrimPrefix(key, "memiavl."), err)
				return
			}
			*dst = b
		}
	}
	getInt := func(key string, dst *int64) {
		if v := opts.Get(key); v != nil && err == nil {
			var n int64
			if n, err = toInt(v); err != nil {
				err = fmt.Errorf("%w: %s: %w", ErrInvalidConfig, strings.TrimPrefix(key, "memiavl."), err)
				return
			}
			*dst = n
		}
	}
	var keep, async, conc, views int64 = int64(c.SnapshotKeepRecent), 0, 0, int64(c.QueryViews)
	getBool(FlagEnable, &c.Enable)
	getInt(FlagSnapshotInterval, &c.SnapshotInterval)
	getInt(FlagSnapshotKeepRecent, &keep)
	getInt(FlagAsyncCommitBuffer, &async)
	getBool(FlagZeroCopy, &c.ZeroCopy)
	getInt(FlagRewriteConcurrency, &conc)
	getInt(FlagRewriteRateLimit, &c.RewriteRateLimit)
	getInt(FlagQueryViews, &views)
	if v := opts.Get(FlagFsync); v != nil && err == nil {
		c.Fsync = fmt.Sprint(v)
	}
	if v := opts.Get(FlagOpenCheck); v != nil && err == nil {
		c.OpenCheck = fmt.Sprint(v)
	}
	if err != nil {
		return c, err
	}
	c.SnapshotKeepRecent, c.AsyncCommitBuffer, c.RewriteConcurrency, c.QueryViews = int(keep), int(async), int(conc), int(views)
	return c, c.Validate()
}

func toBool(v interface{}) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		return strconv.ParseBool(strings.TrimSpace(x))
	}
	return false, fmt.Errorf("not a boolean: %v (%T)", v, v)
}

func toInt(v interface{}) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint:
		return toInt(uint64(x))
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > 1<<63-1 {
			return 0, fmt.Errorf("out of range: %d", x)
		}
		return int64(x), nil
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("not an integer: %v", x)
		}
		return int64(x), nil
	case string:
		return strconv.ParseInt(strings.TrimSpace(x), 10, 64)
	}
	return 0, fmt.Errorf("not an integer: %v (%T)", v, v)
}

// ConfigTemplate is the app.toml section for Config. An app appends it to
// its template and embeds Config in its app config as
//
//	MemIAVL compat.Config `mapstructure:"memiavl"`
const ConfigTemplate = `
###############################################################################
###                              MemIAVL Configuration                      ###
###############################################################################

[memiavl]

# Enable stores the chain state in memiavl, a memory-mapped IAVL database,
# instead of the default IAVL store. The app hash is the same.
enable = {{ .MemIAVL.Enable }}

# SnapshotInterval is how many blocks pass between background snapshot
# rewrites; a restart replays about this many blocks from the log (plus
# those committed while a rewrite runs; more after a failed rewrite).
# It must not be 0; a negative value disables background rewrites.
snapshot-interval = {{ .MemIAVL.SnapshotInterval }}

# SnapshotKeepRecent is how many older snapshots are kept besides the current
# one. Historical queries and rollbacks reach back to the oldest kept snapshot.
snapshot-keep-recent = {{ .MemIAVL.SnapshotKeepRecent }}

# AsyncCommitBuffer is how many blocks' log entries may wait for the background
# log writer, at most 65536; 0 writes each block's entry before the commit
# returns.
async-commit-buffer = {{ .MemIAVL.AsyncCommitBuffer }}

# Fsync is the log's fsync policy: "every-commit", "grouped" or "none". With
# anything but "every-commit" and a synchronous log, a crash may lose the last
# blocks, which the consensus engine replays on restart.
fsync = "{{ .MemIAVL.Fsync }}"

# ZeroCopy returns slices of the memory-mapped snapshot from reads of the
# working state instead of copies. Only for modules that never keep a read key
# or value past the block, and not on a node that serves gRPC Simulate (or
# the REST gateway) to others: a simulation that lasts past the next commits
# reads memory the database has unmapped (wrong bytes, or a crash).
zero-copy = {{ .MemIAVL.ZeroCopy }}

# RewriteConcurrency is how many stores a snapshot rewrite writes in parallel;
# 0 means GOMAXPROCS.
rewrite-concurrency = {{ .MemIAVL.RewriteConcurrency }}

# RewriteRateLimit bounds how fast a background snapshot rewrite writes, in
# bytes per second, to leave the disk to the node: 0 means no bound, any
# other value must be at least 65536.
rewrite-rate-limit = {{ .MemIAVL.RewriteRateLimit }}

# OpenCheck is how opening the store checks the checksums of its snapshot
# files: "background" (damage stops the node at the next commit), "sync"
# (before the store opens, reading every snapshot file once) or "none".
open-check = "{{ .MemIAVL.OpenCheck }}"

# QueryViews is how many recent versions are kept open for queries (at
# least 1).
query-views = {{ .MemIAVL.QueryViews }}
`
