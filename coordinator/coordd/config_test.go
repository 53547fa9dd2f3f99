package coordd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/shared/config"
)

// R-CFG-5: the [store] table: bbolt by default, postgres with a DSN, every zero
// value filled, and each mistake named in the error.
func TestStoreConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		toml    string
		want    StoreConfig // checked when wantErr is ""
		wantErr string
	}{
		{"absent", "", StoreConfig{Driver: DriverBolt}, ""},
		{"bbolt", "[store]\ndriver = \"bbolt\"\n", StoreConfig{Driver: DriverBolt}, ""},
		{"postgres defaults", "[store]\ndriver = \"postgres\"\ndsn = \"postgres://o@db:5432/olivares\"\n",
			StoreConfig{Driver: DriverPostgres, DSN: "postgres://o@db:5432/olivares", MaxConns: 10, ConnectTimeout: config.Duration{Duration: 10 * time.Second}}, ""},
		{"postgres set", "[store]\ndriver = \"postgres\"\ndsn = \"host=db\"\nmax_conns = 20\nmin_conns = 2\nconnect_timeout = \"3s\"\n",
			StoreConfig{Driver: DriverPostgres, DSN: "host=db", MaxConns: 20, MinConns: 2, ConnectTimeout: config.Duration{Duration: 3 * time.Second}}, ""},
		{"postgres without dsn", "[store]\ndriver = \"postgres\"\n", StoreConfig{}, "store.dsn is required"},
		{"bbolt with dsn", "[store]\ndsn = \"host=db\"\n", StoreConfig{}, `are for driver "postgres"`},
		{"unknown driver", "[store]\ndriver = \"sqlite\"\n", StoreConfig{}, `store.driver "sqlite"`},
		{"min over max", "[store]\ndriver = \"postgres\"\ndsn = \"host=db\"\nmax_conns = 2\nmin_conns = 3\n", StoreConfig{}, "min_conns (3) is more than store.max_conns (2)"},
		{"negative", "[store]\ndriver = \"postgres\"\ndsn = \"host=db\"\nmax_conns = -1\n", StoreConfig{}, "may not be negative"},
		{"unknown key", "[store]\ndriver = \"postgres\"\ndns = \"host=db\"\n", StoreConfig{}, `unknown key "store.dns"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(path, []byte("state_dir = \"/tmp/x\"\n"+tc.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if err == nil {
				err = cfg.CheckAndSetDefaults()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Store != tc.want {
				t.Fatalf("got %+v, want %+v", cfg.Store, tc.want)
			}
		})
	}
}

// The example config in the repository decodes strictly and passes the
// checks, so the README never points at a config that does not start.
func TestExampleConfig(t *testing.T) {
	cfg, err := Load("coordinator.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Driver != DriverPostgres || cfg.Store.MaxConns != 10 || cfg.Tunnel.Hosts[0] != "coordinator.example.com" {
		t.Fatalf("example config: %+v", cfg)
	}
}

func testOIDC() sso.Config {
	return sso.Config{Issuer: "https://idp.example.com", ClientID: "olivares", ClientSecret: "s",
		Roles: []sso.RoleRule{{Claim: "groups", Value: "eng", Tenant: "default", Role: "viewer"}}}
}

// R-API-9, R-ATT-7, R-ATT-10: the metrics listener and the attach limits
// are checked (issue 16, 18).
func TestConfigMetricsAndAttach(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(*Config)
		wantErr string
		listen  string
	}{
		{"default loopback", func(c *Config) {}, "", DefaultMetricsListen},
		{"empty is the default", func(c *Config) { c.Metrics.Listen = "" }, "", DefaultMetricsListen},
		{"off", func(c *Config) { c.Metrics.Listen = MetricsOff }, "", MetricsOff},
		{"public needs a token", func(c *Config) { c.Metrics.Listen = "0.0.0.0:9100" }, "metrics.token_file", ""},
		{"public with a token", func(c *Config) { c.Metrics.Listen, c.Metrics.TokenFile = "0.0.0.0:9100", "/t" }, "", "0.0.0.0:9100"},
		{"bad address", func(c *Config) { c.Metrics.Listen = "nowhere" }, "metrics.listen", ""},
		{"negative buffer", func(c *Config) { c.API.AttachBuffer = -1 }, "api.attach_buffer", ""},
		{"negative cap", func(c *Config) { c.API.MaxAttachesPerPrincipal = -1 }, "api.max_attaches_per_principal", ""},
		// R-CHG-6, issue 35: the change stream caps and the server's bounds.
		{"negative stream cap", func(c *Config) { c.API.MaxChangeStreams = -1 }, "api.max_change_streams", ""},
		{"negative read timeout", func(c *Config) { c.API.ReadTimeout.Duration = -1 }, "api.read_timeout", ""},
		{"zero timeouts take the defaults", func(c *Config) { c.API.ReadTimeout.Duration, c.API.IdleTimeout.Duration = 0, 0 }, "", DefaultMetricsListen},
		// R-NOTIF-9: a bad allow entry is named.
		{"bad outbound allow", func(c *Config) { c.Outbound.Allow = []string{"10.0.0.0/8", "not a host/"} }, `outbound.allow: "not a host/"`, ""},
		{"outbound allow", func(c *Config) { c.Outbound.Allow = []string{"10.0.0.0/8", "::1", "hooks.corp.example"} }, "", DefaultMetricsListen},
		// R-SSO-8: the callback comes from the config outside dev.
		{"sso without redirect_url", func(c *Config) { c.OIDC = testOIDC() }, "oidc.redirect_url is required", ""},
		{"sso with redirect_url", func(c *Config) {
			c.OIDC = testOIDC()
			c.OIDC.RedirectURL = "https://olivares.example.com/v1/sso/callback"
		}, "", DefaultMetricsListen},
		{"sso on plain loopback (dev)", func(c *Config) { c.OIDC, c.API.Plain = testOIDC(), true }, "", DefaultMetricsListen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.StateDir = t.TempDir()
			tc.set(&c)
			err := c.CheckAndSetDefaults()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error naming %s", err, tc.wantErr)
			case tc.wantErr == "" && c.Metrics.Listen != tc.listen:
				t.Fatalf("metrics.listen: got %q, want %q", c.Metrics.Listen, tc.listen)
			case tc.wantErr == "" && (c.API.ReadTimeout.Duration != DefaultReadTimeout || c.API.IdleTimeout.Duration != DefaultIdleTimeout):
				t.Fatalf("api.read_timeout, idle_timeout: got %v, %v, want the defaults", c.API.ReadTimeout, c.API.IdleTimeout)
			}
		})
	}
}
