package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// writeServerCert issues a certificate for 127.0.0.1 from ca into the two
// files and returns its serial.
func writeServerCert(t *testing.T, ca *certs.Authority, certFile, keyFile string) string {
	t.Helper()
	c, err := ca.IssueServer([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := certs.EncodeKeyPEM(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteFileAtomic(certFile, certs.EncodeCertPEM(c.Certificate...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c.Leaf.SerialNumber.String()
}

// A certificate reload (what SIGHUP does in serve) keeps every live tunnel
// and every attach stream: the node stays on the session it had, the
// stream goes on delivering the run's output, and only new connections get
// the new API and tunnel certificates (R-OPS-3).
func TestReloadKeepsTunnelsAndStreams(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ca, _, err := certs.InitAuthority(filepath.Join(dir, "api-ca"), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			certFile, keyFile := filepath.Join(dir, "api.pem"), filepath.Join(dir, "api.key")
			first := writeServerCert(t, ca, certFile, keyFile)
			env := NewEnv(t, Options{Heartbeat: 2 * time.Second, Configure: func(c *coordd.Config) {
				c.API.Plain, c.API.TLSCert, c.API.TLSKey = false, certFile, keyFile
			}})
			pool := x509.NewCertPool()
			pool.AddCert(ca.Roots()[0])
			hc := &http.Client{Timeout: 60 * time.Second, Transport: contract.Transport(t, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})}
			call := func(method, path string, body, out any) {
				t.Helper()
				var rd io.Reader
				if body != nil {
					b, _ := json.Marshal(body)
					rd = bytes.NewReader(b)
				}
				req, _ := http.NewRequest(method, env.APIURL()+path, rd)
				req.Header.Set("Authorization", "Bearer "+env.AdminToken)
				req.Header.Set("X-Olivares-Tenant", Tenant)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				if resp.StatusCode >= 300 {
					t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
				}
				if out != nil {
					json.Unmarshal(raw, out)
				}
			}

			a := env.StartAgentProcess(ProcOptions{Transport: tr})
			linked := a.AwaitConnected(60 * time.Second)
			var ws apitypes.Workspace
			call(http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: a.ID, Path: t.TempDir(), Name: "w"}, &ws)
			var p apitypes.Profile
			call(http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: a.ID, Tool: "claude", Name: "claude", Home: filepath.Join(t.TempDir(), "home")}, &p)
			var run apitypes.Run
			call(http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: ws.Ref}, &run)

			// The attach stream, read line by line.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.APIURL()+"/v1/m/sessions/runs/"+run.RunRef+"/attach?from=0", nil)
			req.Header.Set("Authorization", "Bearer "+env.AdminToken)
			req.Header.Set("X-Olivares-Tenant", Tenant)
			sc := &http.Client{Transport: contract.Transport(t, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})}
			resp, err := sc.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("attach: %v %v", resp, err)
			}
			defer resp.Body.Close()
			streamSerial := resp.TLS.PeerCertificates[0].SerialNumber.String()
			lines := make(chan string, 1024)
			go func() {
				s := bufio.NewScanner(resp.Body)
				for s.Scan() {
					lines <- s.Text()
				}
				close(lines)
			}()
			until := func(sub string) {
				t.Helper()
				timeout := time.After(60 * time.Second)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatalf("the attach stream ended before %q", sub)
						}
						if strings.Contains(l, sub) {
							return
						}
					case <-timeout:
						t.Fatalf("no %q on the attach stream", sub)
					}
				}
			}
			call(http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", Message("before"), nil)
			until("pong: before")

			_, tunnelBefore := env.Coord.ServingCerts()
			reconnects := env.Fleet().Stats().Reconnects
			second := writeServerCert(t, ca, certFile, keyFile)
			if err := env.Coord.Reload(); err != nil {
				t.Fatal(err)
			}

			// New connections see the new certificates.
			c, err := tls.Dial("tcp", strings.TrimPrefix(env.APIURL(), "https://"), &tls.Config{RootCAs: pool})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ConnectionState().PeerCertificates[0].SerialNumber.String(); got != second || got == first {
				t.Fatalf("a new API connection after the reload: serial %s, want %s", got, second)
			}
			c.Close()
			c, err = tls.Dial("tcp", env.TunnelAddr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{tunnel.ALPNEnroll}})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ConnectionState().PeerCertificates[0]; got.SerialNumber.Cmp(tunnelBefore.SerialNumber) == 0 {
				t.Fatal("a new tunnel connection after the reload got the old certificate")
			}
			c.Close()

			// The live stream and the live tunnel go on.
			call(http.MethodPost, "/v1/m/sessions/runs/"+run.RunRef+"/input", Message("after"), nil)
			until("pong: after")
			l := env.Fleet().Link(a.ID)
			if !l.Connected || !l.ConnectedSince.Equal(linked.ConnectedSince) || env.Fleet().Stats().Reconnects != reconnects {
				t.Fatalf("the node's tunnel after the reload: %+v (reconnects %d, was %d), want the session since %v",
					l, env.Fleet().Stats().Reconnects, reconnects, linked.ConnectedSince)
			}
			if streamSerial != first {
				t.Fatalf("the stream's connection: serial %s, want the first certificate's", streamSerial)
			}
		})
	}
}
