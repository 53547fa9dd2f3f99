package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// server answers every request with h and records the last one.
func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		code    string
		message string
		text    string
	}{
		{"API error", 409, `{"error":{"code":"run_live","message":"run r is live; stop it before cleanup"}}`, "run_live", "run r is live; stop it before cleanup", "run r is live; stop it before cleanup (run_live)"},
		{"not an API error", 502, "<html>bad gateway</html>", "", "bad gateway", "bad gateway (HTTP 502)"},
		{"empty body", 418, "", "", "i'm a teapot", "i'm a teapot (HTTP 418)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := server(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			c := apiclient.New(apiclient.Config{URL: srv.URL})
			_, err := c.Run(context.Background(), "r")
			var e *apiclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %T %v, want an *apiclient.Error", err, err)
			}
			if e.Status != tt.status || e.Code != tt.code || e.Message != tt.message || string(e.Body) != tt.body || e.Method != "GET" || e.Path != "/v1/m/sessions/runs/r" {
				t.Errorf("got %+v", e)
			}
			if e.Error() != tt.text || apiclient.StatusOf(err) != tt.status || apiclient.CodeOf(err) != tt.code {
				t.Errorf("got %q, want %q", e.Error(), tt.text)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c := apiclient.New(apiclient.Config{URL: srv.URL})
	_, err := c.Whoami(context.Background())
	if !errors.Is(err, apiclient.ErrUnreachable) || !strings.Contains(err.Error(), srv.URL) || apiclient.StatusOf(err) != 0 {
		t.Fatalf("got %v, want ErrUnreachable naming %s", err, srv.URL)
	}
}

// Timeout bounds a call: a server that never answers is an unreachable
// coordinator, not a hang.
func TestTimeout(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := apiclient.New(apiclient.Config{URL: srv.URL, Timeout: 50 * time.Millisecond})
	_, err := c.Whoami(context.Background())
	if !errors.Is(err, apiclient.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrUnreachable and DeadlineExceeded", err)
	}
}

// The credential headers are sent when set and left out when empty (tests
// ask the API without them), and a body always goes with its type.
func TestRequests(t *testing.T) {
	type seen struct {
		method, uri, auth, tenant, ctype, body string
		hasAuth, hasTenant                     bool
	}
	var got seen
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, hasAuth := r.Header["Authorization"]
		_, hasTenant := r.Header["X-Olivares-Tenant"]
		got = seen{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Olivares-Tenant"), r.Header.Get("Content-Type"), string(b), hasAuth, hasTenant}
		w.Write([]byte(`{}`))
	})
	ctx := context.Background()
	c := apiclient.New(apiclient.Config{URL: srv.URL + "/", Token: "tok", Tenant: "acme"})
	for _, tt := range []struct {
		name string
		call func() error
		want seen
	}{
		{"typed, with a body", func() error {
			_, err := c.Launch(ctx, apitypes.LaunchRequest{ProviderProfileRef: "prof_1"})
			return err
		}, seen{"POST", "/v1/m/sessions/runs", "Bearer tok", "acme", "application/json", `{"provider_profile_ref":"prof_1"}`, true, true}},
		{"query", func() error {
			_, err := c.Messages(ctx, "r 1", apiclient.MessagesQuery{Role: "all", Q: "a b", Limit: 5, Text: true})
			return err
		}, seen{"GET", "/v1/m/sessions/runs/r%201/messages?limit=5&q=a+b&role=all&text=1", "Bearer tok", "acme", "", "", true, true}},
		{"raw bytes, no credentials", func() error {
			_, err := c.With("", "").Do(ctx, "PUT", "/v1/x", []byte("{bad"), http.Header{"X-Extra": {"1"}})
			return err
		}, seen{"PUT", "/v1/x", "", "", "application/json", "{bad", false, false}},
		{"cleanup without a body", func() error {
			_, err := c.Cleanup(ctx, "r", apiclient.CleanupRequest{})
			return err
		}, seen{"POST", "/v1/m/sessions/runs/r/cleanup", "Bearer tok", "acme", "", "", true, true}},
		{"cleanup discarding", func() error {
			_, err := c.Cleanup(ctx, "r", apiclient.CleanupRequest{DiscardWorktree: true})
			return err
		}, seen{"POST", "/v1/m/sessions/runs/r/cleanup", "Bearer tok", "acme", "application/json", `{"discard_worktree":true}`, true, true}},
	} {
		if err := tt.call(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// A refused Codex turn page carries its cursors in the error.
func TestPageTooLarge(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(422)
		json.NewEncoder(w).Encode(apitypes.CodexPageTooLarge{Error: &apitypes.CodexHostError{Code: "page_too_large", Message: "over 20 MiB"}, NextCursor: "n", BackwardsCursor: "b"})
	})
	_, err := apiclient.New(apiclient.Config{URL: srv.URL}).CodexTurns(context.Background(), "h", "t", "c")
	p, ok := apiclient.PageTooLarge(err)
	if !ok || p.NextCursor != "n" || p.BackwardsCursor != "b" || apiclient.StatusOf(err) != 422 {
		t.Fatalf("got %+v, %v from %v", p, ok, err)
	}
}

// CodexContinue tells a new run (201) from the one already continuing the
// thread (200).
func TestCodexContinueCreated(t *testing.T) {
	status := 201
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte(`{"run_ref":"run_9"}`))
	})
	c := apiclient.New(apiclient.Config{URL: srv.URL})
	for _, s := range []int{201, 200} {
		status = s
		r, created, err := c.CodexContinue(context.Background(), "h", "t")
		if err != nil || r.RunRef != "run_9" || created != (s == 201) {
			t.Errorf("status %d: got %s, created %v, %v", s, r.RunRef, created, err)
		}
	}
}
