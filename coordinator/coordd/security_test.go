package coordd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/contract"
)

// R-API-13 (issue 35, finding 8): the API server cuts off a client that trickles its
// request body and a kept-alive connection left idle, each after its
// configured bound, while a change stream, an answer, outlives both.
func TestSlowAndIdleClientsAreCut(t *testing.T) {
	const bound = 300 * time.Millisecond
	c, tok := startPlain(t, func(cfg *Config) {
		cfg.API.ReadTimeout.Duration, cfg.API.IdleTimeout.Duration = bound, bound
		cfg.API.SSEKeepAlive.Duration = bound / 3
	})
	defer c.Close()
	addr := strings.TrimPrefix(c.APIURL(), "http://")
	// closedByServer reads conn to its end: true when the server closed
	// it before this test's own 10 s deadline.
	closedByServer := func(conn net.Conn) bool {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	trickle := dial()
	fmt.Fprintf(trickle, "POST /v1/m/sessions/webhooks HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nX-Olivares-Tenant: default\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr, tok)
	if !closedByServer(trickle) {
		t.Error("a body trickled (1 byte of 100, then nothing) kept its connection past 10 s, want it cut at api.read_timeout")
	}

	idle := dial()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if !closedByServer(idle) {
		t.Error("an idle kept-alive connection stayed open past 10 s, want it closed at api.idle_timeout")
	}

	client := &http.Client{Transport: contract.Transport(t, &http.Transport{})}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.APIURL()+"/v1/m/sessions/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Olivares-Tenant", "default")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	// Six keep-alive comments are twice the read and idle bounds: the
	// stream is still there.
	var got []byte
	buf := make([]byte, 512)
	for bytes.Count(got, []byte(":\n\n")) < 7 {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("the change stream ended after %q: %v; want it to outlive api.read_timeout and api.idle_timeout", got, err)
		}
		got = append(got, buf[:n]...)
	}
}

// R-NOTIF-9: [outbound] allow reaches the API: without it a webhook on
// loopback is 422 destination_refused; with 127.0.0.1/32 it is taken.
func TestOutboundAllowFromConfig(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	body := `{"url":"http://` + ln.Addr().String() + `/hook"}`
	client := &http.Client{Transport: contract.Transport(t, &http.Transport{})}
	for _, tc := range []struct {
		allow []string
		want  int
	}{{nil, http.StatusUnprocessableEntity}, {[]string{"127.0.0.1/32"}, http.StatusCreated}} {
		c, tok := startPlain(t, func(cfg *Config) { cfg.Outbound.Allow = tc.allow })
		req, _ := http.NewRequest(http.MethodPost, c.APIURL()+"/v1/m/sessions/webhooks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Olivares-Tenant", "default")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("outbound.allow %v: POST /webhooks got %d %s, want %d", tc.allow, resp.StatusCode, b, tc.want)
		}
	}
}
