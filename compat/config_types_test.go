package compat_test

// More app.toml values of unexpected types: what viper hands over from
// TOML, JSON, flags and environment variables, and values set by code.

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/spf13/viper"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestConfigFromAppOptionsUnsignedOverflow: an unsigned value beyond the
// range of int64 is refused for uint64; it must be refused for uint too,
// not wrapped to a negative number (for snapshot-interval, -1 silently
// disables background snapshot rewrites).
func TestConfigFromAppOptionsUnsignedOverflow(t *testing.T) {
	if _, err := compat.ConfigFromAppOptions(mapOptions{compat.FlagSnapshotInterval: uint64(math.MaxUint64)}); !errors.Is(err, compat.ErrInvalidConfig) {
		t.Fatalf("uint64 overflow: %v", err)
	}
	c, err := compat.ConfigFromAppOptions(mapOptions{compat.FlagSnapshotInterval: uint(math.MaxUint64)})
	if !errors.Is(err, compat.ErrInvalidConfig) {
		t.Errorf("snapshot-interval = uint(%d) accepted as %d, want an ErrInvalidConfig as for uint64", uint(math.MaxUint64), c.SnapshotInterval)
	}
}

// TestConfigFromAppOptionsValueTypes: integers and booleans as strings (as
// flags and environment variables give them), float64 (as JSON gives
// numbers), and values that are no integer, out of range, of the wrong
// type or unknown names: accepted with their value, or refused with
// ErrInvalidConfig naming the key, never a panic.
func TestConfigFromAppOptionsValueTypes(t *testing.T) {
	ok := []struct {
		key   string
		val   any
		check func(compat.Config) bool
	}{
		{compat.FlagSnapshotInterval, float64(500), func(c compat.Config) bool { return c.SnapshotInterval == 500 }},
		{compat.FlagSnapshotInterval, " -1 ", func(c compat.Config) bool { return c.SnapshotInterval == -1 }},
		{compat.FlagSnapshotInterval, int32(7), func(c compat.Config) bool { return c.SnapshotInterval == 7 }},
		{compat.FlagQueryViews, float64(3), func(c compat.Config) bool { return c.QueryViews == 3 }},
		{compat.FlagSnapshotKeepRecent, "0", func(c compat.Config) bool { return c.SnapshotKeepRecent == 0 }},
		{compat.FlagAsyncCommitBuffer, uint16(16), func(c compat.Config) bool { return c.AsyncCommitBuffer == 16 }},
		{compat.FlagEnable, " TRUE ", func(c compat.Config) bool { return c.Enable }},
		{compat.FlagEnable, "1", func(c compat.Config) bool { return c.Enable }},
		{compat.FlagZeroCopy, "false", func(c compat.Config) bool { return !c.ZeroCopy }},
		{compat.FlagFsync, "", func(c compat.Config) bool { return c.Fsync == "" }},
		{compat.FlagOpenCheck, " None", func(c compat.Config) bool { return c.OpenCheck == " None" }},
	}
	for _, c := range ok {
		cfg, err := compat.ConfigFromAppOptions(mapOptions{c.key: c.val})
		if err != nil || !c.check(cfg) {
			t.Errorf("%s = %#v: %+v, %v", c.key, c.val, cfg, err)
		}
	}
	bad := []struct {
		key string
		val any
	}{
		{compat.FlagSnapshotInterval, float64(1000.5)},
		{compat.FlagSnapshotInterval, 1e300},
		{compat.FlagSnapshotInterval, math.NaN()},
		{compat.FlagSnapshotInterval, math.Inf(1)},
		{compat.FlagSnapshotInterval, "1e3"},
		{compat.FlagSnapshotInterval, ""},
		{compat.FlagSnapshotInterval, "99999999999999999999"},
		{compat.FlagSnapshotInterval, true},
		{compat.FlagSnapshotInterval, float32(10)},
		{compat.FlagSnapshotInterval, []any{int64(1)}},
		{compat.FlagQueryViews, "0"},
		{compat.FlagQueryViews, float64(-1)},
		{compat.FlagSnapshotKeepRecent, int64(-1)},
		{compat.FlagAsyncCommitBuffer, "100000"},
		{compat.FlagRewriteConcurrency, "-1"},
		{compat.FlagRewriteRateLimit, float64(1000)},
		{compat.FlagEnable, int64(1)},
		{compat.FlagEnable, "yes"},
		{compat.FlagEnable, ""},
		{compat.FlagZeroCopy, float64(0)},
		{compat.FlagFsync, true},
		{compat.FlagFsync, int64(1)},
		{compat.FlagFsync, "always"},
		{compat.FlagFsync, "every_commit"},
		{compat.FlagOpenCheck, "full"},
		{compat.FlagOpenCheck, false},
	}
	for _, c := range bad {
		cfg, err := compat.ConfigFromAppOptions(mapOptions{c.key: c.val})
		if !errors.Is(err, compat.ErrInvalidConfig) {
			t.Errorf("%s = %#v accepted: %+v, %v", c.key, c.val, cfg, err)
			continue
		}
		if name := strings.TrimPrefix(c.key, "memiavl."); !strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), strings.ReplaceAll(name, "-", " ")) &&
			c.key != compat.FlagFsync && c.key != compat.FlagOpenCheck {
			t.Errorf("%s = %#v: the error does not name the key: %v", c.key, c.val, err)
		}
	}
}

// TestConfigFromViperJSONAndEnv: the section read by viper from a JSON
// config (numbers are float64) and from environment variables (every value
// a string) gives the same config as from TOML.
func TestConfigFromViperJSONAndEnv(t *testing.T) {
	want := compat.DefaultConfig()
	want.Enable, want.SnapshotInterval, want.SnapshotKeepRecent, want.AsyncCommitBuffer = true, 250, 2, 4
	want.Fsync, want.ZeroCopy, want.RewriteConcurrency, want.RewriteRateLimit, want.OpenCheck, want.QueryViews = "grouped", true, 3, 1<<20, "sync", 5

	v := viper.New()
	v.SetConfigType("json")
	if err := v.ReadConfig(strings.NewReader(`{"memiavl": {"enable": true, "snapshot-interval": 250, "snapshot-keep-recent": 2,
		"async-commit-buffer": 4, "fsync": "grouped", "zero-copy": true, "rewrite-concurrency": 3,
		"rewrite-rate-limit": 1048576, "open-check": "sync", "query-views": 5}}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := compat.ConfigFromAppOptions(v); err != nil || got != want {
		t.Errorf("from JSON: %+v, %v; want %+v", got, err, want)
	}

	env := map[string]string{
		"ENABLE": "true", "SNAPSHOT_INTERVAL": "250", "SNAPSHOT_KEEP_RECENT": "2", "ASYNC_COMMIT_BUFFER": "4",
		"FSYNC": "grouped", "ZERO_COPY": "true", "REWRITE_CONCURRENCY": "3", "REWRITE_RATE_LIMIT": "1048576",
		"OPEN_CHECK": "sync", "QUERY_VIEWS": "5",
	}
	for k, val := range env {
		t.Setenv("MEMIAVLTEST_MEMIAVL_"+k, val)
	}
	e := viper.New()
	e.SetEnvPrefix("MEMIAVLTEST")
	e.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	e.AutomaticEnv()
	if got, err := compat.ConfigFromAppOptions(e); err != nil || got != want {
		t.Errorf("from the environment: %+v, %v; want %+v", got, err, want)
	}
}
