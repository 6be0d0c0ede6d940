package compat_test

// The app.toml recipe of compat/README.md ("### app.toml"), end to end as a
// Cosmos SDK v0.50 node runs it: the app's template is the SDK's default
// template with ConfigTemplate appended, its config struct embeds
// serverconfig.Config (squash) and Config under "memiavl"; the SDK's
// interceptConfigs writes app.toml from them on the first start and reads it
// back through viper on every start. ConfigFromAppOptions on that viper, and
// viper's Unmarshal into the app's config struct, must give the config the
// app started from, on the first start and on a restart.

import (
	"os"
	"path/filepath"
	"testing"

	cmtcfg "github.com/cometbft/cometbft/config"
	"github.com/cosmos/cosmos-sdk/client/flags"
	"github.com/cosmos/cosmos-sdk/server"
	serverconfig "github.com/cosmos/cosmos-sdk/server/config"
	"github.com/spf13/cobra"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// appTomlConfig is the app config struct of compat/README.md.
type appTomlConfig struct {
	serverconfig.Config `mapstructure:",squash"`
	MemIAVL             compat.Config `mapstructure:"memiavl"`
}

// TestAppTomlThroughSDKServer: DefaultConfig and a config with every field
// changed come back unchanged from app.toml as the SDK's server writes and
// reads it (see the file's comment), on the first start and on a restart.
func TestAppTomlThroughSDKServer(t *testing.T) {
	others := compat.DefaultConfig()
	others.Enable, others.SnapshotInterval, others.SnapshotKeepRecent, others.AsyncCommitBuffer = true, -1, 5, 100
	others.Fsync, others.ZeroCopy, others.RewriteConcurrency = "grouped", true, 3
	others.RewriteRateLimit, others.OpenCheck, others.QueryViews = 1<<20, "sync", 2
	for name, mc := range map[string]compat.Config{"default": compat.DefaultConfig(), "others": others} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			template := serverconfig.DefaultConfigTemplate + compat.ConfigTemplate
			cfg := appTomlConfig{Config: *serverconfig.DefaultConfig(), MemIAVL: mc}
			for start := 1; start <= 2; start++ {
				cmd := &cobra.Command{Use: "app", RunE: func(*cobra.Command, []string) error { return nil }}
				cmd.Flags().String(flags.FlagHome, home, "")
				sctx, err := server.InterceptConfigsAndCreateContext(cmd, template, cfg, cmtcfg.DefaultConfig())
				if err != nil {
					t.Fatalf("start %d: %v", start, err)
				}
				if _, err := os.Stat(filepath.Join(home, "config", "app.toml")); err != nil {
					t.Fatal(err)
				}
				got, err := compat.ConfigFromAppOptions(sctx.Viper)
				if err != nil || got != mc {
					t.Fatalf("start %d: ConfigFromAppOptions gave %+v (%v), want %+v", start, got, err, mc)
				}
				var back appTomlConfig
				if err := sctx.Viper.Unmarshal(&back); err != nil || back.MemIAVL != mc {
					t.Fatalf("start %d: Unmarshal gave %+v (%v), want %+v", start, back.MemIAVL, err, mc)
				}
			}
		})
	}
}
