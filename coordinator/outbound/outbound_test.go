package outbound

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// R-NOTIF-9: every form of an address of the coordinator's own network is
// internal, the IPv4 ones carried inside IPv6 included; public ones are not.
func TestInternal(t *testing.T) {
	for _, s := range []string{
		"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "fe80::1",
		"fd00::1", "fc00::1", "0.0.0.0", "0.1.2.3", "::", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
		"100.64.0.1", "192.0.0.8", "198.18.0.1", "240.0.0.1", "255.255.255.255", "224.0.0.1", "ff02::1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "2002:c0a8:101::1", "2001:db8::1", "2001::1", "fec0::1",
	} {
		if !Internal(netip.MustParseAddr(s)) {
			t.Errorf("Internal(%s): got false, want true", s)
		}
	}
	for _, s := range []string{"1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"} {
		if Internal(netip.MustParseAddr(s)) {
			t.Errorf("Internal(%s): got true, want false", s)
		}
	}
}

// listener is a server on loopback that counts the connections it took.
func listener(t *testing.T, network, addr string, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen %s: %v", addr, err)
	}
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

func mustGuard(t *testing.T, o Options) *Guard {
	t.Helper()
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func post(t *testing.T, g *Guard, u string) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	return g.Do(req)
}

// R-NOTIF-9: with no allowlist, no form of a loopback, metadata or
// unspecified address is taken at Check or reached by Do (the listeners on
// 127.0.0.1 and ::1 take no connection), and the reason a tenant reads is
// the one a closed port gives: "could not connect".
func TestGuardRefusesInternalForms(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("internal secret")) })
	v4, n4 := listener(t, "tcp4", "127.0.0.1:0", ok)
	_, port, _ := net.SplitHostPort(v4.Listener.Addr().String())
	v6, n6 := listener(t, "tcp6", "[::1]:"+port, ok)
	_ = v6
	g := mustGuard(t, Options{})
	for _, host := range []string{"127.0.0.1", "localhost", "LOCALHOST.", "api.localhost", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "[::]",
		"127.0.0.2", "2130706433", "[::ffff:7f00:1]", "169.254.169.254", "10.0.0.1", "[fd00::1]", "100.64.0.1"} {
		u := "http://" + host + ":" + port + "/x"
		if err := g.Check(context.Background(), u, false); err == nil {
			t.Errorf("Check(%s): got nil, want a refusal", u)
		}
		if host == "169.254.169.254" || host == "10.0.0.1" || host == "[fd00::1]" || host == "100.64.0.1" {
			continue // nothing of ours listens there: Check is enough
		}
		status, err := post(t, g, u)
		if err == nil || status != 0 || Reason(err) != "could not connect" {
			t.Errorf("Do(%s): got %d %v (%q), want an error reading \"could not connect\"", u, status, err, Reason(err))
		}
	}
	if n4.Load() != 0 || n6.Load() != 0 {
		t.Errorf("the loopback listeners took %d and %d connections, want none", n4.Load(), n6.Load())
	}
	// A closed port on an allowed address reads the same.
	open := mustGuard(t, Options{Allow: []string{"127.0.0.1/32", "::1"}})
	closed, _ := net.Listen("tcp4", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String() + "/x"
	closed.Close()
	if _, err := post(t, open, closedURL); Reason(err) != "could not connect" {
		t.Errorf("a closed port: got %v (%q), want \"could not connect\"", err, Reason(err))
	}
	// The allowlist lets through what it names, and only that.
	if status, err := post(t, open, v4.URL); err != nil || status != 200 {
		t.Errorf("allowed 127.0.0.1: got %d %v, want 200", status, err)
	}
	if status, err := post(t, open, "http://[::1]:"+port+"/"); err != nil || status != 200 {
		t.Errorf("allowed ::1: got %d %v, want 200", status, err)
	}
	if err := open.Check(context.Background(), "http://10.0.0.1/", false); !errors.Is(err, ErrInternal) {
		t.Errorf("10.0.0.1 with 127.0.0.1/32 allowed: got %v, want ErrInternal", err)
	}
}

// R-NOTIF-9: the scheme is http(s), https only where asked; a name that
// resolves to a public and an internal address is refused whole; a name
// checked once is resolved and checked again at each send, and the
// connection goes to the address checked (a rebinding answer reaches
// nothing); an allowed name is dialled at the address its lookup gave.
func TestGuardNamesAndSchemes(t *testing.T) {
	ctx := context.Background()
	var answers atomic.Int32
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "mixed.test":
			return []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("10.9.9.9")}, nil
		case "rebind.test":
			if answers.Add(1) == 1 {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "hooks.corp.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	srv, n := listener(t, "tcp4", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	g := mustGuard(t, Options{Lookup: lookup, Allow: []string{"127.0.0.1/32"}})
	for _, tc := range []struct {
		url       string
		httpsOnly bool
		want      error
	}{
		{"ftp://1.1.1.1/x", false, ErrScheme},
		{"/relative", false, ErrScheme},
		{"http://user:pw@1.1.1.1/", false, ErrScheme},
		{"http://1.1.1.1/push", true, ErrScheme},
		{"https://1.1.1.1/push", true, nil},
		{"https://mixed.test/", false, ErrInternal},
		// A name that does not resolve yet is stored; each send checks it
		// again (below: it fails there as could not connect).
		{"https://nowhere.test/", false, nil},
		{"http://2130706433/", false, ErrUnresolved},
		{"http://0x7f.1/", false, ErrUnresolved},
	} {
		if err := g.Check(ctx, tc.url, tc.httpsOnly); !errors.Is(err, tc.want) {
			t.Errorf("Check(%s, https only %v): got %v, want %v", tc.url, tc.httpsOnly, err, tc.want)
		}
	}
	if status, err := post(t, g, "http://nowhere.test:"+port+"/"); err == nil || Reason(err) != "could not connect" {
		t.Errorf("nowhere.test at send: got %d %v, want could not connect", status, err)
	}
	if err := g.Check(ctx, "http://rebind.test:"+port+"/", false); err != nil {
		t.Fatalf("Check(rebind.test) at first: %v", err)
	}
	if status, err := post(t, g, "http://rebind.test:"+port+"/"); err == nil || Reason(err) != "could not connect" {
		t.Errorf("rebind.test at send: got %d %v, want could not connect", status, err)
	}
	named := mustGuard(t, Options{Lookup: lookup, Allow: []string{"hooks.corp.test"}})
	if status, err := post(t, named, "http://hooks.corp.test:"+port+"/"); err != nil || status != 204 {
		t.Errorf("an allowed name: got %d %v, want 204", status, err)
	}
	if n.Load() != 1 {
		t.Errorf("the listener took %d connections, want 1 (the allowed name's)", n.Load())
	}
	if _, err := New(Options{Allow: []string{"10.0.0.0/8", "bad entry/"}}); err == nil || !strings.Contains(err.Error(), "bad entry/") {
		t.Errorf("New with a bad allow entry: got %v, want an error naming it", err)
	}
}

// R-NOTIF-9: a redirect is an answer, never followed; an endless body is
// read to the bound only; a receiver that never answers is given up at the
// timeout, and the reason says so.
func TestGuardBounds(t *testing.T) {
	var hit atomic.Int32
	target, _ := listener(t, "tcp4", "127.0.0.1:0", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Add(1) }))
	hang := make(chan struct{})
	srv, _ := listener(t, "tcp4", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		case "/endless":
			buf := make([]byte, 32<<10)
			for {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
		case "/hang":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(func() { close(hang) }) // before the server's Close, which waits for its handlers
	g := mustGuard(t, Options{Allow: []string{"127.0.0.1/32"}, MaxResponse: 1 << 10, Timeout: 300 * time.Millisecond})
	if status, err := post(t, g, srv.URL+"/redirect"); err != nil || status != http.StatusTemporaryRedirect || hit.Load() != 0 {
		t.Errorf("a redirect: got %d %v (target hit %d times), want 307 and no request to the target", status, err, hit.Load())
	}
	if status, err := post(t, g, srv.URL+"/endless"); err != nil || status != 200 {
		t.Errorf("an endless body: got %d %v, want 200", status, err)
	}
	if status, err := post(t, g, srv.URL+"/hang"); err == nil || Reason(err) != "no answer in time" {
		t.Errorf("no answer: got %d %v (%q), want \"no answer in time\"", status, err, Reason(err))
	}
}
