package coordd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/integration/contract"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// startPlain starts a coordinator with plain HTTP on loopback ports and an
// admin of tenant "default"; each with changes the config first. The
// caller closes it.
func startPlain(t *testing.T, with ...func(*Config)) (*Coordinator, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "olv-coordd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := DefaultConfig()
	cfg.StateDir = dir
	cfg.API.Plain = true
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Tunnel.Listen = "127.0.0.1:0"
	// A free port: the default 7445 is taken by any other coordinator on
	// the host, another test's included.
	cfg.Metrics.Listen = "127.0.0.1:0"
	for _, f := range with {
		f(&cfg)
	}
	c, err := New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.CreatePrincipal(context.Background(), "default", "admin", store.RoleAdmin, store.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	return c, tok
}

// Closing under a steady stream of writes loses no acknowledged write and
// lets no handler meet a closed store: every answer is the write's 201 or
// the drain's 503, never a 500, and every 201 is in the store when it is
// opened again (R-OPS-4).
func TestShutdownUnderLoad(t *testing.T) {
	c, tok := startPlain(t)
	url := c.APIURL() + "/v1/m/sessions/vault/secrets"
	dbPath := filepath.Join(c.Config().StateDir, StoreFile)

	var (
		mu       sync.Mutex
		acked    []string
		statuses = map[int]int{}
		bad      []string
		n        atomic.Int64
	)
	const writers = 8
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second, Transport: contract.Transport(t, &http.Transport{MaxIdleConnsPerHost: writers})}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := "x"
				body, _ := json.Marshal(apitypes.SecretCreate{Name: fmt.Sprintf("s-%d-%d", w, i), Value: &v})
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("X-Olivares-Tenant", "default")
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					// The listener is gone: the write was never acknowledged.
					continue
				}
				var sec apitypes.Secret
				var raw bytes.Buffer
				raw.ReadFrom(resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				switch resp.StatusCode {
				case http.StatusCreated:
					if json.Unmarshal(raw.Bytes(), &sec) == nil {
						acked = append(acked, sec.Ref)
					}
				case http.StatusServiceUnavailable:
				default:
					bad = append(bad, fmt.Sprintf("%d %s", resp.StatusCode, raw.String()))
				}
				mu.Unlock()
				n.Add(1)
			}
		}()
	}
	// Close once the writers are well under way.
	await(t, "200 answers", func() bool { return n.Load() >= 200 })
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	close(stop)
	wg.Wait()
	client.CloseIdleConnections()

	if len(bad) > 0 {
		t.Fatalf("answers during the shutdown other than 201 and 503 (%d): first: %s", len(bad), bad[0])
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged before the shutdown")
	}
	st, err := bolt.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	secs, err := st.ListSecrets(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range secs {
		have[s.Ref] = true
	}
	for _, ref := range acked {
		if !have[ref] {
			t.Fatalf("acknowledged secret %s is not in the store after the shutdown", ref)
		}
	}
	t.Logf("%d writes acknowledged, answers %v", len(acked), statuses)
}

// A request in flight when Close begins finishes against an open store:
// its handler authenticated, then waits for the rest of its body while the
// coordinator starts closing; its write is acknowledged and kept. (Before,
// Close closed the store under it and the write failed with a 500.)
// (R-OPS-4)
func TestShutdownWaitsForRequestInFlight(t *testing.T) {
	c, tok := startPlain(t)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, c.APIURL()+"/v1/m/sessions/vault/secrets", pr)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Olivares-Tenant", "default")
	req.Header.Set("Content-Type", "application/json")
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		// Not through the contract check: its transport reads a body
		// whole before sending, and this one arrives in two halves.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- answer{status: resp.StatusCode, body: b}
	}()
	io.WriteString(pw, `{"name":"in-flight",`)
	await(t, "the handler to run", func() bool { return c.requests.inflight.Load() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	await(t, "Close to begin", func() bool { return c.readyErr() != nil })
	io.WriteString(pw, `"value":"v"}`)
	pw.Close()
	a := <-answered
	if a.err != nil || a.status != http.StatusCreated {
		t.Fatalf("the write in flight: got %d %s %v, want 201", a.status, a.body, a.err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	var sec apitypes.Secret
	json.Unmarshal(a.body, &sec)
	st, err := bolt.Open(filepath.Join(c.Config().StateDir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.GetSecret(context.Background(), sec.Ref); err != nil {
		t.Fatalf("the acknowledged secret %s after Close: %v", sec.Ref, err)
	}
}

// /readyz is read by handlers while Start and Close write the flag; with
// -race an unsynchronised flag fails here.
func TestReadyFlag(t *testing.T) {
	c, _ := startPlain(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ready, unready atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if c.readyErr() == nil {
				ready.Add(1)
			} else {
				unready.Add(1)
			}
		}
	}()
	await(t, "a ready answer", func() bool { return ready.Load() > 0 })
	c.Close()
	await(t, "an unready answer", func() bool { return unready.Load() > 0 })
	cancel()
	wg.Wait()
	if err := c.readyErr(); err == nil {
		t.Fatal("ready after Close")
	}
}

// await polls cond until it holds, failing after 30 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
