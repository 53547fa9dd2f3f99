package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/agentd"
	agentenroll "github.com/olivares-dev/olivares/agent/enroll"
	"github.com/olivares-dev/olivares/agent/localapi"
	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/localsock"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

var transports = []string{tunnel.TransportQUIC, tunnel.TransportYamux}

// Enrollment, connection, registry and a coordinator→agent call, on both
// transports (R-ARCH-2, R-ENR-2, R-TUN-1, R-TUN-3, R-NODE-1, R-CFG-4).
func TestEnrollAndConnect(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			env := NewEnv(t)
			a := env.StartAgent(AgentOptions{Transport: tr})
			l := a.AwaitConnected(10 * time.Second)
			if l.Transport != tr {
				t.Fatalf("transport: got %q, want %q", l.Transport, tr)
			}
			// The key stays on the node, mode 0600; the coordinator has only
			// the certificate's serial.
			st, err := os.Stat(filepath.Join(a.Dir, "node-key.pem"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Fatalf("key mode: got %v, want 0600", st.Mode().Perm())
			}

			r := env.Do("GET", "/v1/nodes/"+a.ID, env.AdminToken, Tenant)
			if r.Status != 200 {
				t.Fatalf("GET node: %d %s", r.Status, r.Body)
			}
			var n struct {
				ID, Tenant, Hostname, Transport, AgentVersion string `json:"-"`
			}
			var raw map[string]any
			r.JSON(t, &raw)
			_ = n
			for _, k := range []string{"id", "hostname", "transport", "agent_version", "cert_not_after", "connected_since", "last_heartbeat", "capabilities"} {
				if raw[k] == nil || raw[k] == "" {
					t.Errorf("node view lacks %q: %s", k, r.Body)
				}
			}
			if raw["transport"] != tr || raw["connected"] != true {
				t.Errorf("node view: transport %v connected %v, want %s true", raw["transport"], raw["connected"], tr)
			}
			caps, _ := raw["capabilities"].(map[string]any)
			if _, ok := caps["pty"]; !ok {
				t.Errorf("capabilities lack pty: %v", caps)
			}
			// The agent reports the round trip it measured on the previous
			// heartbeat; the registry shows it while the tunnel is live.
			Await(t, 10*time.Second, "the node's heartbeat RTT", func() bool {
				var n apitypes.Node
				env.Do("GET", "/v1/nodes/"+a.ID, env.AdminToken, Tenant).JSON(t, &n)
				return n.RTTMillis != nil && *n.RTTMillis > 0
			})

			// A call from the coordinator to the agent over the tunnel.
			var pong proto.PingReply
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := env.Fleet().Call(ctx, a.ID, wire.Header{Op: proto.OpPing}, nil, &pong); err != nil {
				t.Fatal(err)
			}
			if pong.NodeID != a.ID {
				t.Fatalf("ping: got node %q, want %q", pong.NodeID, a.ID)
			}
			// An op the agent does not have passes its error through.
			err = env.Fleet().Call(ctx, a.ID, wire.Header{Op: "nope"}, nil, nil)
			var we *wire.Error
			if !errors.As(err, &we) || we.Status != http.StatusNotFound || we.Code != "unknown_op" {
				t.Fatalf("unknown op: got %v, want 404 unknown_op", err)
			}

			// The agent's local status (R-ARCH-5).
			ls, err := localapi.GetStatus(ctx, a.Daemon.SocketPath())
			if err != nil {
				t.Fatal(err)
			}
			if ls.NodeID != a.ID || ls.Link.State != "connected" || ls.Link.Transport != tr {
				t.Fatalf("status: got node %s link %s/%s", ls.NodeID, ls.Link.State, ls.Link.Transport)
			}
			if ls.Runs == nil || len(ls.Runs) != 0 {
				t.Fatalf("status runs: got %v, want []", ls.Runs)
			}
			fi, err := os.Stat(a.Daemon.SocketPath())
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("socket mode: %v %v, want 0600", fi.Mode().Perm(), err)
			}
		})
	}
}

func TestStatusWithoutAgent(t *testing.T) {
	t.Parallel()
	_, err := localapi.GetStatus(context.Background(), filepath.Join(t.TempDir(), "agent.sock"))
	if !errors.Is(err, localsock.ErrNotRunning) {
		t.Fatalf("got %v, want ErrNotRunning", err)
	}
}

func listNodes(t *testing.T, env *Env) []store.Node {
	t.Helper()
	ns, err := env.Coord.Store.ListNodes(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// Every bad enrollment gets a clear error and stores nothing on either side
// (R-ENR-3).
func TestEnrollRefusals(t *testing.T) {
	t.Parallel()
	env := NewEnv(t)
	ctx := context.Background()
	pin := certs.Pin(env.Coord.Authority.Current)
	newTok := func() string {
		iss, err := env.Coord.Enroll.CreateToken(ctx, Tenant, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return iss.Token
	}
	enroll := func(tok, pin string) (string, error) {
		dir := filepath.Join(env.Dir, "n-"+certs.Pin(env.Coord.Authority.Current)[7:15]+tok[len(tok)-6:])
		_, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: env.TunnelAddr(), Token: tok, CAPin: pin, StateDir: dir})
		return dir, err
	}
	assertNothing := func(t *testing.T, dir string, nodesBefore int) {
		t.Helper()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("node state dir %s exists after a refused enrollment", dir)
		}
		if got := len(listNodes(t, env)); got != nodesBefore {
			t.Errorf("coordinator nodes: got %d, want %d", got, nodesBefore)
		}
	}

	t.Run("reused", func(t *testing.T) {
		tok := newTok()
		if _, err := enroll(tok, pin); err != nil {
			t.Fatal(err)
		}
		before := len(listNodes(t, env))
		dir := filepath.Join(env.Dir, "reuse2")
		_, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: env.TunnelAddr(), Token: tok, CAPin: pin, StateDir: dir})
		wantCode(t, err, "join_token_used")
		assertNothing(t, dir, before)
	})
	t.Run("unknown", func(t *testing.T) {
		before := len(listNodes(t, env))
		dir, err := enroll("olvj_unknownunknownunknown", pin)
		wantCode(t, err, "join_token_unknown")
		assertNothing(t, dir, before)
	})
	t.Run("expired", func(t *testing.T) {
		tok := newTok()
		before := len(listNodes(t, env))
		env.Coord.Enroll.Now = func() time.Time { return time.Now().Add(31 * time.Minute) }
		dir, err := enroll(tok, pin)
		env.Coord.Enroll.Now = nil
		wantCode(t, err, "join_token_expired")
		assertNothing(t, dir, before)
	})
	t.Run("wrong pin", func(t *testing.T) {
		tok := newTok()
		before := len(listNodes(t, env))
		other, _, err := certs.InitAuthority(filepath.Join(t.TempDir(), "ca"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		dir, err := enroll(tok, certs.Pin(other.Current))
		if err == nil || !strings.Contains(err.Error(), "token was not sent") {
			t.Fatalf("got %v, want a pin refusal saying the token was not sent", err)
		}
		assertNothing(t, dir, before)
		// The token was never sent, so it still works.
		if _, err := enroll(tok, pin); err != nil {
			t.Fatalf("token after a pin refusal: %v", err)
		}
	})
	t.Run("csr claims identity", func(t *testing.T) {
		tok := newTok()
		before := len(listNodes(t, env))
		key, _ := certs.NewKey()
		csr, err := x509.CreateCertificateRequest(nil, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "node-evil"}}, key)
		if err != nil {
			t.Fatal(err)
		}
		tc := &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: certs.VerifyPinned(pin), MinVersion: tls.VersionTLS13}
		conn, err := tunnel.DialEnroll(ctx, env.TunnelAddr(), tc)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := wire.WriteMessage(conn, proto.EnrollRequest{Token: tok, CSR: csr}); err != nil {
			t.Fatal(err)
		}
		var reply wire.Reply
		if err := wire.ReadMessage(conn, &reply); err != nil {
			t.Fatal(err)
		}
		if reply.OK || reply.Error == nil || reply.Error.Code != "csr_identity_mismatch" {
			t.Fatalf("got %+v, want csr_identity_mismatch", reply)
		}
		if got := len(listNodes(t, env)); got != before {
			t.Fatalf("nodes: got %d, want %d", got, before)
		}
		// Nothing was consumed: the same token enrolls a proper node.
		if _, err := enroll(tok, pin); err != nil {
			t.Fatalf("token after a refused CSR: %v", err)
		}
	})
	t.Run("already enrolled", func(t *testing.T) {
		dir := filepath.Join(env.Dir, "twice")
		if _, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: env.TunnelAddr(), Token: newTok(), CAPin: pin, StateDir: dir}); err != nil {
			t.Fatal(err)
		}
		tok := newTok()
		_, err := agentenroll.Enroll(ctx, agentenroll.Options{Coordinator: env.TunnelAddr(), Token: tok, CAPin: pin, StateDir: dir})
		if !errors.Is(err, agentenroll.ErrAlreadyEnrolled) {
			t.Fatalf("got %v, want ErrAlreadyEnrolled", err)
		}
		// The token was not spent.
		if _, err := enroll(tok, pin); err != nil {
			t.Fatalf("token after an already-enrolled refusal: %v", err)
		}
	})
	t.Run("ttl bounds", func(t *testing.T) {
		for _, ttl := range []time.Duration{-time.Minute, 24*time.Hour + time.Second} {
			if _, err := env.Coord.Enroll.CreateToken(ctx, Tenant, nil, ttl); err == nil {
				t.Errorf("ttl %v: got no error", ttl)
			}
		}
	})
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
	if we.Message == "" {
		t.Fatalf("error %s has no message", code)
	}
}

// A client without a certificate, or with one from another CA, is refused
// at the handshake, on both transports (R-TUN-1).
func TestHandshakeRefusals(t *testing.T) {
	t.Parallel()
	env := NewEnv(t)
	other, _, err := certs.InitAuthority(filepath.Join(t.TempDir(), "other"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := certs.NewKey()
	csr, _ := certs.NewCSR(key)
	foreign, err := other.SignNode(csr, "node-foreign", time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := certs.EncodeKeyPEM(key)
	foreignPair, err := tls.X509KeyPair(certs.EncodeCertPEM(foreign.Raw), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]*tls.Config{
		"no certificate": {RootCAs: env.Coord.Authority.Pool(), MinVersion: tls.VersionTLS13},
		"other CA":       {RootCAs: env.Coord.Authority.Pool(), MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{foreignPair}},
	}
	for _, tr := range transports {
		for name, tc := range cases {
			t.Run(tr+"/"+name, func(t *testing.T) {
				before := env.Fleet().Stats().HandshakeFailures
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var sess tunnel.Session
				var err error
				if tr == tunnel.TransportQUIC {
					sess, err = tunnel.DialQUIC(ctx, env.TunnelAddr(), tc.Clone())
				} else {
					sess, err = tunnel.DialYamux(ctx, env.TunnelAddr(), tc.Clone())
				}
				if err == nil {
					// TLS 1.3 client auth fails after the client's Finished:
					// the session must die before it carries anything.
					_, err = sess.OpenStream(ctx)
					if err == nil {
						select {
						case <-sess.Done():
							err = errors.New("closed")
						case <-ctx.Done():
						}
					}
					sess.Close()
				}
				if err == nil {
					t.Fatal("handshake accepted")
				}
				Await(t, 5*time.Second, "handshake failure counted", func() bool { return env.Fleet().Stats().HandshakeFailures > before })
			})
		}
	}
}

// UDP blocked (no QUIC listener): auto falls back to yamux (R-TUN-2). The
// 3 s bound is proven on a fake clock (agent/link
// TestAutoFallbackWithin3s); here the wait is only a liveness bound, so a
// loaded machine cannot fail it.
func TestAutoFallsBackToYamux(t *testing.T) {
	t.Parallel()
	env := NewEnv(t, Options{DisableQUIC: true})
	a := env.StartAgent(AgentOptions{Transport: "auto"})
	a.AwaitTransport(tunnel.TransportYamux, 30*time.Second)
}

// Auto on yamux keeps trying QUIC and switches once it is reachable.
func TestAutoReturnsToQUIC(t *testing.T) {
	t.Parallel()
	env := NewEnv(t, Options{DisableQUIC: true})
	a := env.StartAgent(AgentOptions{Transport: "auto", QUICRetry: 100 * time.Millisecond})
	a.AwaitTransport(tunnel.TransportYamux, 5*time.Second)
	if err := env.Coord.ListenQUIC(); err != nil {
		t.Fatal(err)
	}
	a.AwaitTransport(tunnel.TransportQUIC, 10*time.Second)
}

// A coordinator restart brings every agent back (R-TUN-4). The 10 s bound
// is the reconnect schedule's, proven on a fake clock (agent/link
// TestReconnectAfterRestartWithin10s); here the wait is a liveness bound.
func TestCoordinatorRestart(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			env := NewEnv(t)
			var as []*Agent
			for range 3 {
				a := env.StartAgent(AgentOptions{Transport: tr})
				a.AwaitConnected(10 * time.Second)
				as = append(as, a)
			}
			env.RestartCoordinator()
			for _, a := range as {
				a.AwaitConnected(30 * time.Second)
			}
		})
	}
}

// Revocation cuts the live tunnel and refuses every later handshake of
// that node (R-NODE-2). That the cut happens before the revoke returns is
// coordinator/fleet TestRevokeCutsBeforeReturning; how long the agent takes
// to see it is BenchmarkRevoke (under a millisecond on loopback). Here the
// wait is a liveness bound.
func TestRevoke(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			env := NewEnv(t)
			a := env.StartAgent(AgentOptions{Transport: tr})
			b := env.StartAgent(AgentOptions{Transport: tr})
			a.AwaitConnected(10 * time.Second)
			b.AwaitConnected(10 * time.Second)
			before := env.Fleet().Stats().HandshakeFailures
			r := env.Do("POST", "/v1/nodes/"+a.ID+"/revoke", env.AdminToken, Tenant)
			if r.Status != 200 {
				t.Fatalf("revoke: %d %s", r.Status, r.Body)
			}
			Await(t, 30*time.Second, "agent to lose its tunnel", func() bool {
				return a.Daemon.Link().State != "connected"
			})
			if env.Fleet().Link(a.ID).Connected {
				t.Fatal("coordinator still has a link to the revoked node")
			}
			// Its next dial is refused with the reason; the agent says it
			// was revoked and stops dialing (R-LIFE-8).
			Await(t, 10*time.Second, "a refused reconnect", func() bool { return env.Fleet().Stats().HandshakeFailures > before })
			Await(t, 10*time.Second, "the agent to know it was revoked", func() bool { return a.Daemon.Link().State == "revoked" })
			if st := a.Daemon.Link(); !strings.Contains(st.LastError, "revoked") {
				t.Fatalf("revoked agent's last error: %q", st.LastError)
			}
			if env.Fleet().Link(a.ID).Connected {
				t.Fatal("revoked node reconnected")
			}
			// The other node is untouched.
			if !env.Fleet().Link(b.ID).Connected {
				t.Fatal("revoking one node cut another")
			}
			var n map[string]any
			env.Do("GET", "/v1/nodes/"+a.ID, env.AdminToken, Tenant).JSON(t, &n)
			if n["revoked_at"] == nil || n["online"] != false {
				t.Fatalf("node view after revoke: %v", n)
			}
		})
	}
}

// Certificates renew over the live tunnel at half-life; the new one is used
// at the next handshake (R-PKI-2).
func TestCertificateRenewal(t *testing.T) {
	t.Parallel()
	env := NewEnv(t, Options{NodeCertValidity: 4 * time.Second})
	a := env.StartAgent(AgentOptions{Transport: tunnel.TransportYamux})
	a.AwaitConnected(10 * time.Second)
	first := a.Daemon.Link().CertNotAfter
	node0, _ := env.Coord.Store.GetNode(context.Background(), a.ID)
	Await(t, 10*time.Second, "a renewed certificate", func() bool {
		n, _ := env.Coord.Store.GetNode(context.Background(), a.ID)
		return n.CertSerial != node0.CertSerial && a.Daemon.Link().CertNotAfter.After(first)
	})
	env.Fleet().Disconnect(a.ID)
	a.AwaitConnected(10 * time.Second)
	n, _ := env.Coord.Store.GetNode(context.Background(), a.ID)
	if got := a.Daemon.Link().CertNotAfter; !got.After(first) {
		t.Fatalf("agent cert not after: got %v, want after %v", got, first)
	}
	_ = n
}

// The tenant and permission matrix of the node routes (R-AUTH-*, R-TEN-*),
// and the overlay prefix (R-ED-2, R-ED-3).
func TestNodeRoutesAuthz(t *testing.T) {
	t.Parallel()
	env := NewEnv(t)
	a := env.StartAgent()
	a.AwaitConnected(10 * time.Second)
	viewer := env.Principal(Tenant, store.RoleViewer, store.KindHuman)
	operator := env.Principal(Tenant, store.RoleOperator, store.KindHuman)
	admin := env.Principal(Tenant, store.RoleAdmin, store.KindAgent)
	otherAdmin := env.Principal("other", store.RoleAdmin, store.KindHuman)
	node := "/v1/nodes/" + a.ID
	cases := []struct {
		name, method, path, token, tenant string
		status                            int
		code                              string
	}{
		{"no token", "GET", "/v1/nodes", "", Tenant, 401, "unauthenticated"},
		{"bad token", "GET", "/v1/nodes", "olv_nope", Tenant, 401, "unauthenticated"},
		{"no tenant", "GET", "/v1/nodes", viewer, "", 400, "tenant_required"},
		{"malformed tenant", "GET", "/v1/nodes", viewer, "Bad Tenant!", 400, "tenant_required"},
		{"not a member", "GET", "/v1/nodes", viewer, "other", 403, "tenant_forbidden"},
		{"viewer list", "GET", "/v1/nodes", viewer, Tenant, 200, ""},
		{"viewer show", "GET", node, viewer, Tenant, 200, ""},
		{"viewer revoke", "POST", node + "/revoke", viewer, Tenant, 403, "permission_denied"},
		{"operator revoke", "POST", node + "/revoke", operator, Tenant, 403, "permission_denied"},
		{"other tenant show", "GET", node, otherAdmin, "other", 404, "not_found"},
		{"other tenant revoke", "POST", node + "/revoke", otherAdmin, "other", 404, "not_found"},
		{"unknown node", "GET", "/v1/nodes/node-nope", viewer, Tenant, 404, "not_found"},
		{"unknown node revoke", "POST", "/v1/nodes/node-nope/revoke", admin, Tenant, 404, "not_found"},
	}
	for _, c := range cases {
		r := env.Do(c.method, c.path, c.token, c.tenant)
		if r.Status != c.status || r.ErrorCode() != c.code {
			t.Errorf("%s: got %d %q, want %d %q (%s)", c.name, r.Status, r.ErrorCode(), c.status, c.code, r.Body)
		}
	}
	// Another tenant's list does not show the node.
	var list struct{ Items []map[string]any }
	env.Do("GET", "/v1/nodes", otherAdmin, "other").JSON(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("other tenant sees %d nodes", len(list.Items))
	}
	// The overlay prefix answers exactly the router's ordinary 404.
	want := env.Do("GET", "/v1/m/does-not-exist", admin, Tenant)
	if want.Status != 404 {
		t.Fatalf("unknown route: %d", want.Status)
	}
	for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
		for _, p := range []string{"/v1/m/session-cockpit", "/v1/m/session-cockpit/", "/v1/m/session-cockpit/panes/1/input"} {
			r := env.Do(m, p, admin, Tenant)
			// Byte for byte, but for the request id every answer has its own
			// (R-OBS-4): the body's request_id and the X-Request-Id header.
			if r.Status != 404 || !bytes.Equal(withoutRequestID(r.Body), withoutRequestID(want.Body)) || r.Header.Get("Content-Type") != want.Header.Get("Content-Type") {
				t.Errorf("%s %s: got %d %s, want the ordinary 404 %s", m, p, r.Status, r.Body, want.Body)
			}
		}
	}
	// Admin (even an agent-kind one) revokes.
	if r := env.Do("POST", node+"/revoke", admin, Tenant); r.Status != 200 {
		t.Fatalf("admin revoke: %d %s", r.Status, r.Body)
	}
}

// Health, readiness and metrics need no credential (R-API-9).
func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	env := NewEnv(t)
	a := env.StartAgent()
	a.AwaitConnected(10 * time.Second)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := env.Do("GET", p, "", ""); r.Status != 200 {
			t.Fatalf("%s: %d", p, r.Status)
		}
	}
	// R-API-9 (issue 16): the public API does not answer /metrics; the
	// metrics listener (loopback by default) does.
	if r := env.Do("GET", "/metrics", "", ""); r.Status != http.StatusNotFound {
		t.Fatalf("GET /metrics on the API: got %d, want 404: %s", r.Status, r.Body)
	}
	st, body := scrape(t, env.MetricsURL(), "")
	if st != http.StatusOK {
		t.Fatalf("scrape: got %d, want 200: %s", st, body)
	}
	if !strings.Contains(body, `olivares_nodes_connected{transport="quic"} 1`) && !strings.Contains(body, `olivares_nodes_connected{transport="yamux"} 1`) {
		t.Errorf("metrics lack the connected node:\n%s", body)
	}
	for _, m := range []string{"olivares_tunnel_reconnects_total", "olivares_tunnel_open_streams", "olivares_tunnel_handshake_failures_total"} {
		if !strings.Contains(body, m) {
			t.Errorf("metrics lack %q:\n%s", m, body)
		}
	}
	if st, _ := scrape(t, strings.TrimSuffix(env.MetricsURL(), "/metrics")+"/v1/nodes", ""); st != http.StatusNotFound {
		t.Fatalf("the metrics listener serves /v1/nodes: got %d, want 404", st)
	}
}

// With metrics.token_file, a scrape must send the token (issue 16).
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	tok := filepath.Join(t.TempDir(), "scrape-token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := NewEnv(t, Options{Configure: func(c *coordd.Config) { c.Metrics.TokenFile = tok }})
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusUnauthorized}, {"s3cret", http.StatusOK}} {
		if st, body := scrape(t, env.MetricsURL(), tc.token); st != tc.want {
			t.Errorf("scrape with token %q: got %d, want %d: %s", tc.token, st, tc.want, body)
		}
	}
}

func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Strict config: an unknown key is an error naming the file, the line and
// the key, for both daemons (R-CFG-1).
func TestStrictConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ap := write("agent.toml", "state_dir = \"/tmp/x\"\ntransport = \"auto\"\n\n[tunnel]\nquic_retyr = \"1s\"\n")
	_, err := agentd.Load(ap)
	if err == nil || !strings.Contains(err.Error(), ap+":5") || !strings.Contains(err.Error(), `"tunnel.quic_retyr"`) {
		t.Fatalf("agent: got %v, want file:line and key", err)
	}
	cp := write("coord.toml", "state_dir = \"/tmp/y\"\n[api]\nlisten = \"127.0.0.1:1\"\nplain = true\n")
	_, err = coordd.Load(cp)
	if err == nil || !strings.Contains(err.Error(), cp+":4") || !strings.Contains(err.Error(), `"api.plain"`) {
		t.Fatalf("coordinator: got %v, want file:line and key", err)
	}
	// A plain listener on a non-loopback address is refused.
	cfg := coordd.DefaultConfig()
	cfg.StateDir = dir
	cfg.API.Listen = "0.0.0.0:7443"
	cfg.API.Plain = true
	if err := cfg.CheckAndSetDefaults(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("plain on 0.0.0.0: got %v", err)
	}
	// A bad transport is named.
	acfg := agentd.DefaultConfig()
	acfg.StateDir = dir
	acfg.Transport = "udp"
	if err := acfg.CheckAndSetDefaults(); err == nil || !strings.Contains(err.Error(), `"udp"`) {
		t.Fatalf("transport udp: got %v", err)
	}
	_ = json.Marshal
}

// R-TUN-4: after a coordinator dies without a goodbye (kill -9) and comes
// back, agents notice at their next packet and redial, instead of after three
// missed heartbeats (issue 16): yamux sees the TCP connection close, and
// QUIC gets a stateless reset from the new process, which keeps the reset
// key in its state dir. The heartbeat here is long (10 s) so that only
// those signals, not the heartbeat deadline (3 × 10 s), can pass within
// the deadline; the figure is logged, never asserted.
func TestAgentsNoticeACrashedCoordinator(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			env := NewEnv(t, Options{Heartbeat: 10 * time.Second})
			a := env.StartAgent(AgentOptions{Transport: tr})
			a.AwaitConnected(10 * time.Second)
			start := time.Now()
			env.CrashCoordinator()
			a.AwaitConnected(25 * time.Second)
			t.Logf("%s: the agent was back %v after the crash", tr, time.Since(start).Round(time.Millisecond))
		})
	}
}

// requestIDField is an error body's request_id member.
var requestIDField = regexp.MustCompile(`,"request_id":"[A-Za-z0-9._:-]*"`)

// withoutRequestID is an error body with its request_id member removed.
func withoutRequestID(b []byte) []byte { return requestIDField.ReplaceAll(b, nil) }
