package coordd

import (
	"errors"
	"net"
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
		// R-NOTIF-11: the public address is a scheme and a host.
		{"public_url", func(c *Config) { c.API.PublicURL = "https://olivares.example.com/" }, "", DefaultMetricsListen},
		{"public_url with a path", func(c *Config) { c.API.PublicURL = "https://olivares.example.com/x" }, "api.public_url", ""},
		{"public_url without a scheme", func(c *Config) { c.API.PublicURL = "olivares.example.com" }, "api.public_url", ""},
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

// Issue 32 findings 5 and 12: a start that cannot go on (a file the config
// names is not there, a port another process holds) says which setting,
// and writes nothing to the state dir first: no CA, no store.
func TestNewRefusesBeforeWriting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"missing certificate", func(c *Config) {
			c.API.TLSCert, c.API.TLSKey = "/run/credentials/olivares-coordinator.service/api.pem", "/run/credentials/olivares-coordinator.service/api.key"
		}, "config: api.tls_cert: stat /run/credentials/olivares-coordinator.service/api.pem: no such file or directory (under systemd, a file in /run/credentials needs the unit's LoadCredential= line)"},
		{"busy API port", func(c *Config) { c.API.Listen = busy.Addr().String() }, "api listen " + busy.Addr().String() + ": another process holds the port"},
		{"busy tunnel port", func(c *Config) { c.Tunnel.Listen = busy.Addr().String() }, "[tunnel] listen in serve's config"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		cfg := DefaultConfig()
		cfg.StateDir, cfg.API.Listen, cfg.Tunnel.Listen = dir, "127.0.0.1:0", "127.0.0.1:0"
		tt.set(&cfg)
		_, err := New(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the state dir was written (%v)", tt.name, err)
		}
	}
}
